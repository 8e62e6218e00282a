"""PIP-473 transactions: records, coordinator, transaction buffer, pending acks."""
