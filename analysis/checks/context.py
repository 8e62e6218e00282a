"""The DataFrames every check reads, derived once from a validated history.

Theory of operation. `prepare()` pairs the operations, reads the drain's
`drain-complete` event, finds the values present in the final reads and
decides every transaction (analysis.load). It then enriches sends and acks
with their transaction's outcome and each send with its visibility, so each
check is a few joins on small, named DataFrames. Frames used by several checks
are persisted (memory, then disk) so a large history is paired and joined once.

Vocabulary used by the checks:

* visible: the value is present in the drainer's final `read` events;
* covered: the send's topic is in `drain-complete`'s `topics` (read to the end),
  so a value missing from the reads is really missing;
* drained: the (topic, subscription) pair is in `drain-complete`'s
  `subscriptions` (consumed until empty), so a message not delivered again
  there was really not deliverable;
* outcome: committed / aborted / unknown (analysis.load.transaction_outcomes);
  a send without a transaction is its own unit (ok: committed, fail: aborted,
  info: decided by visibility like a transaction).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from analysis.checks.base import MAX_EXAMPLES, ref
from analysis.load import (
    ABORTED,
    COMMITTED,
    UNKNOWN,
    DrainInfo,
    HistoryOverview,
    final_reads,
    overview,
    pair_operations,
    receives,
    transaction_outcomes,
    visible_values,
)
from harness.history.schema import OpF, OpType

DEFAULT_STALL_AFTER_S = 10.0
DRAIN_PHASE = "drain"


@dataclass(frozen=True)
class CheckContext:
    """Inputs of the checks. DataFrame columns are listed in `prepare()`'s docstring."""

    pairs: DataFrame
    txns: DataFrame
    sends: DataFrame
    acks: DataFrame
    receives: DataFrame
    reads: DataFrame
    visible: DataFrame
    drain: DrainInfo
    stall_after_ns: int
    history_end_ns: int | None
    drain_phase_ns: int | None
    overview: HistoryOverview
    max_examples: int = MAX_EXAMPLES

    def count(self, what: str) -> int:
        """A count from the overview (events, sends, ctp_sends, acks, cumulative_acks, receives, reads)."""
        return int(self.overview.counts.get(what, 0))

    @property
    def covered_topics(self) -> list[str]:
        return sorted(self.drain.topics)

    def covered(self, topic: Column) -> Column:
        """True when `topic` was read to the end by the drain."""
        if not self.drain.complete or not self.drain.topics:
            return F.lit(False)
        return F.coalesce(topic.isin(*self.covered_topics), F.lit(False))

    def drained(self, topic: Column, subscription: Column) -> Column:
        """True when (topic, subscription) was consumed until empty by the drain."""
        if not self.drain.complete or not self.drain.subscriptions:
            return F.lit(False)
        keys = sorted(f"{t}\u0000{s}" for t, s in self.drain.subscriptions)
        return F.coalesce(F.concat(topic, F.lit("\u0000"), subscription).isin(*keys), F.lit(False))

    def unpersist(self) -> None:
        for frame in (self.pairs, self.txns, self.sends, self.acks, self.receives, self.reads,
                      self.visible):
            frame.unpersist()


