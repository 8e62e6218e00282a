"""The history model: operations paired, transactions decided, the drain read, over Spark frames.

Everything here is a pure function of a validated ops frame (OPS_COLUMNS, made by
analysis.history_io): no files, no session. The checks (analysis.checks) import only
this module, so what they see of a history is this model, never how it was read.

Theory of operation.

*Pairing.* A process has at most one outstanding operation, so an invocation's
completion is the next event of the same (writer, process) when that event is a
completion of the same `f`. An invocation without one counts as `info`
(`completed` false). Single events (`receive`, `read`, `phase`) are already
complete and appear as operations with `invoke_ns == complete_ns`.

*Transactions.* The client's view decides first: committed if a commit
completed ok; aborted if an abort completed ok or a commit failed
definitively. Otherwise the outcome is unknown to the client. A transaction
whose commit was never invoked can only have been aborted (by the
coordinator): aborted, decided by `no-commit`, whatever is visible. Where the
commit was invoked, visibility decides: any visible value (present in the
drainer's final reads) makes it committed; none makes it aborted, but only when
every value it may have written and that is not visible went to a topic the
drain read to the end. A transaction with nothing that could be visible (e.g.
acks only) stays unknown. (analysis.checks.context then lets the coordinator's
own record of the end, where the drain read one, overrule visibility.)

Public API (stable; analysis.checks, analysis.perf and analysis.check build on it):

    OPS_COLUMNS, REQUIRED_FIELDS, PAIR_COLUMNS, LEAN_PAIR_COLUMNS, TXN_COLUMNS, SINGLE_FS
    COMMITTED, ABORTED, UNKNOWN, UNKNOWN_COMMITTED, UNKNOWN_ABORTED   (outcome labels)
    CLIENT, VISIBILITY, NO_COMMIT, REDELIVERY, COORDINATOR             (decided_by)
    DrainInfo, PhaseMark, HistoryOverview                              (frozen dataclasses)
    pair_operations(ops, *, include_orphans=False, lean=False) -> DataFrame
    overview(ops) -> HistoryOverview   (phases, drain, time span, counts: one job)
    overview_aggregates() -> list[Column];  overview_from_row(row) -> HistoryOverview  (the same, in a caller's pass)
    unclaimed_completion() -> Column   (a window column: a completion no invocation claims)
    first_unclaimed() -> (windows, Column)   (the first such completion, UNCLAIMED, FIRST_UNCLAIMED)
    drain_info(ops) -> DrainInfo;  lost_run_of(drain, topic, segment, msg_id)
    phase_marks(ops) -> tuple[PhaseMark, ...]
    final_reads(ops) -> DataFrame;  live_reads(ops) -> DataFrame;  receives(ops) -> DataFrame
    visible_values(reads) -> DataFrame                        (value, read_ns, reads, positions)
    transaction_outcomes(pairs, visible=None, covered_topics=None, *, visible_sends=None) -> DataFrame
    logical(topic) -> str;  logical_topic(column) -> Column   (drop a `-partition-N` suffix)
    union_all(frames) -> DataFrame        (one partition in small-input mode)
    one_partition(frame) -> DataFrame     (a join's output as one partition in small-input mode)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis.spark import single_partition_mode
from harness.history.positions import ledger_entry
from harness.history.schema import FIELDS, LIVE_DRAIN_WRITER, PHASE_DRAIN_COMPLETE, OpF, OpType

__all__ = [
    "ABORTED", "CLIENT", "COMMITTED", "COORDINATOR", "FIRST_UNCLAIMED", "LEAN_PAIR_COLUMNS", "NO_COMMIT", "OPS_COLUMNS",
    "PAIR_COLUMNS", "REDELIVERY", "REQUIRED_FIELDS", "ROWS_BOUND", "SINGLE_FS", "TXN_COLUMNS", "UNCLAIMED", "UNKNOWN", "UNKNOWN_ABORTED",
    "UNKNOWN_COMMITTED", "VISIBILITY", "DrainInfo", "HistoryOverview", "PhaseMark", "drain_info", "final_reads",
    "first_unclaimed", "live_reads", "logical", "logical_topic", "lost_run_of", "one_partition", "overview",
    "overview_aggregates", "overview_from_row", "pair_operations", "phase_marks", "receives", "transaction_outcomes",
    "unclaimed_completion", "union_all", "visible_values",
]

# Events that are complete on their own: one line, always `ok`.
SINGLE_FS = (OpF.RECEIVE.value, OpF.READ.value, OpF.PHASE.value, OpF.TXN_STATE.value)

# Columns of a loaded ops DataFrame: the line fields, the source file name, and
# `phase` (extra.name), `redelivery`, `cumulative`, `intended_ns`, `delivered_ns` from `extra`.
OPS_COLUMNS: tuple[str, ...] = (*FIELDS, "file", "phase", "redelivery", "cumulative", "intended_ns",
                                "delivered_ns")

# Fields every valid line has (analysis.history_io's validation refuses a line without one): the
# pairing partitions and orders by them, and the rules read them.
REQUIRED_FIELDS: tuple[str, ...] = ("writer", "process", "index", "time_ns", "type", "f")

# Columns of pair_operations(): one row per operation.
PAIR_COLUMNS: tuple[str, ...] = (
    "writer", "process", "f", "type", "completed", "orphan", "path", "txn", "topic", "segment",
    "subscription", "key", "value", "inputs", "msg_id", "error", "extra", "phase", "redelivery",
    "cumulative", "intended_ns", "index", "complete_index", "invoke_ns", "complete_ns", "wall_ms",
    "complete_wall_ms",
)

# Columns of transaction_outcomes(): one row per transaction id.
TXN_COLUMNS: tuple[str, ...] = (
    "txn", "writer", "process", "open_index", "open_ns", "commit_invoke_ns", "end_invoke_ns",
    "end_ns", "client_outcome", "outcome", "decided_by", "outcome_label", "sends_ok", "sends_info",
    "sends_fail", "sends_visible", "sends_uncovered", "sends_ok_missing", "sends_ok_uncovered", "acks", "ctp",
    "opens_ok", "ok_open_invoke_ns", "ok_open_complete_ns", "ended_ok",
)

# Transaction outcome labels (TXN_COLUMNS.outcome_label).
COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"
UNKNOWN_COMMITTED, UNKNOWN_ABORTED = "unknown-committed", "unknown-aborted"
# TXN_COLUMNS.decided_by: the client saw the outcome; visibility decided it; or the client
# never invoked the commit, so the coordinator can only have aborted it.
# ...or, for an ack-only transaction, whether its acked messages came back; or the coordinator's
# own record of its end, which the drain read (checks.context).
CLIENT, VISIBILITY, NO_COMMIT, REDELIVERY, COORDINATOR = "client", "visibility", "no-commit", "redelivery", "coordinator"


@dataclass(frozen=True)
class PhaseMark:
    """A `phase` event: `name` started at `time_ns` (run clock).

    `topic` and `subscription` are the event's own (a `subscription-start` names the
    subscription that now exists), None when it has none: checks that need them read
    them here, from the overview's one pass, instead of scanning the history again."""

    name: str
    time_ns: int
    writer: str
    index: int
    topic: str | None = None
    subscription: str | None = None


