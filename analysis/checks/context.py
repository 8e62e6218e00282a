"""The DataFrames every check reads, derived once from a validated history.

Theory of operation. `prepare()` pairs the operations (lean: only the columns
checks use), finds the values present in the final reads, decides every
transaction (analysis.model), and joins the results onto sends, acks and
observations (receives and reads), so each check is a filter and a join or two
on narrow frames. Frames several checks share are persisted (memory, then disk)
so a large history is paired, joined and shuffled once. Op references for the
examples are built by the checks on anomaly rows only.

Vocabulary used by the checks:

* visible: the value is present in the drainer's final `read` events (the cold ones
  when the run made both);
* covered: the send's topic is in `drain-complete`'s `topics` (read to the end),
  so a value missing from the reads is really missing;
* live visible, live covered: the same for the live reads made before the cold restart
  (`drain-live/...` reads, `drain-complete`'s `live_topics`); both false without them;
* drained: the (topic, subscription) pair is in `drain-complete`'s
  `subscriptions` (consumed until empty), so a message not delivered again
  there was really not deliverable;
* outcome: committed / aborted / unknown (analysis.model.transaction_outcomes);
  a send without a transaction is its own unit (ok: committed, fail: aborted,
  info: decided by visibility like a transaction).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from analysis.checks.base import MAX_EXAMPLES
from analysis.checks.lookups import latest_readings
from analysis.model import (
    ABORTED,
    COMMITTED,
    COORDINATOR,
    LEAN_PAIR_COLUMNS,
    REDELIVERY,
    ROWS_BOUND,
    TXN_COLUMNS,
    UNKNOWN,
    UNKNOWN_ABORTED,
    UNKNOWN_COMMITTED,
    DrainInfo,
    HistoryOverview,
    final_reads,
    live_reads,
    logical,
    logical_topic,
    one_partition,
    overview,
    pair_operations,
    receives,
    transaction_outcomes,
    visible_values,
)
from harness.history.schema import OpF, OpType

DEFAULT_STALL_AFTER_S = 10.0
DEFAULT_TXN_TIMEOUT_S = 30.0   # harness.config WorkloadConfig.txn_timeout_s
DEFAULT_ABORT_BOUND_S = 5.0    # harness.config ChecksConfig.abort_bound_s
DRAIN_PHASE = "drain"
# Up to this many transactions, a large history's outcomes are broadcast to the sends, acks and
# receives. Each of the three joins holds its copy in the driver's heap while the check runs: with
# 1.84 million, the 20M-event check's peak resident memory rose from 4.6 to 5.7-6.8 GiB of its
# 6 GiB heap (docs/checks.md). Not measured beyond that, so not much beyond it: more are joined
# by a shuffle of the sends and acks, as before.
BROADCAST_TXNS_MAX = 2_000_000
# Up to this many ack-only transactions decided by redelivery, a large history joins the decisions
# onto each reader of the transactions (a broadcast of a few rows) instead of keeping a second copy
# of every transaction with them in; more are joined once and kept, as before.
BROADCAST_DECISIONS_MAX = 100_000

# The columns of `sends` (prepare()): what the checks and their examples read, nothing more. Each of
# its 3.4 million rows at 20 million events is kept in memory, and a kept column costs CPU per row
# (docs/checks.md): `completed`, `complete_ns`, the client's outcome, `end_ns`, `ctp` and the
# transaction's uncovered count were kept and never read (nor the acks' `complete_ns`).
SENDS_COLUMNS: tuple[str, ...] = (
    "value", "writer", "index", "process", "type", "txn", "topic", "segment", "key", "inputs", "msg_id",
    "invoke_ns", "visible", "read_ns", "read_pos", "covered", "live_visible", "live_read_ns", "live_covered",
    "outcome", "decided_by", "commit_invoke_ns")
_OBSERVED = ("writer", "index", "process", "time_ns", "delivered_ns", "topic", "segment", "subscription",
             "msg_id")
_SENT = ("writer", "index", "process", "type", "invoke_ns", "topic", "segment", "msg_id")


class Keeping(StrEnum):
    """How `prepare` keeps the frames several checks read."""

    NONE = "none"              # plain plans, recomputed by each reader (tests that look at one frame)
    PERSIST = "persist"        # persisted (memory, then disk): large histories
    CHECKPOINT = "checkpoint"  # single-partition local checkpoints: small histories (single_partition_leaf)


def kept(frame: DataFrame, how: Keeping) -> DataFrame:
    """`frame` kept as `how` says; the caller unpersists a PERSIST frame when done."""
    if how is Keeping.PERSIST:
        return frame.persist(StorageLevel.MEMORY_AND_DISK)
    if how is Keeping.CHECKPOINT:
        return single_partition_leaf(frame)
    return frame


@dataclass(frozen=True)
class CheckContext:
    """Inputs of the checks. Frame columns are listed in `prepare()`'s docstring."""

    pairs: DataFrame
    txns: DataFrame
    sends: DataFrame
    acks: DataFrame
    receives: DataFrame
    reads: DataFrame
    visible: DataFrame
    observations: DataFrame
    drain: DrainInfo
    stall_after_ns: int
    history_end_ns: int | None
    drain_phase_ns: int | None
    overview: HistoryOverview
    max_examples: int = MAX_EXAMPLES
    persisted: tuple[DataFrame, ...] = ()
    lost_writers: tuple[str, ...] = ()
    """Writers whose process was lost mid-run (remote load workers): their history simply ends."""
    commit_blocked_windows: tuple[tuple[int, int | None], ...] = ()
    """When a commit may have waited on a fault (analysis.check.commit_blocked_windows: every client
    cut off from every broker, the store the path's commits need out of every broker's reach, or
    one broker stopped or cut off; a fault's `fault` invoke to its `heal` ok, None: never healed)."""
    txn_states: DataFrame | None = None
    """The drain's readings of the coordinators' view (`txn-state` events): txn, time_ns, writer,
    index, process, status (`extra.status`), error; None when the history has none."""
    txn_timeout_ns: int = int(DEFAULT_TXN_TIMEOUT_S * 1e9)
    """The timeout the load asks for each transaction (the run's `workload.txn_timeout_s`)."""
    abort_bound_ns: int = int(DEFAULT_ABORT_BOUND_S * 1e9)
    """How long after its timeout an abandoned transaction may still be open (`checks.abort_bound_s`)."""
    clock_slack_ns: int = 0
    """How far two writers' `time_ns` may disagree (remote hosts' measured clock offset bound plus
    drift; 0 on one host): time comparisons across writers give the benefit of this doubt."""
    keeping: Keeping = Keeping.NONE
    """How the shared frames are kept; `shared()` keeps the frames checks share the same way."""
    _derived: dict[str, DataFrame] = field(default_factory=dict, repr=False, compare=False)
    """The frames `shared()` built, by name (the context is frozen; this cache is its one mutable part)."""
    _deriving: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    """Held while `shared()` looks up or builds a frame: checks may run in threads of their own."""

    def later(self, a: Column, b: Column) -> Column:
        """`a` certainly after `b`, given the clock slack."""
        return a > (b + F.lit(self.clock_slack_ns)) if self.clock_slack_ns else a > b

    def count(self, what: str) -> int:
        """A count from the overview: events, sends, ctp_sends, acks, cumulative_acks, receives, reads."""
        return int(self.overview.counts.get(what, 0))

    def drained(self, topic: Column, subscription: Column) -> Column:
        """True when (topic, subscription) was consumed until empty by the drain."""
        return drained(self.drain, topic, subscription)

    def shared(self, name: str, build: Callable[[], DataFrame]) -> DataFrame:
        """The frame `build()` gives, built once per context at first use and kept as the shared
        frames are (persisted, or a local checkpoint on a small history).

        For a result two checks read (e.g. stuck-ack's stuck acks, which unresolved-txn holds its
        abandoned transactions to): the second check reads what the first computed, instead of
        planning and running the same joins again. `unpersist()` releases it."""
        with self._deriving:
            frame = self._derived.get(name)
            if frame is None:
                frame = kept(build(), self.keeping)
                self._derived[name] = frame
            return frame

    def coordinator_records(self, txns: list[str]) -> dict[str, dict[str, object]]:
        """The latest `txn-state` reading of each of a few example transactions (bounded: the
        examples'), as an op reference with its status: the evidence an outcome the coordinator
        decided rests on."""
        if self.txn_states is None or not txns:
            return {}
        return latest_readings(self.rows_where("txn_states", "txn", txns))

    def rows_where(self, frame: str, column: str, values: Sequence[str]) -> list[Row]:
        """analysis.checks.lookups.ExampleRows: the rows of a frame whose `column` is one of `values`."""
        found: DataFrame = getattr(self, frame)
        return found.filter(F.col(column).isin(*sorted(set(values)))).collect() if values else []

    def rows_carrying(self, frame: str, column: str, values: Sequence[str]) -> list[Row]:
        """analysis.checks.lookups.ExampleRows: the rows whose list column `column` holds one of `values`."""
        if not values:
            return []
        wanted = F.array(*[F.lit(v) for v in sorted(set(values))])
        found: DataFrame = getattr(self, frame)
        return found.filter(F.arrays_overlap(F.coalesce(F.col(column), F.array()), wanted)).collect()

    def unpersist(self) -> None:
        with self._deriving:
            for frame in (*self.persisted, *self._derived.values()):
                frame.unpersist()
            self._derived.clear()