def prepare(ops: DataFrame, *, stall_after_s: float = DEFAULT_STALL_AFTER_S, persist: bool = True,
            max_examples: int = MAX_EXAMPLES, pairs: DataFrame | None = None,
            facts: HistoryOverview | None = None) -> CheckContext:
    """Derive the check inputs from validated ops (analysis.load.OPS_COLUMNS).

    `pairs` and `facts` may be passed when the caller computed them already
    (pair_operations(), overview()).

    Frames:
      pairs     pair_operations() without orphans.
      txns      transaction_outcomes() (TXN_COLUMNS).
      sends     one row per send: value, writer, index, process, type, completed, txn, topic,
                segment, key, inputs, msg_id, invoke_ns, complete_ns, outcome, client_outcome,
                decided_by, commit_invoke_ns, end_ns, ctp, txn_uncovered, visible, covered,
                read_writer, read_index, send (op ref).
      acks      one row per ack: value, writer, index, process, type, txn, topic, segment,
                subscription, msg_id, cumulative, invoke_ns, complete_ns, outcome,
                client_outcome, end_ns, ack (op ref).
      receives  receive events: value, topic, segment, subscription, msg_id, time_ns,
                writer, index, process, receive (op ref).
      reads     read events: value, topic, segment, msg_id, time_ns, writer, index, read (op ref).
      visible   visible_values() of the reads.
    """
    facts = facts if facts is not None else overview(ops)
    drain = facts.drain
    level = StorageLevel.MEMORY_AND_DISK

    def keep(frame: DataFrame) -> DataFrame:
        return frame.persist(level) if persist else frame

    if pairs is None:
        pairs = pair_operations(ops)
    pairs = keep(pairs.filter(~F.col("orphan")))
    reads = keep(final_reads(ops).select(
        "value", "topic", "segment", "msg_id", "time_ns", "writer", "index", "process",
        ref(f=OpF.READ.value).alias("read")))
    visible = keep(visible_values(final_reads(ops)))
    covered = sorted(drain.topics) if drain.complete else None
    txns = keep(transaction_outcomes(pairs, visible, covered))
    marks = [m for m in facts.phases if m.name == DRAIN_PHASE]
    drain_phase_ns = marks[0].time_ns if marks else None

    txn_cols = txns.select(
        "txn", "outcome", "client_outcome", "decided_by", "commit_invoke_ns", "end_ns", "ctp",
        F.col("sends_uncovered").alias("txn_uncovered"))
    covered_col = (F.coalesce(F.col("topic").isin(*covered), F.lit(False)) if covered else F.lit(False))
    send_rows = pairs.filter(F.col("f") == OpF.SEND.value).select(
        "value", "writer", "index", "process", "type", "completed", "txn", "topic", "segment", "key",
        "inputs", "msg_id", "invoke_ns", "complete_ns",
        ref(f=OpF.SEND.value, time="invoke_ns").alias("send"))
    vis = visible.select("value", "read_writer", "read_index")
    joined = send_rows.join(txn_cols, "txn", "left").join(vis, "value", "left")
    is_visible = F.col("read_index").isNotNull()
    # A send outside any transaction is its own unit of atomicity.
    lone = (F.when(F.col("type") == OpType.OK.value, F.lit(COMMITTED))
            .when(F.col("type") == OpType.FAIL.value, F.lit(ABORTED))
            .when(is_visible, F.lit(COMMITTED))
            .when(covered_col, F.lit(ABORTED)).otherwise(F.lit(UNKNOWN)))
    lone_client = (F.when(F.col("type") == OpType.OK.value, F.lit(COMMITTED))
                   .when(F.col("type") == OpType.FAIL.value, F.lit(ABORTED)).otherwise(F.lit(UNKNOWN)))
    sends = keep(joined.select(
        "value", "writer", "index", "process", "type", "completed", "txn", "topic", "segment", "key",
        "inputs", "msg_id", "invoke_ns", "complete_ns",
        F.when(F.col("txn").isNull(), lone).otherwise(F.coalesce(F.col("outcome"), F.lit(UNKNOWN)))
        .alias("outcome"),
        F.when(F.col("txn").isNull(), lone_client).otherwise(F.col("client_outcome"))
        .alias("client_outcome"),
        "decided_by", "commit_invoke_ns", "end_ns", F.coalesce(F.col("ctp"), F.lit(False)).alias("ctp"),
        F.coalesce(F.col("txn_uncovered"), F.lit(0)).alias("txn_uncovered"),
        is_visible.alias("visible"), covered_col.alias("covered"), "read_writer", "read_index", "send",
    ))

    # An ack's topic is the acked value's topic when the ack does not record one.
    send_topic = sends.select("value", F.col("topic").alias("_send_topic"))
    ack_rows = pairs.filter(F.col("f") == OpF.ACK.value).join(send_topic, "value", "left")
    ack_rows = ack_rows.withColumn("topic", F.coalesce(F.col("topic"), F.col("_send_topic")))
    acks = keep(ack_rows.join(txn_cols, "txn", "left").select(
        "value", "writer", "index", "process", "type", "txn", "topic", "segment", "subscription",
        "msg_id", F.coalesce(F.col("cumulative"), F.lit(False)).alias("cumulative"), "invoke_ns",
        "complete_ns", F.coalesce(F.col("outcome"), F.lit(UNKNOWN)).alias("outcome"),
        F.coalesce(F.col("client_outcome"), F.lit(UNKNOWN)).alias("client_outcome"), "end_ns",
        ref(f=OpF.ACK.value, time="invoke_ns").alias("ack"),
    ))
    recv = keep(receives(ops).select(
        "value", "topic", "segment", "subscription", "msg_id", "time_ns", "writer", "index", "process",
        ref(f=OpF.RECEIVE.value).alias("receive")))
    return CheckContext(
        pairs=pairs, txns=txns, sends=sends, acks=acks, receives=recv, reads=reads, visible=visible,
        drain=drain, stall_after_ns=int(stall_after_s * 1e9), history_end_ns=facts.last_ns,
        drain_phase_ns=drain_phase_ns, overview=facts, max_examples=max_examples,
    )


def message_position(msg_id: Column) -> Column:
    """`"<ledger>:<entry>:<batch>"` as an orderable struct (null when not in that form)."""
    parts = F.split(msg_id, ":")
    valid = msg_id.rlike(r"^-?\d+:-?\d+(:-?\d+)?$")
    batch = F.when(F.size(parts) >= 3, parts.getItem(2)).otherwise(F.lit("-1"))
    return F.when(valid, F.struct(
        parts.getItem(0).cast(T.LongType()).alias("ledger"),
        parts.getItem(1).cast(T.LongType()).alias("entry"),
        batch.cast(T.LongType()).alias("batch"),
    ))


def union_all(frames: Iterable[DataFrame]) -> DataFrame:
    frames = list(frames)
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out