@dataclass(frozen=True)
class DrainInfo:
    """What the drain proved: topics read to the end, subscriptions consumed until empty.

    `complete` is False when the history has no `drain-complete` phase event; then
    `topics` and `subscriptions` are empty and no final-read check can give a verdict.
    `lost_entries` are the runs of entries the brokers acknowledged and said their storage
    lost (`extra.lost_entries`: topic, segment, first and last `ledger:entry`, count,
    reason); a topic with such runs is still read to the end, around them.
    """

    complete: bool
    topics: frozenset[str] = frozenset()
    subscriptions: frozenset[tuple[str, str]] = frozenset()
    time_ns: int | None = None
    lost_entries: tuple[Mapping[str, Any], ...] = ()
    live_topics: frozenset[str] = frozenset()
    """Topics the live reads (before the cold restart) read to the end (`extra.live_topics`)."""
    live_lost_entries: tuple[Mapping[str, Any], ...] = ()


# Far above the rows of any frame of a small history (analysis.spark.SMALL_INPUT_BYTES of JSONL).
ROWS_BOUND = 2**31 - 1


def one_partition(frame: DataFrame) -> DataFrame:
    """In small-input mode, `frame` as one partition that Spark knows is one partition.

    A join of two inputs needs no shuffle only when each input's partitioning is exactly
    one partition and its size estimate is within spark.sql.maxSinglePartitionBytes. An
    inner join's output has a collection of its inputs' partitionings, and a join's size
    estimate is the product of its inputs' estimates, which overflows any limit after a
    join or two; `coalesce(1)` makes the partitioning one partition and the row bound
    (never reached) makes the estimate rows times width. Outside small-input mode the
    frame is returned as it is.
    """
    return frame.coalesce(1).limit(ROWS_BOUND) if single_partition_mode() else frame


def union_all(frames: Iterable[DataFrame]) -> DataFrame:
    """The frames stacked by column name.

    In small-input mode (analysis.spark.single_partition_mode) the union is coalesced to
    one partition: a union of one-partition frames has one partition per input, and
    any join, aggregation or window over it would shuffle, a stage of its own.
    """
    frames = list(frames)
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out.coalesce(1) if single_partition_mode() and len(frames) > 1 else out