def drained(drain: DrainInfo, topic: Column, subscription: Column) -> Column:
    """True when (topic, subscription) was consumed until empty by the drain."""
    if not drain.complete or not drain.subscriptions:
        return F.lit(False)
    keys = sorted(f"{logical(t)}\u0000{s}" for t, s in drain.subscriptions)
    return F.coalesce(F.concat(logical_topic(topic), F.lit("\u0000"), subscription).isin(*keys), F.lit(False))


def decide_ack_only_by_redelivery(txns: DataFrame, pairs: DataFrame, receives: DataFrame,
                                  drain: DrainInfo) -> DataFrame:
    """`txns` with ack-only transactions of unknown outcome decided by their subscriptions
    (`redelivery_decisions`, applied by `with_decisions`)."""
    return with_decisions(txns, redelivery_decisions(txns, pairs, receives, drain))


def redelivery_decisions(txns: DataFrame, pairs: DataFrame, receives: DataFrame, drain: DrainInfo) -> DataFrame:
    """The ack-only transactions of unknown outcome their subscriptions decide: txn, `_decision`.

    A message acknowledged in a transaction stays in its subscription's pending acks
    until the transaction ends: committed, it is never delivered to that subscription
    again; aborted, it comes back. So an ack-only transaction whose commit was invoked
    but ended `info`, with every ack `ok`, individual and on a subscription the drain
    emptied, is decided as visibility decides a producing one: any acked message
    delivered again (its frame arriving after the ack was invoked) makes it aborted,
    none makes it committed. lost-ack and stuck-ack then hold every ack to that one
    outcome, so a transaction that kept some acks and gave back others is reported.
    Anything less (an `info` ack, a cumulative ack, a subscription not drained) leaves
    it unknown and its acks unjudged.
    """
    undecided = txns.filter(
        (F.col("outcome") == UNKNOWN) & F.col("commit_invoke_ns").isNotNull()
        & ((F.col("sends_ok") + F.col("sends_info")) == 0) & (F.col("acks") > 0)).select("txn")
    # `undecided` has one row per txn: a semi join keeps each ack once, and its partitioning.
    acks = (pairs.filter(F.col("f") == OpF.ACK.value).join(undecided, "txn", "left_semi")
            .select("txn", "writer", "index", "type", "value", "topic", "subscription", "cumulative", "invoke_ns"))
    back = receives.select("value", "subscription", F.col("delivered_ns").alias("_back_ns"))
    per_ack = (acks.join(back, ["value", "subscription"], "left")
               .groupBy("txn", "writer", "index").agg(
                   F.max(F.coalesce(F.col("_back_ns") > F.col("invoke_ns"), F.lit(False))).alias("_back"),
                   F.min((F.col("type") == OpType.OK.value) & ~F.coalesce(F.col("cumulative"), F.lit(False))
                         & F.col("subscription").isNotNull()
                         & drained(drain, F.col("topic"), F.col("subscription"))).alias("_judgeable")))
    return one_partition(per_ack.groupBy("txn")
                         .agg(F.min("_judgeable").alias("_judgeable"), F.max("_back").alias("_back"))
                         .filter(F.col("_judgeable"))
                         .select("txn", F.when(F.col("_back"), F.lit(ABORTED)).otherwise(F.lit(COMMITTED))
                                 .alias("_decision")))


