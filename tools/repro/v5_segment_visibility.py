"""How late do a v5 segment's committed messages turn visible? (docs/findings/v5-segment-visibility-lag.md)

Runs transactions from several clients on one scalable topic (one segment by default),
interleaving commits and aborts, then reads the topic again and again: a fresh
non-durable reader from the earliest position, a fresh durable subscription, and a
durable subscription made before the load (like the benchmark's `verify`). Every
reader reads until it has been quiet for `quiet_s`, so no reader depends on
GET_LAST_MESSAGE_ID (see v5-stale-last-message-id.md for why that matters).

    txnbench cluster up --target pulsar --path v5
    python -m tools.repro.v5_segment_visibility <service_url> <admin_url> \
        --clients 8 --txns 20 --messages 2 --abort-every 3 --probe-at 0,20,50

A committed message that no reader delivers is "hidden"; the output names, for every
probe, how many committed messages each reader got and the first hidden entry. On
Pulsar 5.0.1 with ZooKeeper that run hid 160 of 208 committed entries right after the
load and none 85 s later. `--probe-topics` probes existing topics instead (e.g. a
benchmark run's), without load; `--wake-up` runs the connected-consumer check.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from harness.client import Consumer, PulsarClient
from harness.client.admin import AdminClient

QUIET_S = 4.0            # a reader is done after this long without a message
READ_BOUND_S = 60.0      # and in any case after this long


@dataclass(frozen=True)
class Sent:
    """One transactional message: where it landed and how its transaction ended."""
    client: int
    txn: str
    value: str
    segment: str
    entry: tuple[int, int]
    outcome: str             # committed | aborted
    ended_s: float           # seconds since load start when commit/abort returned


@dataclass
class Probe:
    """One read of the topic at `at_s` seconds after the load ended."""
    at_s: float
    reader: str
    delivered: dict[str, list[tuple[int, int]]] = field(default_factory=dict)   # segment -> entries


def _entry(msg_id: object) -> tuple[int, int]:
    ledger, entry = str(msg_id).split(":")[:2]
    return int(ledger), int(entry)


def run_load(service_url: str, topic: str, *, clients: int, txns: int, messages: int,
             abort_every: int, listener_name: str | None) -> list[Sent]:
    """`clients` threads, each `txns` transactions of `messages` sends; every
    `abort_every`-th transaction of a client (counting from its second) aborts."""
    sent: list[Sent] = []
    lock = threading.Lock()
    start = time.monotonic()
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            with PulsarClient(service_url, txn_path="v5", listener_name=listener_name,
                              operation_timeout_s=30) as client:
                producer = client.create_producer(topic)
                for n in range(txns):
                    txn = client.new_transaction(timeout_s=120)
                    mine = []
                    for m in range(messages):
                        value = f"c{index}.t{n}.m{m}"
                        receipt = producer.send(value.encode(), txn=txn, key=value)
                        mine.append((value, receipt))
                    abort = abort_every > 0 and n % abort_every == 1
                    (txn.abort if abort else txn.commit)()
                    ended = time.monotonic() - start
                    with lock:
                        for value, receipt in mine:
                            sent.append(Sent(index, str(txn.id), value, receipt.segment or receipt.topic,
                                             _entry(receipt.message_id),
                                             "aborted" if abort else "committed", round(ended, 3)))
        except BaseException as exc:  # reported by the caller, not swallowed
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    if errors:
        raise RuntimeError(f"load failed: {errors[0]!r}") from errors[0]
    return sorted(sent, key=lambda s: (s.segment, s.entry))


def read_quietly(consumer: Consumer, *, quiet_s: float, bound_s: float, ack: bool) -> dict[str, list[tuple[int, int]]]:
    """Receive until `quiet_s` without a message (at most `bound_s`); entries by segment."""
    out: dict[str, list[tuple[int, int]]] = {}
    end = time.monotonic() + bound_s
    while time.monotonic() < end:
        message = consumer.receive(timeout_s=quiet_s)
        if message is None:
            break
        out.setdefault(message.segment or message.topic, []).append(_entry(message.message_id))
        if ack:
            consumer.acknowledge(message)
    return out


def probe(client: PulsarClient, topic: str, at_s: float, *, quiet_s: float,
          standing: Consumer | None) -> list[Probe]:
    """Read `topic` with a fresh reader, a fresh durable subscription and `standing`."""
    probes = []
    reader = client.create_reader(topic)
    try:
        probes.append(Probe(at_s, "fresh-reader",
                            read_quietly(reader.consumer, quiet_s=quiet_s, bound_s=READ_BOUND_S, ack=False)))
    finally:
        reader.close()
    fresh = client.subscribe(topic, f"probe-{uuid.uuid4().hex[:6]}", sub_type="Exclusive")
    try:
        probes.append(Probe(at_s, "fresh-subscription",
                            read_quietly(fresh, quiet_s=quiet_s, bound_s=READ_BOUND_S, ack=True)))
    finally:
        fresh.close()
    if standing is not None:
        probes.append(Probe(at_s, "standing-subscription",
                            read_quietly(standing, quiet_s=quiet_s, bound_s=READ_BOUND_S, ack=True)))
    return probes


def summarize(sent: Sequence[Sent], probes: Sequence[Probe]) -> list[str]:
    """One line per probe: committed delivered / committed, first hidden committed entry."""
    committed: dict[str, set[tuple[int, int]]] = {}
    for s in sent:
        if s.outcome == "committed":
            committed.setdefault(s.segment, set()).add(s.entry)
    lines = []
    cumulative: dict[str, set[tuple[int, int]]] = {}
    for p in probes:
        standing = p.reader == "standing-subscription"
        if standing:   # it acknowledges as it goes: judge it on all it ever delivered
            for segment, entries in p.delivered.items():
                cumulative.setdefault(segment, set()).update(entries)
        segments = set(p.delivered) | (set(cumulative) if standing else set())
        for segment in sorted(segments):
            entries = p.delivered.get(segment, [])
            got = cumulative[segment] if standing else set(entries)
            want = committed.get(segment, set())
            hidden = sorted(want - got)
            top = max(entries, default=None)
            lines.append(f"+{p.at_s:>5.0f}s {p.reader:<22} {segment.rsplit('/', 1)[-1]}: "
                         f"{len(got & want)}/{len(want)} committed delivered, highest entry read "
                         f"{top}, first hidden {hidden[0] if hidden else None}, hidden {len(hidden)}")
        if not segments:
            lines.append(f"+{p.at_s:>5.0f}s {p.reader:<22} nothing delivered")
    return lines


@dataclass(frozen=True)
class WakeUp:
    """The standing-subscription experiment: what an already connected consumer receives."""
    topic: str
    first: tuple[tuple[int, int], ...]                 # entries of the first committed transaction
    standing_after_commit: tuple[tuple[int, int], ...]  # received by the standing consumer within wait_s
    fresh_after_commit: tuple[tuple[int, int], ...]     # received by a subscription made afterwards
    second: tuple[tuple[int, int], ...]                # entries of a second committed transaction
    standing_after_second: tuple[tuple[int, int], ...]  # received by the standing consumer then

    @property
    def stalled(self) -> bool:
        """The standing consumer missed committed messages that a fresh subscription got."""
        return set(self.first) <= set(self.fresh_after_commit) and not set(self.first) <= set(self.standing_after_commit)


def wake_up(service_url: str, admin_url: str, *, wait_s: float = 10.0, messages: int = 2,
            listener_name: str | None = "external") -> WakeUp:
    """One segment, one consumer connected first; one committed transaction; wait.

    Checks whether a connected consumer is woken when a commit makes messages
    visible. On v5 a commit appends no marker to the segment, and the max-read-position
    callback (PersistentTopic's) only records a timestamp, so the only thing that can
    wake it is the managed cursor re-polling while entries wait above the max read
    position. Pulsar 5.0.1 passes this check (docs/findings/v5-segment-visibility-stall.md):
    kept as the test that rules that explanation out.
    """
    topic = f"topic://public/default/wake-{uuid.uuid4().hex[:6]}"
    AdminClient(admin_url).create_scalable_topic(topic, 1)
    with PulsarClient(service_url, txn_path="v5", listener_name=listener_name, operation_timeout_s=30) as client:
        standing = client.subscribe(topic, "standing", sub_type="Exclusive")
        producer = client.create_producer(topic)

        def commit(tag: str) -> tuple[tuple[int, int], ...]:
            txn = client.new_transaction(timeout_s=120)
            ids = [producer.send(f"{tag}{m}".encode(), txn=txn).message_id for m in range(messages)]
            txn.commit()
            return tuple(_entry(i) for i in ids)

        def entries(delivered: dict[str, list[tuple[int, int]]]) -> tuple[tuple[int, int], ...]:
            return tuple(sorted(e for got in delivered.values() for e in got))

        first = commit("a")
        standing_1 = entries(read_quietly(standing, quiet_s=wait_s, bound_s=wait_s * 2, ack=True))
        fresh = client.subscribe(topic, "fresh", sub_type="Exclusive")
        fresh_1 = entries(read_quietly(fresh, quiet_s=wait_s, bound_s=wait_s * 2, ack=True))
        fresh.close()
        second = commit("b")
        standing_2 = entries(read_quietly(standing, quiet_s=wait_s, bound_s=wait_s * 2, ack=True))
    return WakeUp(topic, first, standing_1, fresh_1, second, standing_2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("service_url")
    parser.add_argument("admin_url")
    parser.add_argument("--listener", default="external", help="advertised listener (pulsar target)")
    parser.add_argument("--segments", type=int, default=1)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--txns", type=int, default=20, help="transactions per client")
    parser.add_argument("--messages", type=int, default=2, help="messages per transaction")
    parser.add_argument("--abort-every", type=int, default=3, help="0: never abort")
    parser.add_argument("--probe-at", default="0,30", help="seconds after the load, comma separated")
    parser.add_argument("--quiet", type=float, default=QUIET_S)
    parser.add_argument("--probe-topics", default="", help="comma separated topics: probe only, no load")
    parser.add_argument("--json", default="", help="write sent+probes here")
    parser.add_argument("--wake-up", action="store_true",
                        help="run only the standing-consumer experiment (one transaction at a time)")
    args = parser.parse_args(argv)
    listener = args.listener or None
    if args.wake_up:
        seen = wake_up(args.service_url, args.admin_url, messages=args.messages, listener_name=listener)
        print(f"topic {seen.topic}")
        print(f"txn 1 committed at {list(seen.first)}")
        print(f"standing consumer (connected before) received {list(seen.standing_after_commit)}")
        print(f"fresh subscription (made after) received {list(seen.fresh_after_commit)}")
        print(f"txn 2 committed at {list(seen.second)}")
        print(f"standing consumer then received {list(seen.standing_after_second)}")
        print("STALLED: the connected consumer was not woken by the commit" if seen.stalled
              else "not reproduced: the connected consumer got the commit")
        return 1 if seen.stalled else 0
    schedule = [float(x) for x in args.probe_at.split(",") if x.strip()]

    topics = [t for t in args.probe_topics.split(",") if t]
    sent: list[Sent] = []
    standing: dict[str, Consumer] = {}
    with PulsarClient(args.service_url, txn_path="v5", listener_name=listener, operation_timeout_s=30) as client:
        if not topics:
            topic = f"topic://public/default/vis-{uuid.uuid4().hex[:6]}"
            AdminClient(args.admin_url).create_scalable_topic(topic, args.segments)
            topics = [topic]
            standing[topic] = client.subscribe(topic, "verify", sub_type="Exclusive")
            print(f"topic {topic}: {args.clients} clients x {args.txns} txns x {args.messages} msgs, "
                  f"abort every {args.abort_every}", flush=True)
            sent = run_load(args.service_url, topic, clients=args.clients, txns=args.txns,
                            messages=args.messages, abort_every=args.abort_every, listener_name=listener)
            for s in sent:
                print(f"  {s.segment.rsplit('/', 1)[-1]} {s.entry[0]}:{s.entry[1]} "
                      f"{s.outcome[0]} {s.txn} {s.value} ended +{s.ended_s}s", flush=True)
        load_end = time.monotonic()
        probes: list[Probe] = []
        for at in schedule:
            time.sleep(max(0.0, load_end + at - time.monotonic()))
            for topic in topics:
                got = probe(client, topic, time.monotonic() - load_end, quiet_s=args.quiet,
                            standing=standing.get(topic))
                probes.extend(got)
                for p in got:
                    print(f"+{p.at_s:.0f}s {topic} {p.reader}: " + ", ".join(
                        f"{seg.rsplit('/', 1)[-1]} n={len(e)} max={max(e)}" for seg, e in sorted(p.delivered.items())),
                        flush=True)
            if sent:
                last_round = summarize(sent, probes)[-len(summarize(sent, probes[-3:])):]
                for line in last_round:
                    print(line, flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"sent": [asdict(s) for s in sent], "probes": [asdict(p) for p in probes]}, fh)
    last_round = summarize(sent, probes)[-len(summarize(sent, probes[-3:])):] if sent else []
    hidden = any(not line.endswith("hidden 0") for line in last_round)
    return 1 if hidden else 0


if __name__ == "__main__":
    raise SystemExit(main())
