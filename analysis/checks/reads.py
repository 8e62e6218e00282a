"""Checks on what consumers and the drainer saw: aborted-read, dirty-read, unexpected.

These need no `drain-complete`: a consumer's `receive` is evidence on its own.
Final `read`s count as observations too when present. Values of transactions
whose outcome is still unknown (no drain to decide them) are not judged.
Receives are judged through `observations` (each receive joined with its
value's send), final reads through `sends.visible` and `visible` (one row per
value), so the large read set is never joined again.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.checks.base import PendingCheck, Plan, clean, first_reads, ref
from analysis.checks.context import CheckContext
from analysis.model import ABORTED, COORDINATOR, NO_COMMIT, union_all
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType


def _observed(frame: DataFrame) -> F.Column:
    return ref(frame, "o_", f=F.col("kind"), type=F.lit(OpType.OK.value), value="value", txn=None)


def _send(frame: DataFrame, prefix: str) -> F.Column:
    if prefix:
        return ref(frame, prefix, f=OpF.SEND.value, time=f"{prefix}invoke_ns", value="value", txn="txn",
                   subscription=None)
    return ref(frame, f=OpF.SEND.value, time="invoke_ns", subscription=None)


def _read_placeholder(frame: DataFrame) -> F.Column:
    """A final read named by its value and time; `_with_first_reads` fills in the rest."""
    return ref(frame, f=OpF.READ.value, time="read_ns", writer=None, index=None, process=None, type=None,
               txn=None, subscription=None, msg_id=None, segment=None)


def _with_first_reads(ctx: CheckContext, key: str) -> Any:
    def finish(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        values = [e["value"] for e in examples if e.get(key, {}).get("f") == OpF.READ.value and "value" in e]
        found = first_reads(ctx.reads, values)
        for e in examples:
            if e.get("value") in found and e.get(key, {}).get("f") == OpF.READ.value:
                e[key] = found[e["value"]]
        return examples
    return finish


_NEVER_COMMITTED = "txn-commit never invoked: only the coordinator's abort can have ended the transaction"
_BY_COORDINATOR = "transaction aborted (its coordinator's record, which the drain read, says ABORTED)"


def _no_commit() -> F.Column:
    """The value's transaction was decided aborted because its commit was never invoked."""
    return F.coalesce(F.col("decided_by") == NO_COMMIT, F.lit(False))


def plan_aborted_read(ctx: CheckContext) -> Plan:
    """A value was received or read although its send cannot have taken effect.

    That is: its transaction's outcome is aborted (the client saw the abort or a
    definite commit failure, or nothing of it is visible in the final reads), or
    the send itself failed definitively (`fail`), as Jepsen's G1a.
    """
    if ctx.count("receives") + ctx.count("reads") == 0:
        return clean(AnomalyClass.ABORTED_READ)
    obs = ctx.observations
    # A receive of a transaction whose commit was never invoked is a dirty read (it came
    # before any commit); only its final reads are aborted reads.
    received = obs.filter(F.col("sent") & (((F.col("outcome") == ABORTED) & ~_no_commit())
                                           | (F.col("s_type") == OpType.FAIL.value)))
    why_received = (F.when(F.col("s_type") == OpType.FAIL.value, F.lit("send failed definitively"))
                    .when(F.col("decided_by") == "visibility", F.lit("transaction aborted (nothing of it is visible)"))
                    .when(F.col("decided_by") == COORDINATOR, F.lit(_BY_COORDINATOR))
                    .otherwise(F.lit("transaction aborted")))
    by_receive = received.select("value", "txn", why_received.alias("why"), _send(obs, "s_").alias("send"),
                                 _observed(obs).alias("observed"), F.lit(1).alias("_n"))
    # Final reads, live (before the cold restart) or cold: an aborted value the live system
    # shows is as wrong as one it shows after the restart. The first read of either names it.
    sends = ctx.sends.withColumn("read_ns", F.least(F.col("read_ns"), F.col("live_read_ns")))
    seen_read = F.col("visible") | F.col("live_visible")
    read = sends.filter(seen_read & ((F.col("outcome") == ABORTED) | (F.col("type") == OpType.FAIL.value)))
    why_read = (F.when(F.col("type") == OpType.FAIL.value, F.lit("send failed definitively"))
                .when(_no_commit(), F.lit(_NEVER_COMMITTED))
                .when(F.col("decided_by") == COORDINATOR, F.lit(_BY_COORDINATOR)).otherwise(F.lit("transaction aborted")))
    by_read = read.select("value", "txn", why_read.alias("why"), _send(sends, "").alias("send"),
                          _read_placeholder(sends).alias("observed"), F.lit(1).alias("_n"))
    hits = union_all([by_receive, by_read])
    per_value = hits.groupBy("value").agg(
        F.first("txn").alias("txn"), F.first("why").alias("why"), F.first("send").alias("send"),
        F.min_by("observed", F.col("observed.time_ns")).alias("observed"),
        F.sum("_n").alias("observations"))
    return PendingCheck(AnomalyClass.ABORTED_READ, per_value, ["observed.time_ns", "value"],
                        max_examples=ctx.max_examples, finish=_with_first_reads(ctx, "observed"))


