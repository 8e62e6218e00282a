"""Managed ledgers: a topic (or a transaction log) as a list of ledgers on the ledger store.

`api` is what other components may use (the transaction paths included); `ledger`,
`cursor`, `cursor_state`, `ranges`, `cache`, `metadata` and `factory` implement it.
"""
