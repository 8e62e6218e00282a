"""The abandoned-transaction check: unresolved-txn.

Theory of operation. Pulsar promises that a transaction its client never ends (the client
died, or was cut off from every broker) is aborted by its coordinator once its timeout
passes, that the acknowledgements it held are then released (the messages delivered
again), and that nothing it held keeps blocking other transactions (v4: the topic's
max read position; v5: the segment's read horizon). A transaction is *abandoned* when
its client did not end it: it was opened `ok` and no `txn-commit` or `txn-abort` of it
completed `ok` (the writer was killed, the commit ended `info`, it was never asked for,
or the commit or abort failed). A failed commit tells the client its transaction did
not commit, but ends nothing at the coordinator (on real 2.10.5 one failed while its
coordinator's broker was down, and the coordinator that loaded again never aborted it):
its timeout must still end it.

The drain waits until every such transaction is past its timeout plus
`checks.abort_bound_s` and then asks its coordinator (`txn-state` events: the status
the admin API's `transactionMetadata` gave, or on v5 the header in the metadata store,
`NOT_FOUND` once the coordinator forgot it, `UNKNOWN` when it could not answer). One
instance per abandoned transaction when:

* the coordinator still holds it unfinished (OPEN, TIME_OUT, COMMITTING, ABORTING) at a
  drain's latest reading taken at or after its deadline: the open's completion +
  `workload.txn_timeout_s` + `checks.abort_bound_s` (the coordinator started its clock
  before the open completed); its held read horizon then still blocks every later
  transaction on its topics. Each drain is judged on its own latest reading (the drain asks
  an unfinished one again for the bound): a live drain's (writer `drain-live`, before a cold
  restart) that is unfinished is an anomaly even when the coordinator the restart loaded
  again finished the transaction (a restart is not how a coordinator is meant to end one);
* the coordinator says COMMITTED although its client never invoked the commit (only an
  abort may end such a transaction);
* one of its acks is stuck: decided aborted, on a subscription the drain emptied, and
  never delivered again nor settled otherwise (stuck-ack's rule, restricted to abandoned
  transactions: what it held was not released).

An abandoned transaction with no drain's latest reading taken after its deadline other
than `UNKNOWN` is unjudged. A history without any `txn-state` event (written before
the drain recorded them, or by a target whose admin API has no transaction endpoints)
has nothing to judge: clean.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.checks.acks import stuck_acks
from analysis.checks.base import PendingCheck, Plan, clean, ref
from analysis.checks.context import CheckContext
from analysis.model import ABORTED, UNKNOWN, one_partition, union_all
from harness.anomalies import AnomalyClass
from harness.history.schema import LIVE_DRAIN_WRITER, UNFINISHED_TXN_STATES, OpF, OpType

NOT_JUDGED = ("UNKNOWN",)


def abandoned_transactions(ctx: CheckContext) -> DataFrame:
    """txn, writer, process, open_ns (the open's completion), commit_invoke_ns, outcome, deadline_ns.

    The opens come from the transactions' one grouping (`opens_ok`, `ok_open_complete_ns`:
    analysis.model.transaction_outcomes), not from another scan of every operation."""
    limit = F.lit(ctx.txn_timeout_ns + ctx.abort_bound_ns).cast("long")
    return one_partition(
        ctx.txns.filter(~F.col("ended_ok") & (F.col("opens_ok") > 0))
        .select("txn", "writer", "process", F.col("ok_open_complete_ns").alias("open_ns"), "commit_invoke_ns",
                "outcome", (F.col("ok_open_complete_ns") + limit).alias("deadline_ns")))


def plan_unresolved_txn(ctx: CheckContext) -> Plan:
    """An abandoned transaction not aborted within its timeout plus the bound, or whose acks stayed held."""
    if ctx.txn_states is None:
        return clean(AnomalyClass.UNRESOLVED_TXN)
    abandoned = abandoned_transactions(ctx)
    # each drain's latest reading: the live drain's (before a cold restart) and the final one's
    latest = (ctx.txn_states.groupBy("txn", "writer")
              .agg(F.max(F.struct("time_ns", "writer", "index", "process", "status", "error")).alias("_s")))
    read = abandoned.join(latest.drop("writer"), "txn", "left").select(
        "*", *[F.col(f"_s.{c}").alias(f"r_{c}") for c in ("time_ns", "writer", "index", "process", "status")])
    status, asked = F.col("r_status"), F.col("r_time_ns")
    after_deadline = asked >= F.col("deadline_ns")
    at_live_read = F.when(F.col("r_writer") == LIVE_DRAIN_WRITER, F.lit(" at the live read")).otherwise(F.lit(""))
    why = (F.when(after_deadline & status.isin(*UNFINISHED_TXN_STATES),
                  F.concat(F.lit("the coordinator still had it "), status, at_live_read, F.lit(" "),
                           F.format_number((asked - F.col("deadline_ns")) / 1e9 + ctx.abort_bound_ns / 1e9, 1),
                           F.lit(" s after its timeout")))
           .when((status == "COMMITTED") & F.col("commit_invoke_ns").isNull(),
                 F.lit("the coordinator committed it although its client never asked to commit")))
    by_state = read.withColumn("_why", why).filter(F.col("_why").isNotNull())
    by_state = by_state.select(
        "txn", "writer", "process", F.col("_why").alias("why"), status.alias("status"),
        ((asked - F.col("open_ns")) / 1e9).alias("seconds_open"),
        ref(by_state, "r_", f=OpF.TXN_STATE.value, time="r_time_ns", type=F.lit(OpType.OK.value),
            txn="txn").alias("reading"))
    judged = status.isNotNull() & ~status.isin(*NOT_JUDGED) & after_deadline
    unjudged = read.groupBy("txn").agg(F.max(judged.cast("int")).alias("_judged")) \
        .filter(F.coalesce(F.col("_judged"), F.lit(0)) == 0).select("txn")

    parts = [by_state]
    if ctx.count("acks") and ctx.drain.complete:
        stuck, _ = stuck_acks(ctx)
        held = (stuck.filter(F.col("client_outcome") == UNKNOWN)
                .join(abandoned.filter(F.col("outcome") == ABORTED).select("txn", "writer", "process"), "txn")
                .groupBy("txn", "writer", "process")
                .agg(F.count(F.lit(1)).alias("_held"), F.min(F.struct(F.col("ack.time_ns").alias("t"),
                                                                      F.col("ack").alias("a"))).alias("_first")))
        parts.append(held.select(
            "txn", "writer", "process",
            F.concat(F.format_number(F.col("_held"), 0),
                     F.lit(" ack(s) it held were never released (not delivered again after its abort)")).alias("why"),
            F.lit(ABORTED).alias("status"), F.lit(None).cast("double").alias("seconds_open"),
            F.col("_first.a").alias("reading")))
    found = union_all(parts).groupBy("txn", "writer", "process").agg(
        F.concat_ws("; ", F.collect_list("why")).alias("why"), F.first("status").alias("status"),
        F.max("seconds_open").alias("seconds_open"), F.min("reading").alias("observed"))
    return PendingCheck(AnomalyClass.UNRESOLVED_TXN, found, ["observed.time_ns", "txn"],
                        max_examples=ctx.max_examples, unjudged=unjudged,
                        note="{n} abandoned transaction(s) whose coordinator gave no reading after their "
                             "timeout plus checks.abort_bound_s")


__all__ = ["abandoned_transactions", "plan_unresolved_txn"]
