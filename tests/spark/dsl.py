"""A tiny language for writing histories in tests.

Each call appends the lines the recorder would write, with a clock that moves
one millisecond per line, so the text of a test reads like the run it stands
for:

    h = History()
    t = h.process("w0/u1").open().send("a").send("b", topic="t2").commit()
    h.process("c1").receive("a", sub="s")           # a consumer sees "a"
    h.drain(reads={"t1": ["a"], "t2": ["b"]})        # final reads + drain-complete

Defaults keep tests short: topic "t1", subscription "s", completions `ok`, a
message id per send ("<ledger>:<entry>:-1", one ledger per topic), receives and
reads reuse the send's topic and message id. `type=` picks `fail` or `info`,
and `type=None` leaves an invocation without completion. `h.sleep(s)` moves the
clock. `h.records()` gives the lines (Op.to_json() shapes), `h.write(run_dir)`
writes a run folder, `h.ops(spark)` builds the ops DataFrame directly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from analysis.history_io import ops_from_records
from harness.history.schema import PHASE_DRAIN_COMPLETE, Op, OpF, OpType

TICK_NS = 1_000_000
DEFAULT_TOPIC = "t1"
DEFAULT_SUB = "s"


class History:
    """Builds one run's history, across writers, in time order."""

    def __init__(self, run: str = "test-run", path: str = "v4") -> None:
        self.run = run
        self.path = path
        self.now_ns = 0
        self._lines: list[Op] = []
        self._next_index: dict[str, int] = {}
        self._txn_counter = 0
        self._ledgers: dict[str, int] = {}
        self._entries: dict[str, int] = {}
        self.sent: dict[str, dict[str, Any]] = {}     # value -> {topic, msg_id, key, segment}
        self.topics: list[str] = []
        self.subscriptions: list[tuple[str, str]] = []

    # ---- building blocks ---------------------------------------------------------------------

    def emit(self, writer: str, process: str, type_: OpType | str, f: OpF | str, **fields: Any) -> Op:
        """Append one line (for shapes the helpers below do not cover)."""
        self.now_ns += TICK_NS
        index = self._next_index.get(writer, 0)
        self._next_index[writer] = index + 1
        inputs = fields.pop("inputs", None)
        op = Op(run=self.run, writer=writer, process=process, index=index, time_ns=self.now_ns,
                wall_ms=1.7e12 + self.now_ns / 1e6, type=OpType(type_), f=OpF(f),
                path=fields.pop("path", self.path), inputs=tuple(inputs) if inputs is not None else None,
                **fields)
        self._lines.append(op)
        return op

    def sleep(self, seconds: float) -> History:
        self.now_ns += int(seconds * 1e9)
        return self

    def process(self, name: str, writer: str | None = None) -> Process:
        return Process(self, name, writer or name.split("/")[0])

    def new_txn_id(self) -> str:
        self._txn_counter += 1
        return f"1:{self._txn_counter}"

    def new_msg_id(self, topic: str) -> str:
        if topic not in self._ledgers:
            self._ledgers[topic] = 100 + len(self._ledgers)
            self.topics.append(topic)
        entry = self._entries.get(topic, 0)
        self._entries[topic] = entry + 1
        return f"{self._ledgers[topic]}:{entry}:-1"

    def note_subscription(self, topic: str, sub: str) -> None:
        if (topic, sub) not in self.subscriptions:
            self.subscriptions.append((topic, sub))

    def operation(self, writer: str, process: str, f: OpF, fields: Mapping[str, Any],
                  type_: OpType | str | None, result: Mapping[str, Any] | None = None,
                  took_s: float | None = None) -> None:
        """An invocation and, unless `type_` is None, its completion `took_s` later."""
        self.emit(writer, process, OpType.INVOKE, f, **fields)
        if type_ is None:
            return
        if took_s is not None:
            self.sleep(took_s)
        done = {**fields, **(result or {})}
        if OpType(type_) is not OpType.OK:
            done.setdefault("error", "TestError: planted")
        self.emit(writer, process, type_, f, **done)

    # ---- the drain ---------------------------------------------------------------------------

    def phase(self, name: str, **extra: Any) -> History:
        self.emit("run", "run", OpType.OK, OpF.PHASE, extra={"name": name, **extra})
        return self

    def read(self, topic: str, *values: str, msg_ids: Sequence[str] | None = None,
             segment: str | None = None) -> History:
        """Final reads of `topic`, in the given (log) order."""
        for i, value in enumerate(values):
            known = self.sent.get(value, {})
            msg_id = msg_ids[i] if msg_ids is not None else known.get("msg_id") or self.new_msg_id(topic)
            self.emit("drain", "drain", OpType.OK, OpF.READ, topic=topic, value=value, msg_id=msg_id,
                      segment=segment if segment is not None else known.get("segment"))
        return self

    def live_read(self, topic: str, *values: str) -> History:
        """Live final reads of `topic` (before the cold restart: writer `drain-live`)."""
        for value in values:
            known = self.sent.get(value, {})
            self.emit("drain-live", "drain-live/r0", OpType.OK, OpF.READ, topic=topic, value=value,
                      msg_id=known.get("msg_id") or self.new_msg_id(topic), segment=known.get("segment"))
        return self

    def txn_state(self, txn: str, status: str, error: str | None = None, *, live: bool = False) -> History:
        """The drain's reading of the coordinator's view of `txn` (`txn-state`); `live`: the live
        drain's (before the cold restart: writer `drain-live`)."""
        writer = "drain-live" if live else "drain"
        self.emit(writer, f"{writer}/coordinator", OpType.OK, OpF.TXN_STATE, txn=txn, extra={"status": status},
                  error=error)
        return self

    def drain_receive(self, value: str, sub: str = DEFAULT_SUB, topic: str | None = None) -> History:
        """The drainer consuming a subscription delivers `value` again."""
        self.process("drain/consumer", writer="drain").receive(value, sub=sub, topic=topic)
        return self

    def drain_complete(self, topics: Iterable[str] | None = None,
                       subscriptions: Iterable[tuple[str, str]] | None = None, *,
                       lost_entries: Sequence[Mapping[str, Any]] | None = None,
                       live_topics: Iterable[str] | None = None) -> History:
        """`drain-complete`; by default every topic sent to and every subscription used.

        `lost_entries`: runs of entries the brokers said were lost after their ack;
        `live_topics`: topics the live reads (before the cold restart) read to the end."""
        topic_list = list(topics) if topics is not None else list(self.topics)
        subs = list(subscriptions) if subscriptions is not None else list(self.subscriptions)
        extra: dict[str, Any] = {"lost_entries": [dict(r) for r in lost_entries]} if lost_entries else {}
        if live_topics is not None:
            extra["live_topics"] = list(live_topics)
        return self.phase(PHASE_DRAIN_COMPLETE, topics=topic_list,
                          subscriptions=[{"topic": t, "subscription": s} for t, s in subs], **extra)

    def drain(self, reads: Mapping[str, Sequence[str]] | None = None, *,
              topics: Iterable[str] | None = None,
              subscriptions: Iterable[tuple[str, str]] | None = None) -> History:
        """The whole drain: the `drain` phase, final reads per topic, `drain-complete`."""
        self.phase("drain")
        for topic, values in (reads or {}).items():
            self.read(topic, *values)
        return self.drain_complete(topics, subscriptions)

    # ---- output ------------------------------------------------------------------------------

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(op.to_json()) for op in self._lines]

    def ops(self, spark: SparkSession) -> DataFrame:
        return ops_from_records(spark, self.records())

    def write(self, run_dir: Path, *, stall_after_s: float | None = None, manifest: bool = True) -> Path:
        """Write `run_dir/history/<writer>.jsonl` (+ a manifest); return run_dir."""
        history = run_dir / "history"
        history.mkdir(parents=True, exist_ok=True)
        by_writer: dict[str, list[str]] = {}
        for op in self._lines:
            by_writer.setdefault(op.writer, []).append(op.to_json())
        for writer, lines in by_writer.items():
            (history / f"{writer}.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        if manifest:
            config: dict[str, Any] = {"checks": {"stall_after_s": stall_after_s}} if stall_after_s else {}
            (run_dir / "manifest.json").write_text(json.dumps(
                {"schema": 1, "run_id": run_dir.name, "status": "complete", "config": config}), encoding="utf-8")
        return run_dir


class Process:
    """One logical client; operations run one at a time."""

    def __init__(self, history: History, name: str, writer: str) -> None:
        self.h = history
        self.name = name
        self.writer = writer

    def open(self, type: str | None = "ok", txn: str | None = None) -> Txn:
        txn_id = txn or self.h.new_txn_id()
        self.h.operation(self.writer, self.name, OpF.TXN_OPEN, {}, type,
                         result={"txn": txn_id} if type == "ok" else None)
        return Txn(self, txn_id)

    def send(self, value: str, topic: str = DEFAULT_TOPIC, key: str | None = None, type: str | None = "ok",
             txn: str | None = None, inputs: Sequence[str] | None = None, segment: str | None = None,
             msg_id: str | None = None) -> Process:
        """A send (non-transactional unless `txn`); ok sends get a message id."""
        msg_id = msg_id or self.h.new_msg_id(topic)
        self.h.sent[value] = {"topic": topic, "msg_id": msg_id, "key": key, "segment": segment}
        fields = {"txn": txn, "topic": topic, "key": key, "value": value, "inputs": inputs, "segment": segment}
        self.h.operation(self.writer, self.name, OpF.SEND, fields, type,
                         result={"msg_id": msg_id} if type == "ok" else None)
        return self

    def receive(self, value: str, sub: str = DEFAULT_SUB, topic: str | None = None,
                msg_id: str | None = None, redelivery: int = 0, delivered_ns: int | None = None) -> Process:
        """A `receive` event; `delivered_ns` is when the broker's frame arrived, if the test says."""
        known = self.h.sent.get(value, {})
        topic = topic or known.get("topic") or DEFAULT_TOPIC
        self.h.note_subscription(topic, sub)
        extra: dict[str, Any] = {"redelivery": redelivery}
        if delivered_ns is not None:
            extra["delivered_ns"] = delivered_ns
        self.h.emit(self.writer, self.name, OpType.OK, OpF.RECEIVE, topic=topic, subscription=sub, value=value,
                    msg_id=msg_id or known.get("msg_id"), segment=known.get("segment"), extra=extra)
        return self

    def ack(self, value: str, sub: str = DEFAULT_SUB, type: str | None = "ok", txn: str | None = None,
            cumulative: bool = False, topic: str | None = None, msg_id: str | None = None) -> Process:
        known = self.h.sent.get(value, {})
        topic = topic or known.get("topic") or DEFAULT_TOPIC
        self.h.note_subscription(topic, sub)
        fields = {"txn": txn, "topic": topic, "subscription": sub, "value": value,
                  "msg_id": msg_id or known.get("msg_id"), "segment": known.get("segment"),
                  "extra": {"cumulative": True} if cumulative else None}
        self.h.operation(self.writer, self.name, OpF.ACK, fields, type)
        return self


class Txn:
    """A transaction of one process; methods chain and return the transaction."""

    def __init__(self, process: Process, txn: str) -> None:
        self.p = process
        self.id = txn

    def send(self, value: str, topic: str = DEFAULT_TOPIC, key: str | None = None, type: str | None = "ok",
             inputs: Sequence[str] | None = None, segment: str | None = None,
             msg_id: str | None = None) -> Txn:
        self.p.send(value, topic, key, type, txn=self.id, inputs=inputs, segment=segment, msg_id=msg_id)
        return self

    def sends(self, *values: str, topic: str = DEFAULT_TOPIC, key: str | None = None) -> Txn:
        for value in values:
            self.send(value, topic, key)
        return self

    def ack(self, value: str, sub: str = DEFAULT_SUB, type: str | None = "ok",
            cumulative: bool = False, topic: str | None = None, msg_id: str | None = None) -> Txn:
        self.p.ack(value, sub, type, txn=self.id, cumulative=cumulative, topic=topic, msg_id=msg_id)
        return self

    def receive(self, value: str, sub: str = DEFAULT_SUB, redelivery: int = 0) -> Txn:
        """The transaction's process receives `value` (e.g. a CTP input)."""
        self.p.receive(value, sub=sub, redelivery=redelivery)
        return self

    def commit(self, type: str | None = "ok", took_s: float | None = None) -> Txn:
        self.p.h.operation(self.p.writer, self.p.name, OpF.TXN_COMMIT, {"txn": self.id}, type, took_s=took_s)
        return self

    def abort(self, type: str | None = "ok", took_s: float | None = None) -> Txn:
        self.p.h.operation(self.p.writer, self.p.name, OpF.TXN_ABORT, {"txn": self.id}, type, took_s=took_s)
        return self
