"""Synthetic run histories: large, realistic, optionally with planted anomalies.

`python -m tools.synth --events 10000000 --out DIR` writes a run folder
(`manifest.json`, `history/*.jsonl`, `planted.json`) that `txnbench check DIR`
can check; it is how the checker's throughput is measured (docs/checks.md,
"Checker performance") and where the golden histories in tests/data come from.

Theory of operation. Each writer (a Locust worker, `w0`, `w1`, ...) is simulated
in its own process, on its own topics, so writers are generated in parallel
and each writes its own file. Inside a writer, every user is a generator of
timed events; a heap releases them in time order, so indexes rise with time as
the recorder's do. Three kinds of users run:

* producers (atomic-produce): open, 1-4 keyed sends over the writer's topics,
  then commit (about 88%), abort (10%) or a commit whose outcome is unknown
  (`info`, 2%; really committed or aborted at random);
* consume-transform-produce users: receive an input from subscription `ctp` on
  topic 0, then in one transaction ack it and send one output (to `out`) naming
  it in `inputs`;
* ack-only users: receive from subscription `audit` on topic 1 and ack it in a
  transaction.

Consumers only see messages whose transaction committed before they receive
them; an aborted ack puts the message back (it is delivered again). When the
writer has produced its share of events, users finish their transaction and
stop; the drain then reads every topic in log (message id) order, showing the
values of committed transactions, and consumes both subscriptions until empty.
The drain also records the coordinators' view (`txn-state`) of each transaction whose
commit ended `info`, past its timeout plus the bound. The orchestrator's `run` file holds
the phases and `drain-complete`.

Planted anomalies (`--plant all` or a list of classes) are one per class and
writer, each chosen so the expected results are exact; `planted.json` lists
them and the counts the checker must report (some plants also cause a second
class, e.g. a dropped value of a committed transaction is a lost write and a
partial transaction; the expected counts include that).
"""

from __future__ import annotations

import argparse
import heapq
import json
import multiprocessing
import os
import random
import sys
import time
from array import array
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.anomalies import AnomalyClass
from harness.history.schema import (
    FIELDS,
    PHASE_DRAIN_COMPLETE,
    PHASE_SUBSCRIPTION_START,
    SCHEMA_VERSION,
    OpF,
    OpType,
)

NS_PER_MS = 1_000_000
DRAIN_GAP_NS = 30_000 * NS_PER_MS        # drain starts this long after a writer's load ended
DRAIN_PHASE_LEAD_NS = 10_000 * NS_PER_MS  # the `drain` phase starts this long after the last load ended
STALL_NS = 12_000 * NS_PER_MS            # a planted stalled commit (the default threshold is 10 s)
TXN_DEADLINE_NS = 35_000 * NS_PER_MS     # the checker's defaults: txn_timeout_s 30 + abort_bound_s 5
WALL_BASE_MS = 1.8e12

_OK, _FAIL, _INFO, _INVOKE = OpType.OK.value, OpType.FAIL.value, OpType.INFO.value, OpType.INVOKE.value


@dataclass(frozen=True)
class SynthConfig:
    """The shape of a synthetic run. `events` is approximate (users finish their transactions)."""

    events: int = 100_000
    writers: int = 2
    producers: int = 12
    ctp_users: int = 3
    ack_users: int = 2
    topics: int = 4
    keys: int = 16
    abort_ratio: float = 0.10
    unknown_ratio: float = 0.02
    plant: tuple[str, ...] = ()
    seed: int = 1
    path: str = "v4"
    run_id: str = "synthetic"
    stall_after_s: float = 10.0


@dataclass
class WriterReport:
    writer: str
    events: int = 0
    drain_events: int = 0
    load_end_ns: int = 0
    drain_start_ns: int = 0
    drain_end_ns: int = 0
    topics: list[str] = field(default_factory=list)
    subscriptions: list[tuple[str, str]] = field(default_factory=list)
    planted: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    expected: dict[str, int] = field(default_factory=dict)