# ---- events ---------------------------------------------------------------------------------


LIVE_READ_PROCESS = f"{LIVE_DRAIN_WRITER}/"   # the live reads' processes


def _live(process: Column) -> Column:
    return F.coalesce(process.startswith(LIVE_READ_PROCESS), F.lit(False))


def final_reads(ops: DataFrame) -> DataFrame:
    """The drainer's `read` events (OPS_COLUMNS): the final state of each topic, in log order.

    The cold reads (after every broker restarted), or the only reads of a run without them;
    the live reads made before the restart are `live_reads`."""
    return ops.filter((F.col("f") == OpF.READ.value) & ~_live(F.col("process")))


def live_reads(ops: DataFrame) -> DataFrame:
    """The live final reads (processes `drain-live/...`), made on the live system before the
    cold restart; empty when the run made none."""
    return ops.filter((F.col("f") == OpF.READ.value) & _live(F.col("process")))


def receives(ops: DataFrame) -> DataFrame:
    """Consumer deliveries (`receive` events, OPS_COLUMNS), the drainer's included."""
    return ops.filter(F.col("f") == OpF.RECEIVE.value)


def phase_marks(ops: DataFrame) -> tuple[PhaseMark, ...]:
    """Every `phase` event in time order (a few rows; collected to the driver)."""
    return overview(ops).phases


def drain_info(ops: DataFrame) -> DrainInfo:
    """What the `drain-complete` phase event(s) say; several are merged."""
    return overview(ops).drain


@dataclass(frozen=True)
class HistoryOverview:
    """Facts gathered in one pass over the ops: phases, the drain, time span, counts.

    `counts` has: events, sends, ctp_sends (sends carrying inputs), acks,
    cumulative_acks, acks_without_topic, receives, reads.
    """

    phases: tuple[PhaseMark, ...]
    drain: DrainInfo
    first_ns: int | None
    last_ns: int | None
    counts: Mapping[str, int]


def _drain_from_phases(rows: Iterable[Any]) -> DrainInfo:
    found = [r for r in rows if r["phase"] == PHASE_DRAIN_COMPLETE]
    if not found:
        return DrainInfo(complete=False)
    topics: set[str] = set()
    subs: set[tuple[str, str]] = set()
    lost: list[Mapping[str, Any]] = []
    live: set[str] = set()
    live_lost: list[Mapping[str, Any]] = []
    for row in found:
        try:
            extra = json.loads(row["extra"]) if row["extra"] else {}
        except ValueError:
            extra = {}
        extra = extra if isinstance(extra, dict) else {}
        for topic in extra.get("topics") or []:
            if isinstance(topic, str):
                topics.add(topic)
        for pair in extra.get("subscriptions") or []:
            if isinstance(pair, Mapping) and pair.get("topic") and pair.get("subscription"):
                subs.add((str(pair["topic"]), str(pair["subscription"])))
            elif isinstance(pair, list | tuple) and len(pair) == 2:
                subs.add((str(pair[0]), str(pair[1])))
        for run in extra.get("lost_entries") or []:
            if isinstance(run, Mapping) and ledger_entry(run.get("first")) and ledger_entry(run.get("last")):
                lost.append(dict(run))
        for topic in extra.get("live_topics") or []:
            if isinstance(topic, str):
                live.add(topic)
        for run in extra.get("live_lost_entries") or []:
            if isinstance(run, Mapping) and ledger_entry(run.get("first")) and ledger_entry(run.get("last")):
                live_lost.append(dict(run))
    return DrainInfo(True, frozenset(topics), frozenset(subs), max(int(r["time_ns"]) for r in found), tuple(lost),
                     frozenset(live), tuple(live_lost))


def lost_run_of(drain: DrainInfo, topic: str | None, segment: str | None, msg_id: str | None) -> Mapping[str, Any] | None:
    """The drain's lost run that holds the entry `msg_id` of (topic, segment), if any."""
    position = ledger_entry(msg_id)
    if position is None:
        return None
    for run in drain.lost_entries:
        where = run.get("segment")
        if where not in (segment, topic) and not (segment is None and where == run.get("topic") == topic):
            continue
        first, last = ledger_entry(run.get("first")), ledger_entry(run.get("last"))
        if first is not None and last is not None and first <= position <= last:
            return run
    return None


def overview(ops: DataFrame) -> HistoryOverview:
    """Phases, drain, time span and a few counts, in one Spark job."""
    return overview_from_row(ops.agg(*overview_aggregates()).collect()[0])


