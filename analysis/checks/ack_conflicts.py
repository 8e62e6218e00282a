"""The ack-conflict check: double-ack.

Pulsar's ack-conflict rule lets one transaction, at most, take a message off a
subscription: a transactional ack of a message another transaction holds in its
pending acks, or of one already acknowledged, fails (TransactionConflictException).
So one message must never be acknowledged `ok` on one subscription by two
transactions that both committed; if it is, both believe they consumed it (a
consume-transform-produce pipeline then processed it twice).

Theory of operation. A *claim* is an `ok` ack in a transaction whose outcome is
committed (the client saw the commit, or the model decided it: unknown-committed)
or stayed unknown. Messages are named by (logical topic, subscription, message
id), never by value: one value at two message ids is two messages, and the same
message received again (a redelivery) is still one. An ack without a message id
falls back to its value.

* An individual ack claims its message.
* A cumulative ack at position P claims every message of its (topic, segment,
  subscription) at or before P, compared as (ledger, entry, batch index), that was
  not yet *settled* when the ack was invoked. A message is settled once a
  transaction that claimed it has committed: at its commit's `ok` completion, or,
  for a transaction decided committed by what is visible, at its commit's
  invocation (the earliest it can have completed: the benefit of the doubt). So
  successive cumulative acks, each past the one before and each made after the one
  before committed, claim only what is new; two overlapping ones, or a cumulative
  ack over a message another transaction still held, claim it twice. The message a
  cumulative ack names is claimed even when settled before: the transaction acked it
  explicitly, and a broker must refuse an ack of an acknowledged message (Pulsar does
  for individual acks and for a cumulative ack at or before the mark-delete position). The messages
  a cumulative ack can claim are the ones the history knows on that subscription:
  those received there and those any ack named. A cumulative ack made while the
  commit that settled a message was in flight (invoked, not yet answered) may have
  come after it, and then it claims nothing there (a commit moves the cursor; an ack
  over acknowledged messages changes nothing): its claim of that message is
  `ambiguous`, counted as of unknown outcome, never as the second of a double-ack.

A message claimed by two or more committed transactions is a double-ack. One
claimed by a single committed transaction and by one or more of unknown outcome
(or by several of unknown outcome) may be one: it is counted as unjudged.
"""

from __future__ import annotations

import operator
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis.checks.base import PendingCheck, Plan, clean, ref
from analysis.checks.context import CheckContext, message_name, message_position
from analysis.model import COMMITTED, UNKNOWN, logical_topic, union_all
from analysis.spark import single_partition_mode
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType

_EXAMPLE_ACKS = 5
_KEY = ("_topic", "subscription", "_msg")
_PLACE = ("topic", "_seg", "subscription")


def _message_key(frame: DataFrame) -> DataFrame:
    """`frame` (with topic, msg_id, value) plus `_topic` (logical) and `_msg` (the message's name:
    its position as `ledger:entry:batch`, else its raw message id, else its value)."""
    name = F.coalesce(message_name(F.col("msg_id")), F.col("msg_id"), F.concat(F.lit("value "), F.col("value")))
    return frame.withColumn("_topic", logical_topic(F.col("topic"))).withColumn("_msg", name)


def _place(frame: DataFrame) -> DataFrame:
    return (frame.withColumn("_seg", F.coalesce(F.col("segment"), F.lit("")))
            .withColumn("_pos", message_position(F.col("msg_id"))))


def _settle_ns() -> Column:
    """When a committed claim settled its message(s); null for a transaction of unknown outcome."""
    return F.when(F.col("outcome") == COMMITTED, F.coalesce(F.col("end_ns"), F.col("commit_invoke_ns")))


def _settle_from_ns() -> Column:
    """The earliest a committed claim can have settled its message(s): its commit's invocation."""
    return F.when(F.col("outcome") == COMMITTED, F.coalesce(F.col("commit_invoke_ns"), F.col("end_ns")))


