"""undelivered in SQL (analysis.checks.delivery: the rules and their why)."""

from __future__ import annotations

from analysis.checks.base import NO_DRAIN_REASON, clean, skipped
from analysis.duck.checks.registry import PlanCheck
from analysis.duck.evaluate import Plan, SqlCheck
from analysis.duck.frames import DuckContext
from analysis.duck.sql import literal, logical_topic, ref
from analysis.model import COMMITTED
from harness.anomalies import AnomalyClass
from harness.history.schema import PHASE_SUBSCRIPTION_START, OpF

# The columns of the owed sends (`owed` in plan_undelivered), which the send's reference is made of: its
# `subscription` is the one owed, as in the Spark check's reference.
_OWED_COLUMNS = ["value", "writer", "index", "process", "type", "txn", "topic", "segment", "msg_id", "invoke_ns",
                 "_topic", "subscription", "start_ns"]


def subscription_starts(ctx: DuckContext) -> str | None:
    """analysis.checks.delivery.subscription_starts in SQL: `_topic`, `subscription`, `start_ns`
    per (logical topic, subscription), from the overview's phases; None without any start."""
    if not any(m.name == PHASE_SUBSCRIPTION_START for m in ctx.overview.phases):
        return None
    marks = [m for m in ctx.overview.phases
             if m.name == PHASE_SUBSCRIPTION_START and m.topic is not None and m.subscription is not None]
    if marks:
        rows = ", ".join(f"({literal(m.topic)}::VARCHAR, {literal(m.subscription)}::VARCHAR, "
                         f"{literal(m.time_ns)}::BIGINT)" for m in marks)
        events = f"SELECT * FROM (VALUES {rows}) AS e(topic, subscription, invoke_ns)"
    else:
        events = "SELECT NULL::VARCHAR AS topic, NULL::VARCHAR AS subscription, NULL::BIGINT AS invoke_ns WHERE false"
    return f"""SELECT {logical_topic('topic')} AS _topic, subscription, max(invoke_ns) AS start_ns
               FROM ({events}) GROUP BY ALL"""


def plan_undelivered(ctx: DuckContext) -> Plan:
    if not ctx.drain.complete:
        return skipped(AnomalyClass.UNDELIVERED, NO_DRAIN_REASON)
    starts = subscription_starts(ctx)
    if starts is None or ctx.count("sends") == 0:
        return clean(AnomalyClass.UNDELIVERED)
    # Each committed, visible send owed to a subscription started before it, with whether the drain
    # emptied that subscription (judged) or not (unjudged).
    owed = f"""SELECT c.*, s.subscription, s.start_ns, {ctx.drained('c._topic', 's.subscription')} AS _drained
               FROM (SELECT value, writer, "index", process, "type", txn, topic, segment, msg_id, invoke_ns,
                            {logical_topic('topic')} AS _topic
                     FROM sends WHERE outcome = {literal(COMMITTED)} AND visible) c
               JOIN ({starts}) s ON s._topic = c._topic
               WHERE {ctx.later('c.invoke_ns', 's.start_ns')}"""
    # Any receive or ack (its consumer held the message) on the subscription delivered the value there.
    delivered = """SELECT value, subscription FROM receives WHERE value IS NOT NULL AND subscription IS NOT NULL
                   UNION ALL
                   SELECT value, subscription FROM acks WHERE value IS NOT NULL AND subscription IS NOT NULL"""
    send = ref(_OWED_COLUMNS, f=OpF.SEND.value, time="o.invoke_ns", table="o")
    missing = f"""SELECT o.value, o._topic AS topic, o.subscription, o.txn, o.start_ns, {send} AS send
                  FROM ({owed}) o
                  WHERE o._drained AND NOT EXISTS (SELECT 1 FROM ({delivered}) d
                                                   WHERE d.value = o.value AND d.subscription = o.subscription)"""
    unjudged = f"SELECT 1 FROM ({owed}) WHERE NOT _drained"
    return SqlCheck(AnomalyClass.UNDELIVERED, missing, ["send.time_ns", "value", "subscription"],
                    max_examples=ctx.max_examples, unjudged=unjudged,
                    note="{n} committed value(s) owed to subscriptions the drain did not consume until empty")


CHECKS: dict[AnomalyClass, PlanCheck] = {
    AnomalyClass.UNDELIVERED: plan_undelivered,
}