def overview_aggregates() -> list[Column]:
    """The aggregates `overview` computes, for a caller that folds them into a pass of its own
    (analysis.history_io.load_history's `summary`); `overview_from_row` reads the result."""
    f = F.col("f")

    def n(cond: Column) -> Column:
        return F.sum(F.when(cond, 1).otherwise(0)).cast("long")

    return [
        F.min("time_ns").alias("first_ns"), F.max("time_ns").alias("last_ns"),
        F.collect_list(F.when(f == OpF.PHASE.value, F.struct(
            F.col("time_ns"), F.col("writer"), F.col("index"), F.col("phase"), F.col("extra"), F.col("topic"),
            F.col("subscription")))).alias("phases"),
        F.count(F.lit(1)).alias("events"),
        n(f == OpF.SEND.value).alias("sends"),
        n((f == OpF.SEND.value) & (F.size(F.coalesce(F.col("inputs"), F.array())) > 0)).alias("ctp_sends"),
        n(f == OpF.ACK.value).alias("acks"),
        n((f == OpF.ACK.value) & F.coalesce(F.col("cumulative"), F.lit(False))).alias("cumulative_acks"),
        n((f == OpF.ACK.value) & F.col("topic").isNull()).alias("acks_without_topic"),
        n(f == OpF.RECEIVE.value).alias("receives"),
        n(f == OpF.READ.value).alias("reads"),
        n(f == OpF.TXN_STATE.value).alias("txn_states"),
    ]


def overview_from_row(row: Any) -> HistoryOverview:
    """The HistoryOverview of a row holding `overview_aggregates()`."""
    phase_rows = sorted(row["phases"] or [], key=lambda r: (r["time_ns"], r["writer"], r["index"]))
    phases = tuple(PhaseMark(r["phase"] or "", int(r["time_ns"]), r["writer"], int(r["index"]), r["topic"],
                             r["subscription"]) for r in phase_rows)
    counts = {k: int(row[k] or 0) for k in ("events", "sends", "ctp_sends", "acks", "cumulative_acks",
                                            "acks_without_topic", "receives", "reads", "txn_states")}
    return HistoryOverview(phases, _drain_from_phases(phase_rows), row["first_ns"], row["last_ns"], counts)


def unclaimed_completion() -> Column:
    """True on a completion that no invocation claims: the `orphan` rule of `pair_operations`.

    A completion is claimed by the previous event of its (writer, process) when that is an
    invocation of the same `f`; single events (receive, read, phase) take no part. A window
    column, for a pass over the ops that does not pair them (analysis.history_io's summary).
    """
    single = F.col("f").isin(*SINGLE_FS)
    w = Window.partitionBy("writer", "process", single).orderBy("index")
    prv = F.lag(F.struct("type", "f")).over(w)
    claimed = prv.isNotNull() & (prv["type"] == OpType.INVOKE.value) & (prv["f"] == F.col("f"))
    return ~single & (F.col("type") != OpType.INVOKE.value) & ~F.coalesce(claimed, F.lit(False))


UNCLAIMED, FIRST_UNCLAIMED = "_unclaimed", "_first_orphan"


def first_unclaimed() -> tuple[dict[str, Column], Column]:
    """(windows, aggregate) finding the first completion no invocation claims: the window column
    `UNCLAIMED` (`unclaimed_completion`) and, over rows carrying it, `FIRST_UNCLAIMED`, the least
    (writer, index, process, f, type) of those completions as a struct, null when there is none.

    For a pass over the ops that does not pair them (a small check's validating pass): the
    check refuses a history with such a completion. Arrow's conversion finds the same completion
    as it pairs (analysis.columnar_overview), and gives it where this is asked for."""
    first = F.min(F.when(F.col(UNCLAIMED), F.struct("writer", "index", "process", "f", "type")))
    return {UNCLAIMED: unclaimed_completion()}, first.alias(FIRST_UNCLAIMED)


def visible_values(reads: DataFrame) -> DataFrame:
    """One row per value present in the final reads.

    Columns: value, read_ns (run-clock time of its first read), read_pos (its
    first read as (time_ns, writer, index): the drainer reads each topic in log
    order and numbers its lines, so read_pos orders a topic's values even where
    a coarse clock gives two reads one time), reads (how
    many read events), positions (distinct (topic, segment, msg_id) it was read
    at).

    One shuffle: the reads are partitioned by value once, and both groupings, by place
    and then by value, keep that partitioning (a distinct count in one grouping would
    shuffle twice and expand every row: 1.1-1.4 s against 1.9 s on 2 million events, alone).
    """
    rows = reads.filter(F.col("value").isNotNull())
    if not single_partition_mode():
        rows = rows.repartition("value")
    place = [F.coalesce(F.col(name), F.lit("")).alias(f"_{name}") for name in ("topic", "segment", "msg_id")]
    per_place = rows.groupBy("value", *place).agg(
        F.min("time_ns").alias("_first_ns"), F.min(F.struct("time_ns", "writer", "index")).alias("_first"),
        F.count(F.lit(1)).alias("_reads"))
    return per_place.groupBy("value").agg(
        F.min("_first_ns").alias("read_ns"), F.min("_first").alias("read_pos"),
        F.sum("_reads").alias("reads"), F.count(F.lit(1)).alias("positions"))