def _cumulative_claims(ctx: CheckContext, claims: DataFrame, individual: DataFrame) -> DataFrame:
    """The messages cumulative claims claim, one row per (claim, message), in `individual`'s columns."""
    cumulative = _place(claims.filter(F.col("cumulative")))
    # The settled horizon of each cumulative claim: the furthest position a committed cumulative
    # claim of the same (topic, segment, subscription) had settled before it was invoked.
    # (_kind 1: settled for certain at the commit's answer; 2: perhaps, from its invocation on.)
    def settles(kind: int, at: Column) -> DataFrame:
        return cumulative.filter(at.isNotNull()).select(
            *_PLACE, at.alias("_t"), F.lit(kind).alias("_kind"), "_pos",
            F.lit(None).cast(cumulative.schema["ack"].dataType).alias("ack"),
            F.lit(None).cast("string").alias("txn"), F.lit(None).cast("string").alias("outcome"),
            F.lit(None).cast("long").alias("invoke_ns"))
    made = cumulative.select(*_PLACE, F.col("invoke_ns").alias("_t"), F.lit(0).alias("_kind"), "_pos", "ack",
                             "txn", "outcome", "invoke_ns")
    w = (Window.partitionBy(*_PLACE).orderBy(F.col("_t"), F.col("_kind"))
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    horizon = F.max(F.when(F.col("_kind") == 1, F.col("_pos"))).over(w)
    maybe = F.max(F.when(F.col("_kind") == 2, F.col("_pos"))).over(w)
    made = (union_all([made, settles(1, F.col("settle_ns")), settles(2, _settle_from_ns())])
            .withColumn("_horizon", horizon).withColumn("_maybe", maybe)
            .filter((F.col("_kind") == 0) & F.col("_pos").isNotNull())
            .select(*_PLACE, F.col("_pos").alias("_upto"), "_horizon", "_maybe", "ack", "txn", "outcome",
                    "invoke_ns"))

    # The messages the history knows on each subscription: received there, or named by an ack.
    known = union_all([
        ctx.receives.select("value", "topic", "segment", "subscription", "msg_id"),
        ctx.acks.filter(F.col("subscription").isNotNull())
        .select("value", "topic", "segment", "subscription", "msg_id")])
    messages = (_place(known).filter(F.col("_pos").isNotNull())
                .groupBy(*_PLACE, "_pos").agg(F.min("value").alias("value"), F.min("msg_id").alias("msg_id")))
    named = F.col("_pos") == F.col("_upto")
    settled_before = F.col("_horizon").isNotNull() & (F.col("_pos") <= F.col("_horizon"))
    covered = (made.join(messages, list(_PLACE))
               .filter((F.col("_pos") <= F.col("_upto")) & (~settled_before | named))
               .withColumn("ambiguous", ~settled_before & F.col("_maybe").isNotNull()
                           & (F.col("_pos") <= F.col("_maybe")))
               .withColumn("named", named)
               .select("topic", "subscription", "msg_id", "value", "txn", "outcome", "invoke_ns", "ack", "ambiguous",
                       "named"))
    covered = _message_key(covered)
    # A message an individual claim settled before the cumulative ack was invoked is not claimed again.
    settled = (individual.filter(F.col("settle_ns").isNotNull()).groupBy(*_KEY)
               .agg(F.min("settle_ns").alias("_settled_ns")))
    slack = F.lit(ctx.clock_slack_ns)
    return (covered.join(settled, list(_KEY), "left")
            .filter(F.col("named") | F.col("_settled_ns").isNull()
                    | (F.col("_settled_ns") >= F.col("invoke_ns") + slack))
            .select(*_KEY, "topic", "msg_id", "value", "txn", "outcome", "invoke_ns", "ack", "ambiguous"))


def _claimed_twice(claims: DataFrame) -> DataFrame:
    """The claims of messages claimed twice or more: only those can be a double-ack or unjudged.

    On a large history the few such messages are found by a count (a hash aggregation), and
    only their claims are gathered into sets and lists, which Spark does by sorting, instead of
    every claim. A small history's claims are one partition, where the count would only be more
    plan. A key may hold a null (an ack of no known topic): matched null-safe, as the grouping
    groups it."""
    twice = (claims.groupBy(*_KEY).agg(F.count(F.lit(1)).alias("_claims"))
             .filter(F.col("_claims") >= 2).select(*[F.col(k).alias(f"_twice{k}") for k in _KEY]))
    same = reduce(operator.and_, [F.col(k).eqNullSafe(F.col(f"_twice{k}")) for k in _KEY])
    return claims.join(twice, same, "left_semi")


def _claims(ctx: CheckContext) -> DataFrame:
    """Every ok transactional ack on a subscription whose transaction committed or may have, with
    its `ack` reference and `settle_ns`."""
    claims = ctx.acks.filter((F.col("type") == OpType.OK.value) & F.col("txn").isNotNull()
                             & F.col("subscription").isNotNull() & F.col("outcome").isin(COMMITTED, UNKNOWN))
    return claims.withColumn("ack", ref(claims, f=OpF.ACK.value, time="invoke_ns")).withColumn(
        "settle_ns", _settle_ns())


def _individual_claims(ctx: CheckContext) -> DataFrame:
    return _message_key(_claims(ctx).filter(~F.col("cumulative"))).select(
        *_KEY, "topic", "msg_id", "value", "txn", "outcome", "invoke_ns", "ack", "settle_ns")


def cumulative_claims(ctx: CheckContext) -> DataFrame:
    """The messages transactional cumulative acks claim (the module docstring), one row per (claim,
    message): `_topic`, `subscription`, `_msg`, `topic`, `msg_id`, `value`, `txn`, `outcome`,
    `invoke_ns`, `ack`, `ambiguous` (the module docstring). Built for double-ack and ctp-loss each:
    kept as a shared frame, the plan that reads it again failed in Spark (`key not found: outcome`)."""
    return _cumulative_claims(ctx, _claims(ctx), _individual_claims(ctx))


def plan_double_ack(ctx: CheckContext) -> Plan:
    """One message acknowledged ok on one subscription by two transactions that both committed."""
    if ctx.count("acks") == 0:
        return clean(AnomalyClass.DOUBLE_ACK)
    parts = [_individual_claims(ctx).drop("settle_ns").withColumn("ambiguous", F.lit(False))]
    if ctx.count("cumulative_acks"):
        parts.append(cumulative_claims(ctx))
    every = union_all(parts)
    if not single_partition_mode():
        every = _claimed_twice(every)
    per_message = every.groupBy(*_KEY).agg(
        F.array_sort(F.collect_set(F.when((F.col("outcome") == COMMITTED) & ~F.col("ambiguous"),
                                          F.col("txn")))).alias("txns"),
        F.collect_set(F.when((F.col("outcome") == UNKNOWN) | F.col("ambiguous"), F.col("txn"))).alias("_unknown"),
        F.slice(F.array_sort(F.collect_list(F.struct(F.col("invoke_ns").alias("_t"), F.col("ack").alias("_op")))),
                1, _EXAMPLE_ACKS).alias("_acks"),
        F.min("topic").alias("topic"), F.min("msg_id").alias("msg_id"), F.min("value").alias("value"))
    committed, unknown = F.size("txns"), F.size("_unknown")
    found = per_message.filter(committed >= 2).select(
        "topic", "subscription", "msg_id", "value", "txns",
        F.transform("_acks", lambda a: a["_op"]).alias("acks"), F.col("_acks")[0]["_t"].alias("first_ns"))
    unjudged = per_message.filter((committed < 2) & (committed + unknown >= 2)).select(*_KEY)
    return PendingCheck(AnomalyClass.DOUBLE_ACK, found, ["first_ns", "topic", "subscription", "msg_id"],
                        max_examples=ctx.max_examples, unjudged=unjudged,
                        note="{n} message(s) acked ok in one committed transaction and in others of unknown "
                             "outcome (or only in transactions of unknown outcome): a double-ack if more than "
                             "one committed")
