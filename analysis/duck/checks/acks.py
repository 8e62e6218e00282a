"""lost-ack and stuck-ack in SQL (analysis.checks.acks: the rules and their why)."""

from __future__ import annotations

from collections.abc import Sequence

from analysis.checks.base import NO_DRAIN_REASON, clean, skipped
from analysis.duck.checks.positions import message_position
from analysis.duck.checks.registry import PlanCheck
from analysis.duck.evaluate import Plan, SqlCheck
from analysis.duck.frames import DuckContext
from analysis.duck.sql import literal, ref, struct_of
from analysis.model import ABORTED, COMMITTED, UNKNOWN
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType

__all__ = ["plan_lost_ack", "plan_stuck_ack", "stuck_acks"]

_OK, _INFO = literal(OpType.OK.value), literal(OpType.INFO.value)
_PLACE = ("topic", "_seg", "subscription", "_pos")


def _placed(extra: str = "") -> str:
    """The place columns of a row with `topic`, `segment`, `subscription`, `msg_id`."""
    return f"topic, coalesce(segment, '') AS _seg, subscription, {message_position('msg_id')} AS _pos{extra}"


def _earliest_cover(targets: str, covers: str, target_cols: Sequence[str]) -> str:
    """analysis.checks.acks._earliest_cover: each target (`_PLACE` and `target_cols`) with `_cover`,
    the least {ref_ns, cover} of `covers` (`_PLACE`, ref_ns, cover) at or past its position, or
    null. One window sorted by position descending, covers before targets at the same place."""
    kept = ", ".join(f'"{c}"' for c in target_cols)
    best = ("min(CASE WHEN _kind = 0 THEN {'ref_ns': ref_ns, 'cover': cover} END) OVER ("
            "PARTITION BY topic, _seg, subscription ORDER BY _pos DESC NULLS LAST, _kind ASC "
            "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)")
    return f"""SELECT topic, _seg, subscription, _pos, {kept}, _cover FROM (
                   SELECT *, {best} AS _cover FROM (
                       SELECT *, 1 AS _kind FROM ({targets})
                       UNION ALL BY NAME SELECT *, 0 AS _kind FROM ({covers}))
                   WHERE _pos IS NOT NULL)
               WHERE _kind = 1"""