# An event a user hands to the writer loop: time, process, type, f, fields.
Event = tuple[int, str, str, str, dict[str, Any]]
Tick = tuple[int, None, None, None, None]


class _Writer:
    """One writer's simulation; `run()` writes `<writer>.jsonl` and the drain's file."""

    def __init__(self, cfg: SynthConfig, number: int, out: Path, budget: int) -> None:
        self.cfg = cfg
        self.number = number
        self.name = f"w{number}"
        self.rng = random.Random(cfg.seed * 1_000_003 + number)
        self.out = out
        self.budget = budget
        self.stop = False
        self.report = WriterReport(self.name)
        self.plant = set(cfg.plant)
        self.planted: dict[str, list[dict[str, Any]]] = {}
        self.expected: dict[str, int] = {}
        # topics: 0 feeds `ctp`, 1 feeds `audit`, the rest only final reads; `out` gets CTP outputs
        self.topics = [f"persistent://public/txnbench/{self.name}-t{i}" for i in range(max(2, cfg.topics))]
        self.out_topic = f"persistent://public/txnbench/{self.name}-out"
        self.all_topics = [*self.topics, self.out_topic]
        self.report.topics = list(self.all_topics)
        self.report.subscriptions = [(self.topics[0], "ctp"), (self.topics[1], "audit")]
        self.ledger = {t: 1000 * (number + 1) + i for i, t in enumerate(self.all_topics)}
        # per value (by number): its txn (index into txn_visible), process, key, topic and entry
        self.value_txn = array("q")
        self.value_topic = array("h")
        self.value_entry = array("q")
        self.value_key = array("h")
        self.value_process = array("h")
        self.processes: list[str] = []
        self.txn_visible = bytearray()   # 1: the transaction's values are visible in the final reads
        self.logs: list[array] = [array("q") for _ in self.all_topics]   # value numbers in entry order
        self.ctp_queue: list[tuple[int, int, int, int]] = []    # (available_ns, seq, value, redelivery)
        self.audit_queue: list[tuple[int, int, int, int]] = []
        self.seq = 0
        self.force_commit: set[int] = set()
        self.drop_from_reads: set[int] = set()
        # (txn, its open's completion, a producer's): commits ended info, the drain asks their coordinator
        self.unknown_txns: list[tuple[str, int, bool]] = []
        self.show_in_reads: set[int] = set()

    # ---- naming ------------------------------------------------------------------------------

    def value_name(self, number: int) -> str:
        return f"{self.name}-v{number}"

    def txn_name(self, number: int) -> str:
        return f"{self.number + 1}:{number}"

    def msg_id(self, number: int) -> str:
        topic = self.all_topics[self.value_topic[number]]
        return f"{self.ledger[topic]}:{self.value_entry[number]}:-1"

    def process_id(self, name: str) -> int:
        self.processes.append(name)
        return len(self.processes) - 1

    def note(self, cls: AnomalyClass, count: int = 1, **detail: Any) -> None:
        self.expected[cls.value] = self.expected.get(cls.value, 0) + count
        if detail:
            self.planted.setdefault(cls.value, []).append(detail)

    def want(self, cls: AnomalyClass) -> bool:
        """Plant `cls` now (once per writer), if asked to."""
        if cls.value in self.plant and cls.value not in self.planted:
            self.planted[cls.value] = []
            return True
        return False

    # ---- values and transactions -------------------------------------------------------------

    def new_txn(self) -> int:
        self.txn_visible.append(0)
        return len(self.txn_visible) - 1

    def new_value(self, txn: int, topic: int, key: int, process: int) -> int:
        number = len(self.value_txn)
        self.value_txn.append(txn)
        self.value_topic.append(topic)
        self.value_key.append(key)
        self.value_process.append(process)
        log = self.logs[topic]
        self.value_entry.append(len(log))
        log.append(number)
        return number

    def publish(self, queue: list[tuple[int, int, int, int]], value: int, at_ns: int, redelivery: int) -> None:
        self.seq += 1
        heapq.heappush(queue, (at_ns, self.seq, value, redelivery))

    def take(self, queue: list[tuple[int, int, int, int]], now_ns: int) -> tuple[int, int] | None:
        if queue and queue[0][0] <= now_ns:
            _, _, value, redelivery = heapq.heappop(queue)
            return value, redelivery
        return None

    def outcome(self) -> str:
        """committed, aborted, or unknown-committed / unknown-aborted (commit completes `info`)."""
        r = self.rng.random()
        if r < self.cfg.abort_ratio:
            return "aborted"
        if r < self.cfg.abort_ratio + self.cfg.unknown_ratio:
            return "unknown-committed" if self.rng.random() < 0.5 else "unknown-aborted"
        return "committed"

    def lat(self, low_ms: float, high_ms: float) -> int:
        return int(self.rng.uniform(low_ms, high_ms) * NS_PER_MS)

    # ---- users -------------------------------------------------------------------------------

    def finish(self, p: str, t: int, txn: str, outcome: str, stall: bool = False) -> Iterator[Event]:
        """The transaction's end; returns (via t) after the completion."""
        f = OpF.TXN_ABORT.value if outcome == "aborted" else OpF.TXN_COMMIT.value
        yield (t, p, _INVOKE, f, {"txn": txn})
        done = t + (STALL_NS if stall else self.lat(1, 12))
        kind = _INFO if outcome.startswith("unknown") else _OK
        fields = {"txn": txn, "error": "TimeoutError: commit timed out" if kind == _INFO else None}
        yield (done, p, kind, f, fields)

    def producer(self, user: int) -> Iterator[Event | Tick]:
        p = f"{self.name}/u{user}"
        pid = self.process_id(p)
        t = self.lat(0, 50)
        last_committed: str | None = None
        while not self.stop:
            t += self.lat(1, 8)
            txn = self.new_txn()
            tname = self.txn_name(txn)
            # A planted txn-id-reuse: the coordinator hands out this process's last committed id again.
            reused = last_committed is not None and self.want(AnomalyClass.TXN_ID_REUSE)
            if reused and last_committed is not None:
                tname = last_committed
                self.note(AnomalyClass.TXN_ID_REUSE, txn=tname)
            yield (t, p, _INVOKE, OpF.TXN_OPEN.value, {})
            t += self.lat(0.5, 3)
            yield (t, p, _OK, OpF.TXN_OPEN.value, {"txn": tname})
            outcome = "committed" if reused else self.outcome()
            if outcome.startswith("unknown"):
                self.unknown_txns.append((tname, t, True))
            if outcome == "committed":
                last_committed = tname
            n = self.rng.randint(1, 4)
            plants: list[AnomalyClass] = []
            if outcome == "committed" and not reused:
                for cls in (AnomalyClass.LOST_WRITE, AnomalyClass.DIRTY_READ, AnomalyClass.STALLED_COMMIT):
                    if n >= 2 and not plants and self.want(cls):
                        plants.append(cls)
            elif outcome == "aborted" and self.want(AnomalyClass.ABORTED_READ):
                plants.append(AnomalyClass.ABORTED_READ)
            values = []
            for _ in range(n):
                topic = self.rng.randrange(len(self.topics))
                key = self.rng.randrange(self.cfg.keys)
                value = self.new_value(txn, topic, key, pid)
                values.append(value)
                fields = {"txn": tname, "topic": self.all_topics[topic], "key": f"k{key}",
                          "value": self.value_name(value)}
                t += self.lat(0.2, 1)
                yield (t, p, _INVOKE, OpF.SEND.value, fields)
                t += self.lat(0.5, 4)
                yield (t, p, _OK, OpF.SEND.value, {**fields, "msg_id": self.msg_id(value)})
                if AnomalyClass.DIRTY_READ in plants and len(values) == 1:
                    t += NS_PER_MS
                    spy = f"{self.name}/spy"
                    yield (t, spy, _OK, OpF.RECEIVE.value, {
                        "topic": fields["topic"], "subscription": "spy", "value": fields["value"],
                        "msg_id": self.msg_id(value), "extra": {"redelivery": 0}})
                    self.note(AnomalyClass.DIRTY_READ, value=fields["value"], txn=tname)
            t += self.lat(0.2, 1)
            stall = AnomalyClass.STALLED_COMMIT in plants
            for event in self.finish(p, t, tname, outcome, stall=stall):
                t = event[0]
                yield event
            if stall:
                self.note(AnomalyClass.STALLED_COMMIT, txn=tname)
            if outcome in ("committed", "unknown-committed"):
                self.txn_visible[txn] = 1
                for value in values:
                    if self.value_topic[value] == 0:
                        self.publish(self.ctp_queue, value, t, 0)
                    elif self.value_topic[value] == 1:
                        if outcome == "committed" and not plants and not reused \
                                and self.want(AnomalyClass.UNDELIVERED):
                            # The subscription skips it: committed, visible, never delivered to `audit`.
                            self.note(AnomalyClass.UNDELIVERED, value=self.value_name(value),
                                      subscription="audit", txn=tname)
                            continue
                        self.publish(self.audit_queue, value, t, 0)
            if AnomalyClass.LOST_WRITE in plants:
                self.drop_from_reads.add(values[-1])
                self.note(AnomalyClass.LOST_WRITE, value=self.value_name(values[-1]), txn=tname)
                self.note(AnomalyClass.PARTIAL_TXN, txn=tname)
            if AnomalyClass.ABORTED_READ in plants:
                self.show_in_reads.update(values)
                self.note(AnomalyClass.ABORTED_READ, count=len(values), txn=tname,
                          values=[self.value_name(v) for v in values])

    def consumer(self, user: int, *, ctp: bool) -> Iterator[Event | Tick]:
        p = f"{self.name}/{'ctp' if ctp else 'audit'}{user}"
        pid = self.process_id(p)
        queue = self.ctp_queue if ctp else self.audit_queue
        sub = "ctp" if ctp else "audit"
        topic = self.topics[0] if ctp else self.topics[1]
        t = self.lat(0, 50)
        while not self.stop:
            t += self.lat(1, 6)
            got = self.take(queue, t)
            if got is None:
                yield (t, None, None, None, None)
                continue
            value, redelivery = got
            vname = self.value_name(value)
            yield (t, p, _OK, OpF.RECEIVE.value, {"topic": topic, "subscription": sub, "value": vname,
                                                  "msg_id": self.msg_id(value),
                                                  "extra": {"redelivery": redelivery}})
            txn = self.new_txn()
            tname = self.txn_name(txn)
            t += self.lat(0.2, 1)
            yield (t, p, _INVOKE, OpF.TXN_OPEN.value, {})
            t += self.lat(0.5, 3)
            yield (t, p, _OK, OpF.TXN_OPEN.value, {"txn": tname})
            forced = value in self.force_commit
            outcome = "committed" if forced else self.outcome()
            if outcome.startswith("unknown"):
                self.unknown_txns.append((tname, t, False))
            self.force_commit.discard(value)
            ack = {"txn": tname, "topic": topic, "subscription": sub, "value": vname,
                   "msg_id": self.msg_id(value)}
            t += self.lat(0.2, 1)
            yield (t, p, _INVOKE, OpF.ACK.value, ack)
            t += self.lat(0.5, 3)
            yield (t, p, _OK, OpF.ACK.value, ack)
            doubled = outcome == "committed" and not ctp and not forced and self.want(AnomalyClass.DOUBLE_ACK)
            if doubled:
                yield from self._second_claim(f"{p}/l1", t, ack, tname)
            output = None
            if ctp:
                output = self.new_value(txn, len(self.all_topics) - 1, self.value_key[value], pid)
                fields = {"txn": tname, "topic": self.out_topic, "key": f"k{self.value_key[value]}",
                          "value": self.value_name(output), "inputs": [vname]}
                t += self.lat(0.2, 1)
                yield (t, p, _INVOKE, OpF.SEND.value, fields)
                t += self.lat(0.5, 4)
                yield (t, p, _OK, OpF.SEND.value, {**fields, "msg_id": self.msg_id(output)})
            t += self.lat(0.2, 1)
            for event in self.finish(p, t, tname, outcome):
                t = event[0]
                yield event
            committed = outcome in ("committed", "unknown-committed")
            if committed:
                self.txn_visible[txn] = 1
            if forced or doubled:
                pass   # the planted second processing of a ctp-duplicate, or a double-ack: nothing else
            elif outcome == "committed" and ctp and self.want(AnomalyClass.CTP_DUPLICATE):
                # The committed ack is lost: the input comes back and is processed (and committed) again.
                self.publish(queue, value, t + NS_PER_MS, redelivery + 1)
                self.force_commit.add(value)
                self.note(AnomalyClass.CTP_DUPLICATE, input=vname)
                self.note(AnomalyClass.LOST_ACK, value=vname, subscription=sub, txn=tname)
                self.note(AnomalyClass.DOUBLE_ACK)      # acked again by the transaction that processes it again
            elif outcome == "committed" and ctp and output is not None and self.want(AnomalyClass.CTP_LOSS):
                self.drop_from_reads.add(output)
                self.note(AnomalyClass.CTP_LOSS, input=vname, txn=tname)
                self.note(AnomalyClass.LOST_WRITE, value=self.value_name(output), txn=tname)
            elif outcome == "committed" and not ctp and self.want(AnomalyClass.LOST_ACK):
                t += NS_PER_MS
                yield (t, p, _OK, OpF.RECEIVE.value, {"topic": topic, "subscription": sub, "value": vname,
                                                      "msg_id": self.msg_id(value),
                                                      "extra": {"redelivery": redelivery + 1}})
                self.note(AnomalyClass.LOST_ACK, value=vname, subscription=sub, txn=tname)
            elif outcome == "aborted" and not ctp and self.want(AnomalyClass.STUCK_ACK):
                self.note(AnomalyClass.STUCK_ACK, value=vname, subscription=sub, txn=tname)
            elif not committed:
                self.publish(queue, value, t + self.lat(1, 5), redelivery + 1)

    def _second_claim(self, lane: str, t: int, ack: dict[str, Any], first: str) -> Iterator[Event]:
        """A planted double-ack: while `first` holds the message in its pending acks, a second
        transaction on another lane of the same user acks it too and commits (the broker should
        have refused that ack). A nanosecond apart, before `first` goes on, so no random draw
        and no timing of the rest of the writer changes."""
        txn = self.new_txn()
        self.txn_visible[txn] = 1
        second = self.txn_name(txn)
        fields = {**ack, "txn": second}
        for offset, (type_, f, extra) in enumerate((
                (_INVOKE, OpF.TXN_OPEN.value, {}), (_OK, OpF.TXN_OPEN.value, {"txn": second}),
                (_INVOKE, OpF.ACK.value, fields), (_OK, OpF.ACK.value, fields),
                (_INVOKE, OpF.TXN_COMMIT.value, {"txn": second}), (_OK, OpF.TXN_COMMIT.value, {"txn": second})),
                start=1):
            yield (t + offset, lane, type_, f, extra)
        self.note(AnomalyClass.DOUBLE_ACK, value=ack["value"], subscription=ack["subscription"],
                  txns=sorted([first, second]))

    # ---- the run -----------------------------------------------------------------------------

    def run(self) -> WriterReport:
        users: list[Iterator[Event | Tick]] = [self.producer(u) for u in range(self.cfg.producers)]
        users += [self.consumer(u, ctp=True) for u in range(self.cfg.ctp_users)]
        users += [self.consumer(u, ctp=False) for u in range(self.cfg.ack_users)]
        heap: list[tuple[int, int, Event | Tick]] = []
        for uid, user in enumerate(users):
            first = next(user, None)
            if first is not None:
                heapq.heappush(heap, (first[0], uid, first))
        path = self.out / f"{self.name}.jsonl"
        events = 0
        last_ns = 0
        with path.open("w", encoding="utf-8", buffering=1 << 20) as f:
            while heap:
                _, uid, event = heapq.heappop(heap)
                if event[1] is not None:
                    f.write(self._line(self.name, events, event))
                    events += 1
                    last_ns = max(last_ns, event[0])
                    if events >= self.budget:
                        self.stop = True
                nxt = next(users[uid], None)
                if nxt is not None:
                    heapq.heappush(heap, (nxt[0], uid, nxt))
        self.report.events = events
        self.report.load_end_ns = last_ns
        self.report.drain_start_ns = last_ns + DRAIN_GAP_NS
        self._drain()
        self.report.planted = self.planted
        self.report.expected = self.expected
        return self.report

    def _drain(self) -> None:
        writer = f"drain-{self.name}"
        t = self.report.drain_start_ns
        index = 0
        plant_dup = self.want(AnomalyClass.DUPLICATE)
        plant_ghost = self.want(AnomalyClass.UNEXPECTED)
        plant_swap = self.want(AnomalyClass.NONMONOTONIC)
        with (self.out / f"{writer}.jsonl").open("w", encoding="utf-8", buffering=1 << 20) as f:
            for topic_no, topic in enumerate(self.all_topics):
                reads = [v for v in self.logs[topic_no]
                         if (self.txn_visible[self.value_txn[v]] or v in self.show_in_reads)
                         and v not in self.drop_from_reads]
                if plant_swap and topic_no >= 2:
                    plant_swap = not self._swap_one(reads)
                extra_reads: list[tuple[str, str]] = []
                if plant_dup and topic_no >= 2 and reads:
                    dup = next((v for v in reads if v not in self.show_in_reads), None)
                    if dup is not None:
                        extra_reads.append((self.value_name(dup), f"{self.ledger[topic]}:{len(self.logs[topic_no])}:-1"))
                        self.note(AnomalyClass.DUPLICATE, value=self.value_name(dup))
                        plant_dup = False
                if plant_ghost and topic_no >= 2:
                    extra_reads.append((f"{self.name}-ghost", f"{self.ledger[topic]}:{len(self.logs[topic_no]) + 1}:-1"))
                    self.note(AnomalyClass.UNEXPECTED, value=f"{self.name}-ghost")
                    plant_ghost = False
                for v in reads:
                    t += 20_000
                    f.write(self._line(writer, index, (t, "drain", _OK, OpF.READ.value, {
                        "topic": topic, "value": self.value_name(v), "msg_id": self.msg_id(v)})))
                    index += 1
                for name, msg_id in extra_reads:
                    t += 20_000
                    f.write(self._line(writer, index, (t, "drain", _OK, OpF.READ.value, {
                        "topic": topic, "value": name, "msg_id": msg_id})))
                    index += 1
            for queue, sub, topic in ((self.ctp_queue, "ctp", self.topics[0]),
                                      (self.audit_queue, "audit", self.topics[1])):
                while queue:
                    _, _, value, redelivery = heapq.heappop(queue)
                    t += 50_000
                    f.write(self._line(writer, index, (t, "drain/consumer", _OK, OpF.RECEIVE.value, {
                        "topic": topic, "subscription": sub, "value": self.value_name(value),
                        "msg_id": self.msg_id(value), "extra": {"redelivery": redelivery + 1}})))
                    index += 1
            # The coordinators' view of each transaction the load left unfinished (its commit ended
            # info), asked past its timeout plus the bound, as the drain does: forgotten (ended), or,
            # planted, still OPEN (unresolved-txn; a producer's). A consumer's too: without a reading
            # an abandoned transaction is unjudged and the verdict unknown.
            plant_unresolved = self.want(AnomalyClass.UNRESOLVED_TXN)
            for txn, opened_ns, producer in sorted(self.unknown_txns, key=lambda u: u[1]):
                t = max(t + 50_000, opened_ns + TXN_DEADLINE_NS + NS_PER_MS)
                planted = plant_unresolved and producer
                status = "OPEN" if planted else "NOT_FOUND"
                if planted:
                    self.note(AnomalyClass.UNRESOLVED_TXN, txn=txn)
                    plant_unresolved = False
                f.write(self._line(writer, index, (t, "drain/coordinator", _OK, OpF.TXN_STATE.value, {
                    "txn": txn, "extra": {"status": status}})))
                index += 1
        self.report.drain_events = index
        self.report.drain_end_ns = t

    def _swap_one(self, reads: list[int]) -> bool:
        """Swap two visible values one process sent in a row with one key: one nonmonotonic read."""
        last: dict[tuple[int, int], int] = {}
        for position, v in enumerate(reads):
            if v in self.show_in_reads:
                continue
            group = (self.value_process[v], self.value_key[v])
            if group in last:
                earlier = last[group]
                reads[earlier], reads[position] = reads[position], reads[earlier]
                self.note(AnomalyClass.NONMONOTONIC, value=self.value_name(reads[earlier]),
                          sent_earlier=self.value_name(reads[position]))
                return True
            last[group] = position
        return False

    def _line(self, writer: str, index: int, event: Event) -> str:
        t, process, type_, f, fields = event
        line: dict[str, Any] = {name: None for name in FIELDS}
        line.update(fields)
        line.update(schema=SCHEMA_VERSION, run=self.cfg.run_id, writer=writer, process=process, index=index,
                    time_ns=t, wall_ms=round(WALL_BASE_MS + t / 1e6, 3), type=type_, f=f, path=self.cfg.path)
        return json.dumps(line, separators=(",", ":")) + "\n"