def with_decisions(txns: DataFrame, decisions: DataFrame, by: str = REDELIVERY) -> DataFrame:
    """`txns` (TXN_COLUMNS) with the outcomes `decisions` (txn, `_decision`) gave, `decided_by` `by`.

    Only a transaction whose client does not know its outcome and that invoked its commit takes
    one: the client's own outcome, and the abort a never-invoked commit implies, are not
    overruled."""
    decision = F.when((F.col("client_outcome") == UNKNOWN) & F.col("commit_invoke_ns").isNotNull(),
                      F.col("_decision"))
    return (txns.join(decisions, "txn", "left")
            .withColumn("_decision", decision)
            .withColumn("outcome", F.coalesce(decision, F.col("outcome")))
            .withColumn("decided_by", F.when(decision.isNotNull(), F.lit(by))
                        .otherwise(F.col("decided_by")))
            .withColumn("outcome_label", F.when(decision == COMMITTED, F.lit(UNKNOWN_COMMITTED))
                        .when(decision == ABORTED, F.lit(UNKNOWN_ABORTED)).otherwise(F.col("outcome_label")))
            .select(*TXN_COLUMNS))


TERMINAL_STATES = ("COMMITTED", "ABORTED")
"""The `txn-state` statuses that end a transaction for good (the coordinator's names)."""