def plan_lost_ack(ctx: DuckContext) -> Plan:
    if ctx.count("acks") == 0:
        return clean(AnomalyClass.LOST_ACK)
    since = (f"CASE WHEN client_outcome = {literal(COMMITTED)} THEN end_ns "
             f"ELSE {literal(ctx.drain_phase_ns)}::BIGINT END")
    committed = f"""SELECT *, {since} AS ref_ns FROM acks WHERE "type" = {_OK} AND txn IS NOT NULL
                    AND outcome = {literal(COMMITTED)} AND subscription IS NOT NULL"""
    unjudged = f"""SELECT writer, "index" FROM ({committed}) WHERE ref_ns IS NULL
                   UNION ALL
                   SELECT writer, "index" FROM acks WHERE txn IS NOT NULL AND outcome = {literal(UNKNOWN)}
                       AND "type" IN ({_OK}, {_INFO})"""
    ack = ref(ctx.columns("acks"), f=OpF.ACK.value, time="invoke_ns")
    receive = ref(ctx.columns("receives"), f=OpF.RECEIVE.value)
    cumulative = ""
    if ctx.count("cumulative_acks"):
        covers = f"""SELECT {_placed()}, ref_ns, {{'txn': txn, 'ack': ack}} AS cover FROM judged WHERE cumulative"""
        targets = f"SELECT {_placed()}, value, delivered_ns, receive FROM recv"
        covered = _earliest_cover(targets, covers, ["value", "delivered_ns", "receive"])
        cumulative = f"""UNION ALL
                         SELECT value, subscription, _cover.cover.txn, _cover.cover.ack, _cover.ref_ns, receive, 1
                         FROM ({covered})
                         WHERE _cover IS NOT NULL AND {ctx.later('delivered_ns', '_cover.ref_ns')}"""
    ctes = [f"judged AS (SELECT *, {ack} AS ack FROM ({committed}) WHERE ref_ns IS NOT NULL)",
            f"""recv AS (SELECT value, topic, segment, subscription, msg_id, time_ns, delivered_ns,
                                {receive} AS receive FROM receives)""",
            f"""hits AS (SELECT j.value, j.subscription, j.txn, j.ack, j.ref_ns AS committed_ns, r.receive, 0 AS _via
                         FROM judged j JOIN recv r ON r.value = j.value AND r.subscription = j.subscription
                         WHERE {ctx.later('r.delivered_ns', 'j.ref_ns')}
                         {cumulative})"""]
    acked = struct_of({"txn": "txn", "ack": "ack", "committed_ns": "committed_ns"})
    # A redelivery both an individual and a cumulative ack cover names the individual one, as Spark's
    # min_by does on one partition (it keeps the first of equal keys, and the union puts those first).
    first = "{'time_ns': receive.time_ns, 'via': _via}"
    lost = f"""WITH {', '.join(ctes)}
               SELECT value, subscription, _acked.txn AS txn, _acked.ack AS ack, _acked.committed_ns AS committed_ns,
                      redelivery, redeliveries
               FROM (SELECT value, subscription, arg_min({acked}, {first}) AS _acked,
                            arg_min(receive, receive.time_ns) AS redelivery, count(*) AS redeliveries
                     FROM hits GROUP BY value, subscription)"""
    return SqlCheck(AnomalyClass.LOST_ACK, lost, ["redelivery.time_ns", "value"], max_examples=ctx.max_examples,
                    unjudged=unjudged,
                    note="{n} ack(s) not judged: in transactions of unknown outcome (nothing visible "
                         "decides them), or decided committed by visibility with no drain phase to time "
                         "them against")


def plan_stuck_ack(ctx: DuckContext) -> Plan:
    if not ctx.drain.complete:
        return skipped(AnomalyClass.STUCK_ACK, NO_DRAIN_REASON)
    if ctx.count("acks") == 0:
        return clean(AnomalyClass.STUCK_ACK)
    stuck, unjudged = stuck_acks(ctx)
    return SqlCheck(AnomalyClass.STUCK_ACK, f"SELECT * FROM {stuck}", ["ack.time_ns", "value"],
                    max_examples=ctx.max_examples, unjudged=unjudged,
                    note="{n} ack(s) in aborted transactions on subscriptions the drain did not "
                         "consume until empty")


def stuck_acks(ctx: DuckContext) -> tuple[str, str]:
    """(stuck, unjudged): the table of the stuck acks (value, topic, subscription, txn,
    client_outcome, ack), made once per context for unresolved-txn too (DuckContext.shared), and
    the SELECT of the aborted acks on subscriptions the drain did not empty."""
    aborted = f"""SELECT * FROM acks WHERE txn IS NOT NULL AND outcome = {literal(ABORTED)}
                  AND subscription IS NOT NULL"""
    drained = ctx.drained("topic", "subscription")
    stuck = ctx.shared("stuck_acks", lambda: _stuck(ctx, f"{aborted} AND {drained}"))
    return stuck, f"{aborted} AND NOT {drained}"


def _unsettled(frame: str, keys: Sequence[str]) -> str:
    """The rows of the CTE `frame` no committed cumulative ack (`settle_covers`) covers, by `keys`."""
    extra = "".join(f', "{k}"' for k in keys if k not in _PLACE)
    covered = _earliest_cover(f"SELECT {_placed(extra)} FROM {frame}", "SELECT * FROM settle_covers",
                              [k for k in keys if k not in _PLACE])
    same = " AND ".join(f'c."{k}" = f."{k}"' for k in keys)
    return f"""SELECT * FROM {frame} f WHERE NOT EXISTS (
                   SELECT 1 FROM ({covered}) c WHERE c._cover IS NOT NULL AND {same})"""


