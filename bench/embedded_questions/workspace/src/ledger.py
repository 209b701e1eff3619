"""The ledger: entries read from and written to a CSV file."""

import csv

from config import DEFAULT_CURRENCY, MAX_ENTRIES


def parse_amount(text):
    """An amount in cents from text such as "12.50"; an empty string is 0."""
    if not text.strip():
        return 0
    return round(float(text) * 100)


class Ledger:
    """Entries in one currency, at most MAX_ENTRIES of them."""

    def __init__(self, currency=DEFAULT_CURRENCY):
        self.currency = currency
        self.entries = []

    def add(self, date, amount, note=""):
        if len(self.entries) >= MAX_ENTRIES:
            raise ValueError("the ledger is full")
        self.entries.append((date, parse_amount(amount), note))

    def save(self, path):
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows(self.entries)