def coordinator_decisions(readings: DataFrame) -> DataFrame:
    """txn, `_decision`: the outcome the coordinator's own record gives, where the drain read one.

    The drain reads the coordinator's view of every transaction its client left without a
    known end (`txn-state`: v4's admin `transactionMetadata`, v5's header in the metadata
    store). COMMITTED and ABORTED are final there, so such a reading is the transaction's
    outcome as the system decided it, better evidence than what the final reads happen to
    show: visibility would call a transaction whose values all vanished aborted (hiding a
    committed transaction's loss), and one whose aborted value a reader was shown committed
    (naming an aborted read a lost write). Readings that disagree decide nothing."""
    status = F.col("status")
    terminal = readings.filter(status.isin(*TERMINAL_STATES))
    outcome = F.when(status == "COMMITTED", F.lit(COMMITTED)).otherwise(F.lit(ABORTED))
    return one_partition(
        terminal.select("txn", outcome.alias("_outcome")).groupBy("txn")
        .agg(F.min("_outcome").alias("_first"), F.max("_outcome").alias("_last"))
        .filter(F.col("_first") == F.col("_last")).select("txn", F.col("_first").alias("_decision")))


def single_partition_leaf(frame: DataFrame) -> DataFrame:
    """`frame` as a local checkpoint in one partition that Spark knows is one partition.

    A checkpoint keeps the output partitioning of the plan it was made from. After
    `coalesce(1)` that is `SinglePartition`, which satisfies every distribution a
    join, aggregation or window asks for, so the plans built on such leaves need no
    shuffle at all (on a small history each shuffle is a stage of its own, and the
    stages, not the rows, are the cost). Only for small inputs: everything runs in one task.

    Spark skips the shuffle of a join only when it believes both sides fit
    `spark.sql.maxSinglePartitionBytes` (analysis.spark sets it to the largest long),
    and a checkpoint keeps the size estimate of its plan, which for a frame made of
    joins is the product of their inputs' estimates and soon exceeds any long. The
    limit (never reached: a small history has far fewer rows) replaces that product
    with rows times row width, so the estimate stays finite.
    """
    return frame.coalesce(1).limit(ROWS_BOUND).localCheckpoint(eager=False)