def plan_dirty_read(ctx: CheckContext) -> Plan:
    """A value of a not-aborted transaction was received before its commit was invoked.

    Values of aborted transactions are aborted reads instead, except where the
    transaction is aborted only because its commit was never invoked: every
    delivery of its values came before any commit. A delivery's moment is the
    earliest evidence of it: when the frame reached the client
    (`extra.delivered_ns`), else the receive.
    """
    if ctx.count("receives") == 0:
        return clean(AnomalyClass.DIRTY_READ)
    obs = ctx.observations
    # The earliest evidence decides: the frame reached the client (o_delivered_ns) even if the
    # application took it from the receiver queue after the commit was invoked.
    hits = obs.filter(
        F.col("sent") & F.col("txn").isNotNull()
        & ((F.col("outcome") != ABORTED) | _no_commit()) & (F.col("s_type") != OpType.FAIL.value)
        & (F.col("commit_invoke_ns").isNull() | ctx.later(F.col("commit_invoke_ns"), F.col("o_delivered_ns"))))
    per_value = hits.groupBy("value").agg(
        F.first("txn").alias("txn"), F.first(_send(obs, "s_")).alias("send"),
        F.min_by(_observed(obs), F.col("o_delivered_ns")).alias("receive"),
        F.min("o_delivered_ns").alias("delivered_ns"),
        F.first("commit_invoke_ns").alias("commit_invoke_ns"),
        F.count(F.lit(1)).alias("early_receives"))
    early_ms = (F.col("commit_invoke_ns") - F.col("delivered_ns")) / 1e6
    out = per_value.select("value", "txn", "send", "receive", "delivered_ns", "commit_invoke_ns",
                           early_ms.alias("ms_before_commit"), "early_receives")
    return PendingCheck(AnomalyClass.DIRTY_READ, out, ["receive.time_ns", "value"], max_examples=ctx.max_examples)


def plan_unexpected(ctx: CheckContext) -> Plan:
    """A value was received or read that no send invoked (or a message carrying no value)."""
    if ctx.count("receives") + ctx.count("reads") == 0:
        return clean(AnomalyClass.UNEXPECTED)
    obs = ctx.observations
    key = F.coalesce(F.col("value"), F.concat(F.lit("\u0000"), F.col("o_writer"), F.lit(":"),
                                              F.col("o_index").cast("string")))
    received = obs.filter(~F.col("sent")).select(key.alias("_key"), "value", _observed(obs).alias("observed"),
                                                 F.lit(1).alias("_n"))
    unsent = ctx.visible.join(ctx.sends.select("value"), "value", "left_anti")
    read = unsent.select(F.col("value").alias("_key"), "value", _read_placeholder(unsent).alias("observed"),
                         F.col("reads").alias("_n"))
    # Reads of no value at all (a message without the harness's payload), one case each.
    valueless = ctx.reads.filter(F.col("value").isNull())
    no_value = valueless.select(
        F.concat(F.lit("\u0000"), F.col("writer"), F.lit(":"), F.col("index").cast("string")).alias("_key"),
        "value", ref(valueless, f=OpF.READ.value, type=F.lit(OpType.OK.value), txn=None,
                     subscription=None).alias("observed"), F.lit(1).alias("_n"))
    hits = union_all([received, read, no_value])
    per_value = hits.groupBy("_key").agg(
        F.first("value").alias("value"),
        F.min_by("observed", F.col("observed.time_ns")).alias("observed"),
        F.sum("_n").alias("observations"))
    return PendingCheck(AnomalyClass.UNEXPECTED, per_value.drop("_key"), ["observed.time_ns", "value"],
                        max_examples=ctx.max_examples, finish=_with_first_reads(ctx, "observed"))
