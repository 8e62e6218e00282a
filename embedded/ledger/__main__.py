"""`python -m embedded.ledger --config ledger.json`: the ledger store process."""

from embedded.ledger.server import LedgerService
from harness.service import run_service

if __name__ == "__main__":
    run_service(LedgerService.from_config)