# ---- pairing --------------------------------------------------------------------------------

_CARRIED = ("txn", "topic", "segment", "subscription", "key", "value", "inputs", "msg_id", "extra",
            "phase", "redelivery", "cumulative")
# What a lean pairing takes from the completion (its results); the rest comes from the invocation.
_LEAN_RESULTS = ("txn", "topic", "segment", "msg_id")
_LEAN_INVOKE = ("subscription", "key", "value", "inputs", "cumulative")

# Columns of pair_operations(..., lean=True): what the checks need, nothing wide.
LEAN_PAIR_COLUMNS: tuple[str, ...] = (
    "writer", "process", "f", "type", "completed", "orphan", "txn", "topic", "segment", "subscription",
    "key", "value", "inputs", "msg_id", "cumulative", "index", "complete_index", "invoke_ns", "complete_ns",
)


def _cols(items: list[Any]) -> list[Column | str]:
    """Typing help: a list of column names and expressions."""
    return items


def pair_operations(ops: DataFrame, *, include_orphans: bool = False, lean: bool = False) -> DataFrame:
    """One row per operation (PAIR_COLUMNS): an invocation joined with its completion.

    The completion is the next event of the same (writer, process) if it is a
    completion of the same `f`; otherwise the invocation is incomplete
    (`completed` false, `type` "info"). Completion fields win over the
    invocation's (a `txn-open` learns its `txn` on completion). Single events
    are included as complete operations. With `include_orphans`, completions no
    invocation claims are included too (`orphan` true, `invoke_ns` null): a
    broken contract the checker reports.

    `lean` keeps only LEAN_PAIR_COLUMNS (no `extra`, `error`, wall clock), and
    takes only `txn`, `topic`, `segment` and `msg_id` from the completion (the
    recorder repeats the invocation's other fields): the shape the checker uses
    on large histories, where every byte per row is sorted and shuffled.
    """
    kept: tuple[str, ...]
    extra_fields: tuple[str, ...]
    if lean:
        carried: tuple[str, ...] = _LEAN_RESULTS
        kept = _LEAN_INVOKE
        extra_fields = ()
        ops = ops.select("writer", "process", "index", "time_ns", "type", "f", *_LEAN_RESULTS, *_LEAN_INVOKE)
    else:
        carried, kept, extra_fields = _CARRIED, (), ("wall_ms", "error")
    single = ops.filter(F.col("f").isin(*SINGLE_FS))
    events = ops.filter(~F.col("f").isin(*SINGLE_FS))
    w = Window.partitionBy("writer", "process").orderBy("index")
    nxt = F.lead(F.struct("type", "f", "index", "time_ns", *extra_fields, *carried)).over(w)
    prv = F.lag(F.struct("type", "f")).over(w)
    seq = events.select(*ops.columns, nxt.alias("_n"), prv.alias("_p"))

    done = (F.col("_n").isNotNull() & (F.col("_n.type") != OpType.INVOKE.value)
            & (F.col("_n.f") == F.col("f")))
    done = F.coalesce(done, F.lit(False))
    is_invoke = F.col("type") == OpType.INVOKE.value
    claimed = (F.col("_p").isNotNull() & (F.col("_p.type") == OpType.INVOKE.value)
               & (F.col("_p.f") == F.col("f")))
    is_orphan = ~is_invoke & ~F.coalesce(claimed, F.lit(False))
    # One pass over the window's output: invocations (with their completion) and, when
    # asked, the completions nobody invoked; an orphan keeps its own fields.
    rows = seq.filter(is_invoke | is_orphan) if include_orphans else seq.filter(is_invoke)

    def of_invoke(value: Column, otherwise: Column) -> Column:
        return F.when(is_invoke, value).otherwise(otherwise)

    from_completion = [of_invoke(F.coalesce(F.when(done, F.col(f"_n.{c}")), F.col(c)), F.col(c)).alias(c)
                       for c in carried]
    operations = rows.select(
        "writer", "process", "f",
        of_invoke(F.when(done, F.col("_n.type")).otherwise(F.lit(OpType.INFO.value)), F.col("type")).alias("type"),
        of_invoke(done, F.lit(True)).alias("completed"), (~is_invoke).alias("orphan"),
        *from_completion, *kept,
        "index",
        of_invoke(F.when(done, F.col("_n.index")), F.col("index")).alias("complete_index"),
        F.when(is_invoke, F.col("time_ns")).alias("invoke_ns"),
        of_invoke(F.when(done, F.col("_n.time_ns")), F.col("time_ns")).alias("complete_ns"),
        *(_cols([] if lean else [
            "path", "intended_ns", of_invoke(F.when(done, F.col("_n.error")), F.col("error")).alias("error"),
            F.when(is_invoke, F.col("wall_ms")).alias("wall_ms"),
            of_invoke(F.when(done, F.col("_n.wall_ms")), F.col("wall_ms")).alias("complete_wall_ms")])),
    )
    singles = single.select(
        "writer", "process", "f", "type", F.lit(True).alias("completed"), F.lit(False).alias("orphan"),
        *carried, *kept, "index", F.col("index").alias("complete_index"),
        F.col("time_ns").alias("invoke_ns"), F.col("time_ns").alias("complete_ns"),
        *(_cols([] if lean else ["path", "intended_ns", "error", "wall_ms",
                                 F.col("wall_ms").alias("complete_wall_ms")])),
    )
    out = union_all([operations, singles])
    return out.select(*(LEAN_PAIR_COLUMNS if lean else PAIR_COLUMNS))


