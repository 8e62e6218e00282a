"""Completeness per subscription: undelivered.

Theory of operation. Final reads prove what is *in* a topic; this check proves
that each durable subscription *delivered* it. The load records, for every
durable subscription, a `phase` event named `subscription-start` (topic and
subscription set) once the subscription exists: every value whose send was
invoked after that event was published after the subscription's start
position. The drain lists in `drain-complete.subscriptions` the (topic,
subscription) pairs it consumed until empty.

A value is `undelivered` on a subscription when:

* its send's outcome is committed (analysis.model.transaction_outcomes) and it is
  visible in the final reads of its topic (a committed value missing from the
  reads is a `lost-write` already; judging it here would count it twice);
* its send was invoked after the subscription's `subscription-start`, on the same
  logical topic (v4 partitions and v5 segments, including children of splits
  and merges, all belong to their logical topic: a child that does not deliver
  what follows its parent's end leaves values undelivered here);
* the drain consumed that subscription until empty;
* and no `receive` of it on that subscription, and no `ack` of it naming that
  subscription, is in the history, from any writer (load or drain).

Cumulative acks do not excuse a value: a cumulative ack covers what its consumer
received before, and a message a subscription skipped and then covered with a
later cumulative ack is exactly the loss this check is for.

Subscriptions with a start but not in `drain-complete` leave their values
unjudged (the verdict is then unknown). A history with no `subscription-start`
events (written before the load recorded them) has nothing this check can look
at: it is clean, like any check on a history without what it judges.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.checks.base import NO_DRAIN_REASON, PendingCheck, Plan, clean, ref, skipped
from analysis.checks.context import CheckContext
from analysis.model import COMMITTED, logical_topic, one_partition, union_all
from analysis.spark import single_partition_mode
from harness.anomalies import AnomalyClass
from harness.history.schema import PHASE_SUBSCRIPTION_START, OpF


def subscription_starts(ctx: CheckContext) -> DataFrame | None:
    """One row per (logical topic, subscription): `_topic`, `subscription`, `start_ns` (the
    latest start recorded for it), or None when the history records no start.

    The starts are a few `phase` events the overview already holds (`ctx.overview.phases`,
    gathered in the pass that read the history), so they become a frame of literals here, not
    a scan of every operation for them. It is one partition, so in small-input mode the join
    with the sends needs no shuffle; the logical topic is Spark's `logical_topic`, as before."""
    marks = [m for m in ctx.overview.phases
             if m.name == PHASE_SUBSCRIPTION_START and m.topic is not None and m.subscription is not None]
    if not any(m.name == PHASE_SUBSCRIPTION_START for m in ctx.overview.phases):
        return None
    rows = [F.struct(F.lit(m.topic).cast("string").alias("topic"),
                     F.lit(m.subscription).cast("string").alias("subscription"),
                     F.lit(m.time_ns).cast("long").alias("invoke_ns")) for m in marks]
    schema = "array<struct<topic:string,subscription:string,invoke_ns:bigint>>"
    events = ctx.pairs.sparkSession.range(0, 1, 1, 1).select(
        F.inline(F.array(*rows) if rows else F.array().cast(schema)))
    return (events.groupBy(logical_topic(F.col("topic")).alias("_topic"), "subscription")
            .agg(F.max("invoke_ns").alias("start_ns")))


def plan_undelivered(ctx: CheckContext) -> Plan:
    """A committed, visible value published after a subscription's start was never delivered to it."""
    if not ctx.drain.complete:
        return skipped(AnomalyClass.UNDELIVERED, NO_DRAIN_REASON)
    starts = subscription_starts(ctx)
    if starts is None or ctx.count("sends") == 0:
        return clean(AnomalyClass.UNDELIVERED)
    committed = ctx.sends.filter((F.col("outcome") == COMMITTED) & F.col("visible")).select(
        "value", "writer", "index", "process", "type", "txn", "topic", "segment", "msg_id", "invoke_ns",
        logical_topic(F.col("topic")).alias("_topic"))
    # A few rows: broadcast them, except in small-input mode, where a broadcast is a job of
    # its own and a join of one-partition frames needs no shuffle anyway.
    owed = one_partition(committed.join(starts if single_partition_mode() else F.broadcast(starts), "_topic")
                         .filter(ctx.later(F.col("invoke_ns"), F.col("start_ns"))))
    drained = ctx.drained(F.col("_topic"), F.col("subscription"))
    unjudged = owed.filter(~drained)
    judged = owed.filter(drained)
    delivered = union_all([
        ctx.receives.select("value", "subscription"),
        ctx.acks.select("value", "subscription"),      # any ack: its consumer held the message
    ]).filter(F.col("value").isNotNull() & F.col("subscription").isNotNull()).distinct()
    missing = judged.join(delivered, ["value", "subscription"], "left_anti")
    out = missing.select(
        "value", F.col("_topic").alias("topic"), "subscription", "txn", "start_ns",
        ref(missing, f=OpF.SEND.value, time="invoke_ns").alias("send"))
    return PendingCheck(AnomalyClass.UNDELIVERED, out, ["send.time_ns", "value", "subscription"],
                        max_examples=ctx.max_examples, unjudged=unjudged,
                        note="{n} committed value(s) owed to subscriptions the drain did not consume "
                             "until empty")
