"""Reports over a ledger."""


def monthly_totals(ledger):
    """Cents spent per month ("2026-01": 1250, ...)."""
    totals = {}
    for date, cents, _note in ledger.entries:
        month = date[:7]
        totals[month] = totals.get(month, 0) + cents
    return totals
