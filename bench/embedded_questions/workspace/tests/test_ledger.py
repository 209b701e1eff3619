from ledger import Ledger, parse_amount


def test_parse_amount():
    assert parse_amount("12.50") == 1250


def test_empty_amount_is_zero():
    assert parse_amount("") == 0


def test_full_ledger_refuses():
    ledger = Ledger()
    ledger.entries = [None] * 500
    try:
        ledger.add("2026-01-01", "1")
    except ValueError:
        return
    assert False
