"""Smallest reproduction of docs/findings/v5-stale-last-message-id.md on a running cluster.

GET_LAST_MESSAGE_ID on a v5 segment written only by transactions keeps its first answer
after later transactions commit, although the committed messages are stored and
delivered. Three one-message transactions on a one-segment scalable topic show it:

    txnbench cluster up --target pulsar --path v5
    python -m tools.repro.v5_stale_last_message_id "$(txnbench cluster status --json | jq -r .service_url)" \
        "$(txnbench cluster status --json | jq -r .admin_url)"

`reproduce` returns the observations; tests/pulsar/test_pulsar_smoke.py holds Pulsar to
the fixed behaviour (the last message id reaches the last committed message) as a strict
expected failure, so the day Pulsar fixes it the test says so.
"""

from __future__ import annotations

import argparse
import uuid
from dataclasses import dataclass

from harness.client import MessageId, PulsarClient
from harness.client.admin import AdminClient
from harness.client.timers import Deadline

TRANSACTIONS = 3
RECEIVE_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Observation:
    topic: str
    committed: tuple[MessageId, ...]        # where each one-message transaction's message landed
    delivered: tuple[MessageId, ...]        # what a durable subscription received afterwards
    first_last_id: MessageId                # GET_LAST_MESSAGE_ID after the first commit
    final_last_id: MessageId                # GET_LAST_MESSAGE_ID after every commit

    @property
    def stale(self) -> bool:
        """The broker's last message id is behind the last committed, delivered message."""
        last = self.committed[-1]
        return (self.final_last_id.ledger_id, self.final_last_id.entry_id) < (last.ledger_id, last.entry_id)


def reproduce(service_url: str, admin_url: str, *, listener_name: str | None = "external") -> Observation:
    topic = f"topic://public/default/lmid-{uuid.uuid4().hex[:6]}"
    AdminClient(admin_url).create_scalable_topic(topic, 1)
    with PulsarClient(service_url, txn_path="v5", listener_name=listener_name, operation_timeout_s=20) as client:
        producer = client.create_producer(topic)
        subscription = client.subscribe(topic, "s", sub_type="Exclusive")
        segment = subscription.consumers[0]

        def commit_one(value: str) -> MessageId:
            txn = client.new_transaction(timeout_s=60)
            receipt = producer.send(value.encode(), txn=txn)
            txn.commit()
            return receipt.message_id

        committed = [commit_one("m1")]
        first = segment.last_message_id(Deadline.after(10))
        committed += [commit_one(f"m{i}") for i in range(2, TRANSACTIONS + 1)]
        delivered = []
        for _ in range(TRANSACTIONS * 2):   # bounded: ends at the first quiet receive
            message = subscription.receive(timeout_s=RECEIVE_TIMEOUT_S)
            if message is None:
                break
            delivered.append(message.message_id)
            subscription.acknowledge(message)
        final = segment.last_message_id(Deadline.after(10))
    return Observation(topic, tuple(committed), tuple(delivered), first, final)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("service_url")
    parser.add_argument("admin_url")
    parser.add_argument("--listener", default="external", help="advertised listener to look up (pulsar target)")
    args = parser.parse_args(argv)
    seen = reproduce(args.service_url, args.admin_url, listener_name=args.listener or None)
    print(f"topic {seen.topic}")
    print(f"committed at {', '.join(map(str, seen.committed))}; delivered {', '.join(map(str, seen.delivered))}")
    print(f"GET_LAST_MESSAGE_ID after the first commit {seen.first_last_id}, after all {seen.final_last_id}")
    print("STALE: the broker's last message id is behind committed, delivered messages" if seen.stale
          else "not reproduced: the last message id follows the commits")
    return 1 if seen.stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