def _stuck(ctx: DuckContext, judged: str) -> str:
    """The acks of `judged` (aborted, on drained subscriptions) never released: `stuck_acks`."""
    ack = ref(ctx.columns("acks"), f=OpF.ACK.value, time="invoke_ns")
    ctes = [f"judged AS ({judged})",
            f"""settling AS (SELECT * FROM acks WHERE "type" = {_OK}
                             AND (txn IS NULL OR outcome = {literal(COMMITTED)}))""",
            """candidates AS (
                   SELECT * FROM judged j
                   WHERE NOT EXISTS (SELECT 1 FROM settling s WHERE s.value = j.value
                                     AND s.subscription = j.subscription)
                     AND NOT EXISTS (SELECT 1 FROM receives r WHERE r.value = j.value
                                     AND r.subscription = j.subscription AND r.time_ns > j.invoke_ns))"""]

    def stuck(candidates: str) -> str:
        return f"SELECT value, topic, subscription, txn, client_outcome, {ack} AS ack FROM {candidates}"

    if not ctx.count("cumulative_acks"):
        return f"WITH {', '.join(ctes)} {stuck('candidates')}"
    ctes.append(f"""settle_covers AS (SELECT {_placed()}, 0::BIGINT AS ref_ns,
                                      {{'txn': txn, 'writer': writer, 'index': "index"}} AS cover
                                      FROM settling WHERE cumulative)""")
    ctes.append(f"unsettled_candidates AS ({_unsettled('candidates', ['writer', 'index'])})")
    ctes.extend(_covered_by_aborted_cumulative(ctx))
    return f"""WITH {', '.join(ctes)}
               {stuck('unsettled_candidates')}
               UNION ALL
               SELECT value, topic, subscription, _cover.cover.txn, _cover.cover.client_outcome, _cover.cover.ack
               FROM unsettled_covered"""


def _covered_by_aborted_cumulative(ctx: DuckContext) -> list[str]:
    """CTEs ending in `unsettled_covered`: messages an aborted cumulative ack of `judged` covered
    that never came back (analysis.checks.acks._covered_by_aborted_cumulative), with `_cover`."""
    ack = ref(ctx.columns("acks"), f=OpF.ACK.value, time="invoke_ns")
    cover = struct_of({"txn": "txn", "client_outcome": "client_outcome", "invoke_ns": "invoke_ns", "ack": ack})
    # The latest cover wins: ref_ns is the negated invocation time, and _earliest_cover takes the least.
    covers = f"SELECT {_placed()}, -invoke_ns AS ref_ns, {cover} AS cover FROM judged WHERE cumulative"
    targets = f"""SELECT {_placed(', value, segment, msg_id, _last')} FROM (
                      SELECT value, topic, segment, subscription, msg_id, max(time_ns) AS _last FROM receives
                      GROUP BY value, topic, segment, subscription, msg_id)"""
    covered = _earliest_cover(targets, covers, ["value", "segment", "msg_id", "_last"])
    return [f"""covered AS (
                    SELECT value, topic, segment, subscription, msg_id, _cover FROM ({covered}) c
                    WHERE _cover IS NOT NULL AND _last < _cover.cover.invoke_ns
                      AND NOT EXISTS (SELECT 1 FROM judged j WHERE j.value = c.value
                                      AND j.subscription = c.subscription)
                      AND NOT EXISTS (SELECT 1 FROM settling s WHERE s.value = c.value
                                      AND s.subscription = c.subscription))""",
            f"unsettled_covered AS ({_unsettled('covered', ['value', 'subscription'])})"]


CHECKS: dict[AnomalyClass, PlanCheck] = {
    AnomalyClass.LOST_ACK: plan_lost_ack,
    AnomalyClass.STUCK_ACK: plan_stuck_ack,
}