def prepare(ops: DataFrame, *, stall_after_s: float = DEFAULT_STALL_AFTER_S, persist: bool = True,
            max_examples: int = MAX_EXAMPLES, pairs: DataFrame | None = None,
            facts: HistoryOverview | None = None, cut_lineage: bool = False,
            lost_writers: tuple[str, ...] = (), clock_slack_ns: int = 0,
            txn_timeout_s: float = DEFAULT_TXN_TIMEOUT_S, abort_bound_s: float = DEFAULT_ABORT_BOUND_S,
            commit_blocked_windows: tuple[tuple[int, int | None], ...] = (),
            pairs_on_disk: bool = False) -> CheckContext:
    """Derive the check inputs from validated ops (analysis.model.OPS_COLUMNS).

    `pairs` (pair_operations(), lean or not, orphans allowed) and `facts`
    (overview()) may be passed when the caller has them already.

    `pairs_on_disk` says `pairs` is a Parquet copy (analysis.columnar_pairs): each reader scans
    the columns and rows it needs from it, cheaper than keeping a second copy of every operation
    in memory (24 s of task CPU at 20 million events, docs/checks.md).

    `cut_lineage` keeps the shared frames as local checkpoints instead of
    persisted plans: each becomes a leaf, computed once at first use, so the
    plans the checks build on them are small. On small histories Spark's cost is
    analysing and planning those plans, not the data: this makes the checks'
    planning several times faster (docs/checks.md, "Checker performance").
    Checkpointed frames are freed with the session's garbage, not `unpersist()`.

    Frames:
      pairs         LEAN_PAIR_COLUMNS, orphans dropped.
      reads         read events: value, topic, segment, msg_id, time_ns, writer, index, process.
      visible       visible_values() of the reads.
      txns          transaction_outcomes() (TXN_COLUMNS).
      sends         one row per send: value, writer, index, process, type, txn, topic, segment, key,
                    inputs, msg_id, invoke_ns, visible, read_ns and read_pos (first read: time,
                    then the drainer's writer and index), covered, live_visible, live_read_ns,
                    live_covered (the live reads), outcome, decided_by, commit_invoke_ns. Only what
                    a check reads: every row is kept in memory (SENDS_COLUMNS).
      receives      receive events: value, topic, segment, subscription, msg_id, time_ns, writer,
                    index, process, delivered_ns (extra.delivered_ns, at most time_ns).
      observations  every receive, its fields prefixed `o_` (`o_delivered_ns`: when its frame reached
                    the client, never after `o_time_ns`), left-joined with the send of its
                    value (`s_` fields, `sent` true when one exists), txn, outcome, decided_by,
                    commit_invoke_ns. (Final reads are judged through `sends.visible` and
                    `visible`, one row per value.)
      acks          one row per ack: value, writer, index, process, type, txn, topic, segment,
                    subscription, msg_id, cumulative, invoke_ns, outcome,
                    client_outcome, end_ns, commit_invoke_ns (its transaction's first txn-commit).
    """
    facts = facts if facts is not None else overview(ops)
    drain = facts.drain
    persisted: list[DataFrame] = []
    keeping = Keeping.NONE if not persist else Keeping.CHECKPOINT if cut_lineage else Keeping.PERSIST

    def keep(frame: DataFrame) -> DataFrame:
        frame = kept(frame, keeping)
        if keeping is Keeping.PERSIST:
            persisted.append(frame)
        return frame

    if pairs is None:
        pairs = pair_operations(ops, lean=True)
    pairs = pairs.filter(~F.col("orphan")).select(*LEAN_PAIR_COLUMNS)
    if not pairs_on_disk:
        pairs = keep(pairs)
    reads = keep(final_reads(ops).select("value", "topic", "segment", "msg_id", "time_ns", "writer", "index",
                                         "process"))
    visible = keep(visible_values(reads))
    covered = sorted(drain.topics) if drain.complete else None
    covered_col = (F.coalesce(logical_topic(F.col("topic")).isin(*sorted({logical(t) for t in covered})),
                              F.lit(False)) if covered else F.lit(False))

    send_rows = (
        pairs.filter(F.col("f") == OpF.SEND.value)
        .select("value", "writer", "index", "process", "type", "txn", "topic", "segment", "key", "inputs",
                "msg_id", "invoke_ns")
        .join(visible.select("value", "read_ns", "read_pos"), "value", "left")
        .withColumn("visible", F.col("read_ns").isNotNull())
        .withColumn("covered", covered_col))
    live_covered = sorted(drain.live_topics) if drain.complete else []
    if live_covered:
        live = live_reads(ops).filter(F.col("value").isNotNull()).groupBy("value").agg(
            F.min("time_ns").alias("live_read_ns"))
        send_rows = (send_rows.join(live, "value", "left")
                     .withColumn("live_visible", F.col("live_read_ns").isNotNull())
                     .withColumn("live_covered", F.coalesce(logical_topic(F.col("topic")).isin(
                         *sorted({logical(t) for t in live_covered})), F.lit(False))))
    else:
        send_rows = (send_rows.withColumn("live_read_ns", F.lit(None).cast("long"))
                     .withColumn("live_visible", F.lit(False)).withColumn("live_covered", F.lit(False)))
    send_vis = keep(send_rows)
    recv = keep(receives(ops).select("value", "topic", "segment", "subscription", "msg_id", "time_ns",
                                     "writer", "index", "process",
                                     # The earliest evidence of a delivery: the frame's arrival, or the
                                     # receive itself when that is earlier or not recorded.
                                     F.least(F.coalesce(F.col("delivered_ns"), F.col("time_ns")),
                                             F.col("time_ns")).alias("delivered_ns")))
    txns = transaction_outcomes(pairs, covered_topics=covered, visible_sends=send_vis)
    txn_states = None
    if facts.counts.get("txn_states", 0):
        txn_states = keep(ops.filter(F.col("f") == OpF.TXN_STATE.value).select(
            "txn", "time_ns", "writer", "index", "process",
            F.get_json_object(F.col("extra"), "$.status").alias("status"), "error"))
    decides = bool(facts.counts.get("acks", 0) and drain.complete)
    if keeping is Keeping.PERSIST:
        # The deciding reads the transactions twice (which to decide, and the join back): kept,
        # a large history groups every transaction's operations once, not twice. The few
        # decisions are kept apart and joined onto every reader of the transactions, instead
        # of a second copy of all of them with the decisions in (docs/checks.md).
        txns = keep(txns)
        if txn_states is not None:
            # The readings are of the transactions the load left without an end: a few.
            txns = with_decisions(txns, F.broadcast(coordinator_decisions(txn_states)), COORDINATOR)
        if decides:
            decisions = keep(redelivery_decisions(txns, pairs, recv, drain))
            decided = decisions.count()
            if decided > BROADCAST_DECISIONS_MAX:
                txns = keep(with_decisions(txns, decisions))
            elif decided:
                txns = with_decisions(txns, F.broadcast(decisions))
    else:
        if txn_states is not None:
            txns = with_decisions(txns, coordinator_decisions(txn_states), COORDINATOR)
        if decides:
            txns = decide_ack_only_by_redelivery(txns, pairs, recv, drain)
        txns = keep(txns)
    txn_cols = txns.select("txn", "outcome", "client_outcome", "decided_by", "commit_invoke_ns", "end_ns")
    if keeping is Keeping.PERSIST and txns.count() <= BROADCAST_TXNS_MAX:
        # Sent whole to every task, the outcomes leave the sends and acks where they are: no send is
        # shuffled by its transaction, and the sends stay partitioned by value, where the checks
        # meet them with reads and receives (docs/checks.md, "Outcomes broadcast").
        txn_cols = F.broadcast(txn_cols)
    # A send outside any transaction is its own unit of atomicity.
    lone = (F.when(F.col("type") == OpType.OK.value, F.lit(COMMITTED))
            .when(F.col("type") == OpType.FAIL.value, F.lit(ABORTED))
            .when(F.col("visible"), F.lit(COMMITTED))
            .when(F.col("covered"), F.lit(ABORTED)).otherwise(F.lit(UNKNOWN)))
    is_lone = F.col("txn").isNull()
    outcome = F.when(is_lone, lone).otherwise(F.coalesce(F.col("outcome"), F.lit(UNKNOWN)))
    sends = keep(send_vis.join(txn_cols.select("txn", "outcome", "decided_by", "commit_invoke_ns"), "txn", "left")
                 .withColumn("outcome", outcome).select(*SENDS_COLUMNS))

    seen = recv.select(F.lit(OpF.RECEIVE.value).alias("kind"), "value",
                       *[F.col(c).alias(f"o_{c}") for c in _OBSERVED])
    # Each receive meets its send in `send_vis`, already partitioned by value, and then its
    # transaction's outcome: the receives are shuffled twice, not every send a second time.
    sent = send_vis.select("value", *[F.col(c).alias(f"s_{c}") for c in _SENT], "txn",
                           lone.alias("_lone"), F.lit(True).alias("sent"))
    outcomes = txn_cols.select("txn", F.col("outcome").alias("_outcome"), "decided_by", "commit_invoke_ns")
    with_send = seen.join(sent, "value", "left").withColumn("sent", F.coalesce(F.col("sent"), F.lit(False)))
    observations = keep(with_send.join(outcomes, "txn", "left").select(
        "value", "kind", *[f"o_{c}" for c in _OBSERVED], *[f"s_{c}" for c in _SENT], "txn",
        F.when(~F.col("sent"), F.lit(None).cast("string")).when(is_lone, F.col("_lone"))
        .otherwise(F.coalesce(F.col("_outcome"), F.lit(UNKNOWN))).alias("outcome"),
        "decided_by", "commit_invoke_ns", "sent"))

    ack_rows = pairs.filter(F.col("f") == OpF.ACK.value)
    if facts.counts.get("acks_without_topic", 0):
        # An ack's topic is the acked value's topic when the ack does not record one.
        send_topic = sends.select("value", F.col("topic").alias("_send_topic"))
        ack_rows = (ack_rows.join(send_topic, "value", "left")
                    .withColumn("topic", F.coalesce(F.col("topic"), F.col("_send_topic"))))
    acks = keep(ack_rows.join(txn_cols, "txn", "left").select(
        "value", "writer", "index", "process", "type", "txn", "topic", "segment", "subscription", "msg_id",
        F.coalesce(F.col("cumulative"), F.lit(False)).alias("cumulative"), "invoke_ns",
        F.coalesce(F.col("outcome"), F.lit(UNKNOWN)).alias("outcome"),
        F.coalesce(F.col("client_outcome"), F.lit(UNKNOWN)).alias("client_outcome"), "end_ns",
        "commit_invoke_ns",
    ))
    marks = [m for m in facts.phases if m.name == DRAIN_PHASE]
    return CheckContext(
        pairs=pairs, txns=txns, sends=sends, acks=acks, receives=recv, reads=reads, visible=visible,
        observations=observations, drain=drain, stall_after_ns=int(stall_after_s * 1e9),
        history_end_ns=facts.last_ns, drain_phase_ns=marks[0].time_ns if marks else None, overview=facts,
        max_examples=max_examples, persisted=tuple(persisted), keeping=keeping, lost_writers=tuple(lost_writers),
        clock_slack_ns=int(clock_slack_ns), txn_states=txn_states, txn_timeout_ns=int(txn_timeout_s * 1e9),
        abort_bound_ns=int(abort_bound_s * 1e9), commit_blocked_windows=tuple(commit_blocked_windows),
    )


# A message id as Pulsar prints it: three numbers without leading zeros or a signed zero, of at
# most 18 digits (so each is a long, and casting it gives back the same text).
_PRINTED_POSITION = r"^(0|-?[1-9][0-9]{0,17}):(0|-?[1-9][0-9]{0,17}):(0|-?[1-9][0-9]{0,17})$"


def message_name(msg_id: Column) -> Column:
    """`message_position` as text, `ledger:entry:batch` (null when not in that form).

    An id already printed that way is its own name: one regular expression instead of the
    position's regular expression, splits and casts, evaluated once per field. Any other form
    goes the long way."""
    pos = message_position(msg_id)
    return F.when(msg_id.rlike(_PRINTED_POSITION), msg_id).when(
        pos.isNotNull(), F.concat_ws(":", pos["ledger"], pos["entry"], pos["batch"]))


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
