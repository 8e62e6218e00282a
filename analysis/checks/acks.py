"""Checks of transactional acknowledgements: lost-ack, stuck-ack.

An ack names a message by `value` (and `msg_id`) on a `subscription`. An
individual ack covers that message; a cumulative ack (`extra.cumulative`)
covers every message of the same (topic, segment, subscription) at or before
its message id, compared as (ledger, entry, batch index).

lost-ack: after a transaction that acked a message committed, the message must
never be delivered to that subscription again. "Delivered" is when the broker's
frame reached the client (`extra.delivered_ns`; the receive's own time when the
history lacks it): a copy dispatched before the commit may wait in the receiver
queue and be taken by the application after it, which Pulsar allows. The commit's
moment is its ok completion; for a transaction decided committed by visibility it is unknown,
so only deliveries after the `drain` phase began are counted (and without a
`drain` phase those acks are unjudged). Non-transactional acks are not
checked: Pulsar does not promise them to be durable.

stuck-ack: after a transaction that acked a message aborted, the message must
be deliverable again. It is stuck when the drain consumed that (topic,
subscription) until empty and yet no delivery of it to that subscription came
after the ack was invoked, and no committed (or non-transactional) ack, nor a
committed cumulative ack at or past it, settled it some other way. The delivery
is looked for after the ack, not after the abort: a transaction the broker timed
out is aborted, and its messages delivered again, before the client's late
commit fails.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis.checks.base import NO_DRAIN_REASON, PendingCheck, Plan, clean, ref, skipped
from analysis.checks.context import CheckContext, message_position
from analysis.model import ABORTED, COMMITTED, UNKNOWN, union_all
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType


def _place(segment: Column) -> Column:
    return F.coalesce(segment, F.lit(""))


def _earliest_cover(targets: DataFrame, covers: DataFrame) -> DataFrame:
    """For each target row, the cover with the smallest `ref_ns` at or past its position.

    Both frames have `topic`, `_seg`, `subscription`, `_pos` (message_position);
    covers also have `ref_ns` and `cover` (a struct). Returns the targets with
    `_cover` = struct(ref_ns, cover) or null. One window over the union, sorted by
    position descending, so each target sees every cover at or past it.
    """
    cover_type = covers.schema["cover"].dataType
    target_cols = [c for c in targets.columns if c not in ("topic", "_seg", "subscription", "_pos")]
    t = targets.select("topic", "_seg", "subscription", "_pos", F.lit(1).alias("_kind"),
                       F.lit(None).cast("long").alias("ref_ns"), F.lit(None).cast(cover_type).alias("cover"),
                       F.struct(*target_cols).alias("_target"))
    c = covers.select("topic", "_seg", "subscription", "_pos", F.lit(0).alias("_kind"), "ref_ns", "cover",
                      F.lit(None).cast(t.schema["_target"].dataType).alias("_target"))
    w = (Window.partitionBy("topic", "_seg", "subscription")
         .orderBy(F.col("_pos").desc(), F.col("_kind").asc())
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    best = F.min(F.when(F.col("_kind") == 0, F.struct("ref_ns", "cover"))).over(w)
    out = union_all([t, c]).filter(F.col("_pos").isNotNull()).withColumn("_cover", best)
    return out.filter(F.col("_kind") == 1).select("topic", "_seg", "subscription", "_pos", "_target.*", "_cover")


def plan_lost_ack(ctx: CheckContext) -> Plan:
    """A message acked in a committed transaction was delivered to that subscription again afterwards."""
    if ctx.count("acks") == 0:
        return clean(AnomalyClass.LOST_ACK)
    committed = ctx.acks.filter(
        (F.col("type") == OpType.OK.value) & F.col("txn").isNotNull() & (F.col("outcome") == COMMITTED)
        & F.col("subscription").isNotNull())
    drain_ns = F.lit(ctx.drain_phase_ns).cast("long")
    since = F.when(F.col("client_outcome") == COMMITTED, F.col("end_ns")).otherwise(drain_ns)
    committed = committed.withColumn("ref_ns", since)
    # An ack in a transaction whose outcome stayed unknown (its commit's outcome is unknown and
    # no value of it is visible to decide it) cannot be judged by either ack check.
    undecided = ctx.acks.filter(F.col("txn").isNotNull() & (F.col("outcome") == UNKNOWN)
                                & F.col("type").isin(OpType.OK.value, OpType.INFO.value))
    unjudged = union_all([committed.filter(F.col("ref_ns").isNull()).select("writer", "index"),
                          undecided.select("writer", "index")])
    judged = committed.filter(F.col("ref_ns").isNotNull())
    judged = judged.withColumn("ack", ref(judged, f=OpF.ACK.value, time="invoke_ns"))

    recv = ctx.receives.withColumn("receive", ref(ctx.receives, f=OpF.RECEIVE.value))
    recv = recv.select("value", "topic", "segment", "subscription", "msg_id", "time_ns", "delivered_ns",
                       "receive")
    individual = (judged.select("value", "subscription", "txn", "ack", "ref_ns")
                  .join(recv.select("value", "subscription", "delivered_ns", "receive"), ["value", "subscription"])
                  .filter(ctx.later(F.col("delivered_ns"), F.col("ref_ns")))
                  .select("value", "subscription", "txn", "ack", F.col("ref_ns").alias("committed_ns"),
                          "receive"))

    hits = individual
    if ctx.count("cumulative_acks"):
        covers = judged.filter(F.col("cumulative")).select(
            "topic", _place(F.col("segment")).alias("_seg"), "subscription",
            message_position(F.col("msg_id")).alias("_pos"), "ref_ns",
            F.struct("txn", "ack").alias("cover"))
        targets = recv.select("topic", _place(F.col("segment")).alias("_seg"), "subscription",
                              message_position(F.col("msg_id")).alias("_pos"), "value", "delivered_ns",
                              "receive")
        covered = _earliest_cover(targets, covers).filter(
            F.col("_cover").isNotNull() & ctx.later(F.col("delivered_ns"), F.col("_cover.ref_ns")))
        cumulative = covered.select("value", "subscription", F.col("_cover.cover.txn").alias("txn"),
                                    F.col("_cover.cover.ack").alias("ack"),
                                    F.col("_cover.ref_ns").alias("committed_ns"), "receive")
        hits = union_all([individual, cumulative])
    per_message = hits.groupBy("value", "subscription").agg(
        F.min_by(F.struct("txn", "ack", "committed_ns"), F.col("receive.time_ns")).alias("_acked"),
        F.min_by("receive", F.col("receive.time_ns")).alias("redelivery"),
        F.count(F.lit(1)).alias("redeliveries"))
    out = per_message.select("value", "subscription", "_acked.txn", "_acked.ack", "_acked.committed_ns",
                             "redelivery", "redeliveries")
    return PendingCheck(AnomalyClass.LOST_ACK, out, ["redelivery.time_ns", "value"], max_examples=ctx.max_examples,
                     unjudged=unjudged,
                     note="{n} ack(s) not judged: in transactions of unknown outcome (nothing visible "
                          "decides them), or decided committed by visibility with no drain phase to time "
                          "them against")


def _covered_by_aborted_cumulative(ctx: CheckContext, judged: DataFrame, settled: DataFrame,
                                   unsettled: Callable[[DataFrame, list[str]], DataFrame]) -> DataFrame:
    """Messages an aborted cumulative ack covered that never came back: stuck, one row per message.

    An aborted cumulative ack gives back every message of its (topic, segment,
    subscription) at or before its position. Each message delivered to that
    subscription is judged against the latest aborted cumulative ack at or past
    it: delivered before that ack and never after it is stuck, unless something
    else settled it. The ack's own message is judged as an individual ack.
    """
    cumulative = judged.filter(F.col("cumulative"))
    # The latest cover wins: ref_ns is the negated invocation time, and _earliest_cover takes the least.
    covers = cumulative.select(
        "topic", _place(F.col("segment")).alias("_seg"), "subscription",
        message_position(F.col("msg_id")).alias("_pos"), (-F.col("invoke_ns")).alias("ref_ns"),
        F.struct("txn", "client_outcome", "invoke_ns",
                 ref(cumulative, f=OpF.ACK.value, time="invoke_ns").alias("ack")).alias("cover"))
    delivered = (ctx.receives.groupBy("value", "topic", "segment", "subscription", "msg_id")
                 .agg(F.max("time_ns").alias("_last")))
    targets = delivered.select("topic", _place(F.col("segment")).alias("_seg"), "subscription",
                               message_position(F.col("msg_id")).alias("_pos"), "value", "segment", "msg_id",
                               "_last")
    own = judged.select("value", "subscription")
    stuck = (_earliest_cover(targets, covers)
             .filter(F.col("_cover").isNotNull() & (F.col("_last") < F.col("_cover.cover.invoke_ns")))
             .join(own, ["value", "subscription"], "left_anti")
             .join(settled, ["value", "subscription"], "left_anti"))
    stuck = unsettled(stuck.select("value", "topic", "segment", "subscription", "msg_id", "_cover"),
                      ["value", "subscription"])
    return stuck.select("value", "topic", "subscription", F.col("_cover.cover.txn").alias("txn"),
                        F.col("_cover.cover.client_outcome").alias("client_outcome"),
                        F.col("_cover.cover.ack").alias("ack"))


def plan_stuck_ack(ctx: CheckContext) -> Plan:
    """A message acked in an aborted transaction was not delivered again although the drain emptied it."""
    if not ctx.drain.complete:
        return skipped(AnomalyClass.STUCK_ACK, NO_DRAIN_REASON)
    if ctx.count("acks") == 0:
        return clean(AnomalyClass.STUCK_ACK)
    stuck, unjudged = stuck_acks(ctx)
    return PendingCheck(AnomalyClass.STUCK_ACK, stuck, ["ack.time_ns", "value"], max_examples=ctx.max_examples,
                     unjudged=unjudged,
                     note="{n} ack(s) in aborted transactions on subscriptions the drain did not "
                          "consume until empty")


def stuck_acks(ctx: CheckContext) -> tuple[DataFrame, DataFrame]:
    """(stuck, unjudged): acks of aborted transactions never released, as stuck-ack defines them
    (value, topic, subscription, txn, client_outcome, ack), and those on subscriptions the drain
    did not empty. unresolved-txn reads the same stuck acks for its abandoned transactions: they
    are computed once per context and kept with the shared frames (`CheckContext.shared`)."""
    aborted = ctx.acks.filter(F.col("txn").isNotNull() & (F.col("outcome") == ABORTED)
                              & F.col("subscription").isNotNull())
    drained = ctx.drained(F.col("topic"), F.col("subscription"))
    stuck = ctx.shared("stuck-acks", lambda: _stuck(ctx, aborted.filter(drained)))
    return stuck, aborted.filter(~drained)


def _stuck(ctx: CheckContext, judged: DataFrame) -> DataFrame:
    """The acks of `judged` (aborted, on drained subscriptions) never released: `stuck_acks`."""
    settling = ctx.acks.filter((F.col("type") == OpType.OK.value)
                               & (F.col("txn").isNull() | (F.col("outcome") == COMMITTED)))
    settled = settling.select("value", "subscription").distinct()
    # Delivered again after the ack was invoked: one anti join (an inner join and a distinct before
    # gave the same rows, and a shuffle on small histories).
    again = ctx.receives.select(F.col("value").alias("_rv"), F.col("subscription").alias("_rs"),
                                F.col("time_ns").alias("_rt"))
    candidates = (judged.join(settled, ["value", "subscription"], "left_anti")
                  .join(again, (F.col("value") == F.col("_rv")) & (F.col("subscription") == F.col("_rs"))
                        & (F.col("_rt") > F.col("invoke_ns")), "left_anti"))

    covered_stuck: DataFrame | None = None
    if ctx.count("cumulative_acks"):
        settle_covers = settling.filter(F.col("cumulative")).select(
            "topic", _place(F.col("segment")).alias("_seg"), "subscription",
            message_position(F.col("msg_id")).alias("_pos"), F.lit(0).cast("long").alias("ref_ns"),
            F.struct("txn", "writer", "index").alias("cover"))

        def unsettled(frame: DataFrame, keys: list[str]) -> DataFrame:
            """`frame` without the rows a committed cumulative ack at or past them settled."""
            positioned = frame.select("topic", _place(F.col("segment")).alias("_seg"), "subscription",
                                      message_position(F.col("msg_id")).alias("_pos"), *keys)
            settled_by_cumulative = (_earliest_cover(positioned, settle_covers)
                                     .filter(F.col("_cover").isNotNull()).select(*keys))
            return frame.join(settled_by_cumulative, keys, "left_anti")

        candidates = unsettled(candidates, ["writer", "index"])
        covered_stuck = _covered_by_aborted_cumulative(ctx, judged, settled, unsettled)
    stuck = candidates.select(
        "value", "topic", "subscription", "txn", "client_outcome",
        ref(candidates, f=OpF.ACK.value, time="invoke_ns").alias("ack"))
    if covered_stuck is not None:
        stuck = union_all([stuck, covered_stuck])
    return stuck
