from ledger import Ledger
from report import monthly_totals


def test_monthly_totals():
    ledger = Ledger()
    ledger.add("2026-01-03", "2.00")
    ledger.add("2026-01-20", "3.00")
    assert monthly_totals(ledger) == {"2026-01": 500}


def test_empty_ledger():
    assert monthly_totals(Ledger()) == {}