def _simulate(args: tuple[SynthConfig, int, str, int]) -> WriterReport:
    cfg, number, out, budget = args
    return _Writer(cfg, number, Path(out), budget).run()


def _line(cfg: SynthConfig, index: int, t: int, f: str, extra: dict[str, Any], **fields: Any) -> str:
    line: dict[str, Any] = {name: None for name in FIELDS}
    line.update(fields)
    line.update(schema=SCHEMA_VERSION, run=cfg.run_id, writer="run", process="run", index=index, time_ns=t,
                wall_ms=round(WALL_BASE_MS + t / 1e6, 3), type=_OK, f=f, path=cfg.path, extra=extra)
    return json.dumps(line, separators=(",", ":")) + "\n"


def generate(cfg: SynthConfig, out: Path, *, jobs: int | None = None) -> dict[str, Any]:
    """Write a synthetic run folder at `out` (which must not exist or be empty); return planted.json."""
    unknown = set(cfg.plant) - {c.value for c in AnomalyClass}
    if unknown:
        raise ValueError(f"unknown anomaly classes to plant: {sorted(unknown)}")
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty; pass a new folder")
    history = out / "history"
    history.mkdir()
    # The drain and the run file add about a quarter on top of the writers' load events.
    budget = max(50, int(cfg.events * 0.8 / cfg.writers))
    work = [(cfg, n, str(history), budget) for n in range(cfg.writers)]
    jobs = jobs if jobs is not None else min(cfg.writers, os.cpu_count() or 1)
    if jobs > 1:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            reports = pool.map(_simulate, work)
    else:
        reports = [_simulate(w) for w in work]

    load_end = max(r.load_end_ns for r in reports)
    drain_ns = load_end + DRAIN_PHASE_LEAD_NS
    if drain_ns >= min(r.drain_start_ns for r in reports):
        raise RuntimeError("writers ended too far apart for one drain phase; use fewer events per writer spread")
    end = max(r.drain_end_ns for r in reports)
    topics = [t for r in reports for t in r.topics]
    subs = [{"topic": t, "subscription": s} for r in reports for t, s in r.subscriptions]
    # Each durable subscription starts (at the earliest message) before any user sends, as the
    # real run records it: the `undelivered` check holds it to every committed value after.
    Phase = tuple[int, str, dict[str, Any], dict[str, Any]]
    starts: list[Phase] = [(NS_PER_MS // 2, PHASE_SUBSCRIPTION_START,
               {"initial_position": "earliest", "sub_type": "Shared"}, {"topic": s["topic"], "subscription": s["subscription"]})
              for s in subs]
    phases: list[Phase] = [(0, "setup", {}, {}), *starts, (NS_PER_MS, "warmup", {}, {}), (2 * NS_PER_MS, "steady", {}, {}),
              (load_end + NS_PER_MS, "recovery", {}, {}), (drain_ns, "drain", {}, {}),
              (end + NS_PER_MS, PHASE_DRAIN_COMPLETE, {"topics": topics, "subscriptions": subs}, {}),
              (end + 2 * NS_PER_MS, "collect", {}, {})]
    with (history / "run.jsonl").open("w", encoding="utf-8") as f:
        for index, (t, name, extra, fields) in enumerate(phases):
            f.write(_line(cfg, index, t, OpF.PHASE.value, {"name": name, **extra}, **fields))

    expected: dict[str, int] = {}
    planted: dict[str, list[dict[str, Any]]] = {}
    for r in reports:
        for cls, n in r.expected.items():
            expected[cls] = expected.get(cls, 0) + n
        for cls, items in r.planted.items():
            planted.setdefault(cls, []).extend(items)
    events = sum(r.events + r.drain_events for r in reports) + len(phases)
    summary = {"events": events, "writers": cfg.writers, "config": asdict(cfg),
               "expected": dict(sorted(expected.items())), "planted": dict(sorted(planted.items()))}
    (out / "planted.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    manifest = {"schema": 1, "run_id": out.name, "scenario": "synthetic", "path": cfg.path, "target": "synthetic",
                "seed": cfg.seed, "status": "complete", "config": {"checks": {"stall_after_s": cfg.stall_after_s}}}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.synth",
        description="Write a synthetic run folder for benchmarking and testing `txnbench check`.")
    parser.add_argument("--events", type=int, default=100_000, help="about this many history lines")
    parser.add_argument("--out", type=Path, required=True, help="a new run folder")
    parser.add_argument("--writers", type=int, default=2, help="writer processes (files), generated in parallel")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--plant", default="", metavar="CLASSES",
                        help="'all' or comma-separated anomaly classes to plant, one per writer")
    parser.add_argument("--jobs", type=int, default=None, help="processes (default: writers, at most the cores)")
    args = parser.parse_args(argv)
    if args.events <= 0 or args.writers <= 0:
        print("synth: --events and --writers must be positive", file=sys.stderr)
        return 2
    plant = tuple(c.value for c in AnomalyClass) if args.plant == "all" else \
        tuple(p.strip() for p in args.plant.split(",") if p.strip())
    cfg = SynthConfig(events=args.events, writers=args.writers, seed=args.seed, plant=plant,
                      run_id=args.out.name)
    started = time.monotonic()
    try:
        summary = generate(cfg, args.out, jobs=args.jobs)
    except (ValueError, FileExistsError) as err:
        print(f"synth: {err}", file=sys.stderr)
        return 2
    elapsed = time.monotonic() - started
    size = sum(p.stat().st_size for p in (args.out / "history").glob("*.jsonl"))
    print(f"wrote {summary['events']} events ({size / 1e6:.1f} MB) to {args.out} in {elapsed:.1f} s"
          + (f"; planted: {summary['expected']}" if summary["expected"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