# ---- transactions ---------------------------------------------------------------------------


_PARTITION_SUFFIX = r"-partition-[0-9]+$"
_PARTITION_MARK = "-partition-"   # the literal part every match of _PARTITION_SUFFIX holds


def logical(topic: str) -> str:
    """A topic name without a v4 partition suffix (`t-partition-3` -> `t`)."""
    return re.sub(_PARTITION_SUFFIX, "", topic)


def logical_topic(topic: Column) -> Column:
    """`logical()` as a column: histories record logical topics, and one that records a
    partition's name still matches the drain's list of topics read to the end.

    The regular expression runs only on names holding its literal part: most names hold
    none (v5 segments, unpartitioned topics), and a regular expression on every send was
    twice the cost of the plain comparison it feeds (12 million names: 1.9 s of CPU against
    0.4 s; with this test first, 1.0 s)."""
    return F.when(topic.contains(_PARTITION_MARK), F.regexp_replace(topic, _PARTITION_SUFFIX, "")).otherwise(topic)


def _some(cond: Column) -> Column:
    """1 when `cond` holds for any row of the group, else 0 (a number: hash aggregation keeps it)."""
    return F.max(F.when(cond, 1).otherwise(0))


def _least(cond: Column, column: str) -> Column:
    """The least `column` of the group's rows where `cond` holds."""
    return F.min(F.when(cond, F.col(column)))


def _count(cond: Column) -> Column:
    return F.sum(F.when(cond, 1).otherwise(0)).cast("long")


