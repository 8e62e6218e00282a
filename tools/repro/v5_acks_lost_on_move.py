"""Small reproduction of docs/findings/v5-committed-acks-redelivered-after-crash.md, no crash needed.

On a v5 segment, a transaction acknowledges messages; the segment then moves (a graceful
unload of the segment, or on 5.0.1, which has no such endpoint, of its namespace: the
owner closes it, the next lookup loads it again); the transaction commits.
Pulsar promises the acks take effect at commit, so the subscription must never deliver
those messages again. Pulsar 5.0.1's `MetadataPendingAckStore` rebuilds a moved
subscription's pending acks as transaction ids only (no positions), so the new owner
neither holds the messages while the transaction is open nor applies the acks at commit
(`PendingAckHandleImpl.commitTxn` of a transaction it does not know does nothing).

    txnbench cluster up --target pulsar --path v5
    python -m tools.repro.v5_acks_lost_on_move <service_url> <admin_url>   # from `cluster status`
    txnbench cluster down

Two cases on fresh one-segment topics: `still` (no unload, the control: nothing may come
back) and `moved` (unload between the acks and the commit). After the commit each case
closes its consumer and subscribes again, so whatever the subscription still owes comes
back: a message that does is a committed ack lost.
"""

from __future__ import annotations

import argparse
import time
import uuid
from dataclasses import dataclass

from harness.client import Consumer, MessageId, PulsarClient
from harness.client.admin import AdminClient, AdminError

MESSAGES = 4
RECEIVE_TIMEOUT_S = 5.0
SETTLE_S = 3.0          # after the unload: long enough for the consumer to reattach
QUIET_S = 4.0           # a receive this long without a message ends a read


@dataclass(frozen=True)
class Case:
    name: str
    topic: str
    acked: tuple[MessageId, ...]               # acknowledged in the transaction
    while_open: tuple[MessageId, ...]          # delivered again while the transaction was open
    after_commit: tuple[MessageId, ...]        # delivered to a fresh consumer after the commit

    @property
    def lost(self) -> bool:
        """A committed ack did not hold: the message came back after the commit."""
        return bool(set(self.after_commit) & set(self.acked))


def _drain(consumer: Consumer, quiet_s: float, limit: int) -> list[MessageId]:
    seen: list[MessageId] = []
    for _ in range(limit):                      # bounded: ends at the first quiet receive
        message = consumer.receive(timeout_s=quiet_s)
        if message is None:
            break
        seen.append(message.message_id)
    return seen


def run_case(client: PulsarClient, admin: AdminClient, name: str, *, move: bool) -> Case:
    topic = f"topic://public/default/ackmove-{name}-{uuid.uuid4().hex[:6]}"
    admin.create_scalable_topic(topic, 1)
    consumer = client.subscribe(topic, "s", sub_type="Shared")
    producer = client.create_producer(topic)
    for i in range(MESSAGES):
        producer.send(f"{name}-{i}".encode())
    received = []
    for _ in range(MESSAGES):
        message = consumer.receive(timeout_s=RECEIVE_TIMEOUT_S)
        if message is None:
            break
        received.append(message)
    if len(received) != MESSAGES:
        raise RuntimeError(f"{name}: received {len(received)} of {MESSAGES} messages before the acks")
    txn = client.new_transaction(timeout_s=60)
    for message in received:
        consumer.acknowledge(message, txn=txn)
    while_open: list[MessageId] = []
    if move:
        segment = received[0].segment
        if segment is None:
            raise RuntimeError(f"{name}: the message names no segment")
        try:
            admin.unload_segment(segment)
        except AdminError as error:
            if "HTTP 404" not in str(error):
                raise
            admin.unload_namespace("public", "default")   # 5.0.1 has no segment unload endpoint
        time.sleep(SETTLE_S)
        while_open = _drain(consumer, 1.0, MESSAGES * 2)
    txn.commit()
    consumer.close()
    again = client.subscribe(topic, "s", sub_type="Shared")
    after = _drain(again, QUIET_S, MESSAGES * 2)
    again.close()
    producer.close()
    return Case(name, topic, tuple(m.message_id for m in received), tuple(while_open), tuple(after))


def reproduce(service_url: str, admin_url: str, *, rounds: int = 1,
              listener_name: str | None = "external") -> list[Case]:
    admin = AdminClient(admin_url)
    cases: list[Case] = []
    with PulsarClient(service_url, txn_path="v5", listener_name=listener_name, operation_timeout_s=30) as client:
        for r in range(rounds):
            cases.append(run_case(client, admin, f"still{r}", move=False))
            cases.append(run_case(client, admin, f"moved{r}", move=True))
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("service_url")
    parser.add_argument("admin_url")
    parser.add_argument("--rounds", type=int, default=3, help="pairs of cases (control, moved)")
    parser.add_argument("--listener", default="external", help="advertised listener to look up (pulsar target)")
    args = parser.parse_args(argv)
    cases = reproduce(args.service_url, args.admin_url, rounds=args.rounds, listener_name=args.listener or None)
    for case in cases:
        print(f"{case.name}: {case.topic}")
        print(f"  acked in the transaction: {', '.join(map(str, case.acked))}")
        print(f"  delivered again while it was open: {', '.join(map(str, case.while_open)) or 'none'}")
        print(f"  delivered after the commit: {', '.join(map(str, case.after_commit)) or 'none'}"
              + ("   <- LOST committed acks" if case.lost else ""))
    lost = [c.name for c in cases if c.lost]
    print(f"lost committed acks in {len(lost)} of {len(cases)} cases: {', '.join(lost) or 'none'}")
    return 1 if lost else 0


if __name__ == "__main__":
    raise SystemExit(main())
