"""`python -m embedded.broker --config conf/broker-<i>.json`: one broker process."""

from embedded.broker.broker import BrokerService
from harness.service import run_service

if __name__ == "__main__":
    run_service(BrokerService)