def transaction_outcomes(pairs: DataFrame, visible: DataFrame | None = None,
                         covered_topics: Iterable[str] | None = None, *,
                         visible_sends: DataFrame | None = None) -> DataFrame:
    """One row per transaction id (TXN_COLUMNS) with its outcome.

    Args:
        pairs: pair_operations() output.
        visible: a DataFrame with a `value` column of values in the final reads
            (visible_values()); None when there are no final reads.
        covered_topics: topics the drain read to the end; None when unknown
            (then no transaction is decided aborted by absence).
        visible_sends: instead of `visible`, the send rows of `pairs` already
            joined with it, with a boolean `visible` column (saves a join).

    `client_outcome` is what the client knows; `outcome` adds the decision for
    unknown ones (`decided_by` "client", "no-commit" (never asked to commit:
    aborted) or "visibility", null while still unknown); `outcome_label` is
    committed, aborted, unknown-committed, unknown-aborted or unknown.
    `sends_uncovered` counts possible values that are not visible and went to a
    topic the drain did not read to the end. Of the `ok` sends that are not visible,
    `sends_ok_missing` counts those on a topic the drain read to the end and
    `sends_ok_uncovered` the others (partial-txn's counts: they come from this grouping
    rather than one of every send again).

    `opens_ok` counts the `txn-open`s that completed `ok` with this id (more than one
    is a txn-id-reuse), `ok_open_invoke_ns` is the earliest invocation of those and
    `ok_open_complete_ns` the earliest completion (when an abandoned transaction's
    timeout started). They come from this one grouping of every transaction's
    operations, so the checks that need them do not scan every operation again.
    `ended_ok`: a commit or an abort of it completed `ok`. A commit that failed leaves the
    client outcome aborted (it did not commit) but ends nothing: the coordinator must still
    abort the transaction at its timeout (unresolved-txn).
    """
    cols = ("txn", "f", "type", "invoke_ns", "complete_ns", "writer", "index", "process", "topic", "inputs")
    # The drain's `txn-state` readings name a transaction but are none of its client's operations.
    tx = pairs.filter(F.col("txn").isNotNull() & ~F.col("orphan") & (F.col("f") != OpF.TXN_STATE.value)).select(*cols)
    if visible_sends is not None:
        # A send's completion time counts in no aggregate below: the sends need not carry it.
        sends = (visible_sends.filter(F.col("txn").isNotNull()).withColumn("f", F.lit(OpF.SEND.value))
                 .withColumn("complete_ns", F.lit(None).cast("long")).select(*cols, F.col("visible").alias("_visible")))
        others = tx.filter(F.col("f") != OpF.SEND.value).withColumn("_visible", F.lit(None).cast("boolean"))
        tx = union_all([sends, others])
    elif visible is not None:
        vis = visible.select("value", F.lit(True).alias("_visible"))
        sends = (pairs.filter(F.col("txn").isNotNull() & ~F.col("orphan") & (F.col("f") == OpF.SEND.value))
                 .join(vis, "value", "left").select(*cols, "_visible"))
        others = tx.filter(F.col("f") != OpF.SEND.value).withColumn("_visible", F.lit(None).cast("boolean"))
        tx = union_all([sends, others])
    else:
        tx = tx.withColumn("_visible", F.lit(None).cast("boolean"))
    covered = sorted({logical(t) for t in covered_topics}) if covered_topics is not None else None

    f, typ = F.col("f"), F.col("type")
    is_commit, is_abort = f == OpF.TXN_COMMIT.value, f == OpF.TXN_ABORT.value
    is_send = f == OpF.SEND.value
    maybe_written = is_send & typ.isin(OpType.OK.value, OpType.INFO.value)
    # A visible value is judged wherever it is; only an invisible one on a topic the drain did
    # not read to the end is out of reach.
    uncovered = (maybe_written & ~F.coalesce(F.col("_visible"), F.lit(False))
                 & (~logical_topic(F.col("topic")).isin(*covered) | F.col("topic").isNull())
                 if covered is not None else F.lit(False))
    # As the sends' `covered` (analysis.checks.context.prepare): never null.
    on_covered = (F.coalesce(logical_topic(F.col("topic")).isin(*covered), F.lit(False)) if covered
                  else F.lit(False))
    ok_unseen = is_send & (typ == OpType.OK.value) & ~F.coalesce(F.col("_visible"), F.lit(False))
    commit_ok, abort_ok = is_commit & (typ == OpType.OK.value), is_abort & (typ == OpType.OK.value)
    commit_fail = is_commit & (typ == OpType.FAIL.value)
    open_ok = (f == OpF.TXN_OPEN.value) & (typ == OpType.OK.value)
    # The conditions on the fields the grouping does not keep (topic, inputs, visibility) become
    # flags first, so the operations it groups are narrow.
    tx = tx.select("txn", "f", "type", "invoke_ns", "complete_ns", "writer", "index", "process",
                   (maybe_written & F.coalesce(F.col("_visible"), F.lit(False))).alias("_seen"),
                   uncovered.alias("_uncovered"), (ok_unseen & on_covered).alias("_ok_missing"),
                   (ok_unseen & ~on_covered).alias("_ok_uncovered"),
                   (is_send & (F.size(F.coalesce(F.col("inputs"), F.array())) > 0)).alias("_carries"))
    if not single_partition_mode():
        # Grouped where they land: both groupings below keep the partitioning by transaction.
        tx = tx.repartition("txn")
    # Two groupings. First by (txn, writer, process), with only numbers to keep: a hash
    # aggregation, which reduces the operations to about one row per transaction without sorting
    # them. Then by txn, sort-based (its earliest-event fields are structs of strings), over those
    # few rows. The earliest event of one writer's operations is the one of its lowest index
    # (validation refuses a writer whose clock goes back), so (least invoke_ns, least index) of a
    # writer's share is its least (invoke_ns, index) (docs/checks.md).
    shares = tx.groupBy("txn", "writer", "process").agg(
        F.min("invoke_ns").alias("_first_ns"), F.min("index").alias("_first_index"),
        _least(f == OpF.TXN_OPEN.value, "invoke_ns").alias("_open_ns"),
        _least(f == OpF.TXN_OPEN.value, "index").alias("_open_index"),
        _least(is_commit, "invoke_ns").alias("commit_invoke_ns"),
        _least(is_commit | is_abort, "invoke_ns").alias("end_invoke_ns"),
        _some(commit_ok).alias("_commit_ok"), _some(abort_ok | commit_fail).alias("_aborted"),
        _some(commit_ok | abort_ok).alias("_ended_ok"),
        _least(commit_ok, "complete_ns").alias("_commit_ns"), _least(abort_ok | commit_fail, "complete_ns").alias("_abort_ns"),
        _count(is_send & (typ == OpType.OK.value)).alias("sends_ok"),
        _count(is_send & (typ == OpType.INFO.value)).alias("sends_info"),
        _count(is_send & (typ == OpType.FAIL.value)).alias("sends_fail"),
        _count(F.col("_seen")).alias("sends_visible"),
        _count(F.col("_uncovered")).alias("sends_uncovered"),
        _count(F.col("_ok_missing")).alias("sends_ok_missing"),
        _count(F.col("_ok_uncovered")).alias("sends_ok_uncovered"),
        _count(f == OpF.ACK.value).alias("acks"),
        _some(F.col("_carries")).alias("ctp"),
        _count(open_ok).alias("opens_ok"),
        _least(open_ok, "invoke_ns").alias("ok_open_invoke_ns"),
        _least(open_ok, "complete_ns").alias("ok_open_complete_ns"),
    )
    total = ("sends_ok", "sends_info", "sends_fail", "sends_visible", "sends_uncovered", "sends_ok_missing",
             "sends_ok_uncovered", "acks", "opens_ok")
    earliest = ("commit_invoke_ns", "end_invoke_ns", "_commit_ns", "_abort_ns", "ok_open_invoke_ns",
                "ok_open_complete_ns")
    agg = shares.groupBy("txn").agg(
        F.min(F.struct(F.col("_first_ns").alias("invoke_ns"), "writer", F.col("_first_index").alias("index"),
                       "process")).alias("_first"),
        F.min(F.when(F.col("_open_ns").isNotNull(), F.struct(F.col("_open_ns").alias("invoke_ns"),
                                                             F.col("_open_index").alias("index")))).alias("_open"),
        *[F.min(name).alias(name) for name in earliest],
        *[(F.max(name) > 0).alias(name) for name in ("_commit_ok", "_aborted", "_ended_ok", "ctp")],
        *[F.sum(name).cast("long").alias(name) for name in total],
    )
    client = (F.when(F.col("_commit_ok"), F.lit(COMMITTED))
              .when(F.col("_aborted"), F.lit(ABORTED)).otherwise(F.lit(UNKNOWN)))
    seen = F.col("sends_visible") > 0
    if covered is not None:
        none_possible = ((F.col("sends_ok") + F.col("sends_info")) > 0) & (F.col("sends_uncovered") == 0)
    else:
        none_possible = F.lit(False)
    # Only the coordinator ends a transaction whose commit the client never invoked, and
    # only by abort: visibility decides only where a commit was asked for.
    never_committed = F.col("commit_invoke_ns").isNull()
    decided = (F.when(F.col("client_outcome") != UNKNOWN, F.col("client_outcome"))
               .when(never_committed, F.lit(ABORTED))
               .when(seen, F.lit(COMMITTED)).when(none_possible, F.lit(ABORTED)).otherwise(F.lit(UNKNOWN)))
    out = agg.withColumn("client_outcome", client).withColumn("outcome", decided)
    decided_by = (F.when(F.col("client_outcome") != UNKNOWN, F.lit("client"))
                  .when(never_committed, F.lit(NO_COMMIT))
                  .when(F.col("outcome") != UNKNOWN, F.lit("visibility")))
    label = (F.when(F.col("client_outcome") != UNKNOWN, F.col("client_outcome"))
             .when(F.col("outcome") == COMMITTED, F.lit(UNKNOWN_COMMITTED))
             .when(F.col("outcome") == ABORTED, F.lit(UNKNOWN_ABORTED)).otherwise(F.lit(UNKNOWN)))
    end_ns = (F.when(F.col("client_outcome") == COMMITTED, F.col("_commit_ns"))
              .when(F.col("client_outcome") == ABORTED, F.col("_abort_ns")))
    return out.select(
        "txn", F.col("_first.writer").alias("writer"), F.col("_first.process").alias("process"),
        F.col("_open.index").alias("open_index"), F.col("_open.invoke_ns").alias("open_ns"),
        "commit_invoke_ns", "end_invoke_ns", end_ns.alias("end_ns"), "client_outcome", "outcome",
        decided_by.alias("decided_by"), label.alias("outcome_label"), "sends_ok", "sends_info",
        "sends_fail", "sends_visible", "sends_uncovered", "sends_ok_missing", "sends_ok_uncovered", "acks", "ctp",
        "opens_ok", "ok_open_invoke_ns", "ok_open_complete_ns", F.col("_ended_ok").alias("ended_ok"),
    )
