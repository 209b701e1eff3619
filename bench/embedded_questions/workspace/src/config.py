"""Settings of the ledger."""

DEFAULT_CURRENCY = "EUR"
MAX_ENTRIES = 500
