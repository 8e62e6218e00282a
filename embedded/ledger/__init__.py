"""The embedded cluster's ledger store: BookKeeper's role (append-only ledgers of entries).

Brokers use `embedded.ledger.client.LedgerClient`; the process is `python -m embedded.ledger`.
See README.md in this folder for what follows BookKeeper and what is simplified.
"""
