"""double-ack in SQL (analysis.checks.ack_conflicts: the rules and their why).

The messages are named and placed as analysis.checks.context names them (analysis.duck.checks.positions).

Spark's `_claimed_twice` only narrows the claims a large history aggregates; a message claimed
once can be neither a double-ack nor unjudged, so the SQL aggregates every claim.
"""

from __future__ import annotations

from analysis.checks.ack_conflicts import _EXAMPLE_ACKS
from analysis.checks.base import clean
from analysis.duck.checks.positions import message_key, message_position
from analysis.duck.checks.registry import PlanCheck
from analysis.duck.evaluate import Plan, SqlCheck
from analysis.duck.frames import DuckContext
from analysis.duck.sql import literal, logical_topic, ref
from analysis.model import COMMITTED, UNKNOWN
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType

_COMMITTED, _UNKNOWN = literal(COMMITTED), literal(UNKNOWN)
_KEY = ("_topic", "subscription", "_msg")
_CLAIM = "topic, msg_id, value, txn, outcome, invoke_ns, ack"


def _message_key() -> str:
    """`_topic` (logical) and `_msg` (the message's name, else its raw id, else its value)."""
    return (f"{logical_topic('topic')} AS _topic, subscription, "
            f"{message_key('msg_id', 'value')} AS _msg")


def _claims(ctx: DuckContext) -> str:
    """Spark's `_claims` and `_individual_claims`, as the CTEs `claims` and `individual`."""
    ack = ref(ctx.columns("acks"), f=OpF.ACK.value, time="invoke_ns")
    return f"""claims AS (
            SELECT *, {ack} AS ack,
                   CASE WHEN outcome = {_COMMITTED} THEN coalesce(end_ns, commit_invoke_ns) END AS settle_ns,
                   CASE WHEN outcome = {_COMMITTED} THEN coalesce(commit_invoke_ns, end_ns) END AS settle_from_ns
            FROM acks
            WHERE "type" = {literal(OpType.OK.value)} AND txn IS NOT NULL AND subscription IS NOT NULL
                  AND outcome IN ({_COMMITTED}, {_UNKNOWN})),
        individual AS (
            SELECT {_message_key()}, {_CLAIM}, settle_ns FROM claims WHERE NOT cumulative)"""


def _cumulative_claims(ctx: DuckContext) -> str:
    """Spark's `_cumulative_claims`: one row per (cumulative claim, message it claims)."""
    # The settled horizon of each cumulative claim, from the events of its place in time order
    # (_kind 0: the claim made; 1: a committed one settled for certain; 2: perhaps, from then on).
    place = "topic, _seg, subscription"
    settled_before = "(c._horizon IS NOT NULL AND m._pos <= c._horizon)"
    return f"""
        WITH {_claims(ctx)},
        cumulative AS (
            SELECT topic, coalesce(segment, '') AS _seg, subscription, {message_position('msg_id')} AS _pos,
                   ack, txn, outcome, invoke_ns, settle_ns, settle_from_ns
            FROM claims WHERE cumulative),
        events AS (
            SELECT {place}, invoke_ns AS _t, 0 AS _kind, _pos, ack, txn, outcome, invoke_ns FROM cumulative
            UNION ALL
            SELECT {place}, settle_ns, 1, _pos, NULL, NULL, NULL, NULL FROM cumulative WHERE settle_ns IS NOT NULL
            UNION ALL
            SELECT {place}, settle_from_ns, 2, _pos, NULL, NULL, NULL, NULL FROM cumulative
            WHERE settle_from_ns IS NOT NULL),
        horizons AS (
            SELECT {place}, _kind, _pos AS _upto, ack, txn, outcome, invoke_ns,
                   max(CASE WHEN _kind = 1 THEN _pos END) OVER w AS _horizon,
                   max(CASE WHEN _kind = 2 THEN _pos END) OVER w AS _maybe
            FROM events
            WINDOW w AS (PARTITION BY {place} ORDER BY _t ASC NULLS FIRST, _kind ASC NULLS FIRST
                         ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)),
        made AS (SELECT * FROM horizons WHERE _kind = 0 AND _upto IS NOT NULL),
        known AS (
            SELECT value, topic, segment, subscription, msg_id FROM receives
            UNION ALL
            SELECT value, topic, segment, subscription, msg_id FROM acks WHERE subscription IS NOT NULL),
        messages AS (
            SELECT {place}, _pos, min(value) AS value, min(msg_id) AS msg_id
            FROM (SELECT topic, coalesce(segment, '') AS _seg, subscription, {message_position('msg_id')} AS _pos,
                         value, msg_id FROM known)
            WHERE _pos IS NOT NULL GROUP BY {place}, _pos),
        covered AS (
            SELECT m.topic, m.subscription, m.msg_id, m.value, c.txn, c.outcome, c.invoke_ns, c.ack,
                   (NOT {settled_before} AND c._maybe IS NOT NULL AND m._pos <= c._maybe) AS ambiguous,
                   m._pos = c._upto AS named
            FROM made c JOIN messages m ON m.topic = c.topic AND m._seg = c._seg AND m.subscription = c.subscription
            WHERE m._pos <= c._upto AND (NOT {settled_before} OR m._pos = c._upto)),
        keyed AS (SELECT {_message_key()}, {_CLAIM}, ambiguous, named FROM covered),
        -- A message an individual claim settled before the cumulative ack was invoked is not claimed again.
        settled AS (
            SELECT _topic, subscription, _msg, min(settle_ns) AS _settled_ns FROM individual
            WHERE settle_ns IS NOT NULL GROUP BY _topic, subscription, _msg)
        SELECT k._topic, k.subscription, k._msg, k.topic, k.msg_id, k.value, k.txn, k.outcome, k.invoke_ns, k.ack,
               k.ambiguous
        FROM keyed k LEFT JOIN settled s ON s._topic = k._topic AND s.subscription = k.subscription AND s._msg = k._msg
        WHERE k.named OR s._settled_ns IS NULL OR s._settled_ns >= k.invoke_ns + {ctx.clock_slack_ns}"""


def cumulative_claims(ctx: DuckContext) -> str:
    """The table of the messages transactional cumulative acks claim (analysis.checks.ack_conflicts.
    cumulative_claims, the same columns), made once per context: double-ack and ctp-loss read it."""
    return ctx.shared("cumulative_claims", lambda: _cumulative_claims(ctx))


def plan_double_ack(ctx: DuckContext) -> Plan:
    if ctx.count("acks") == 0:
        return clean(AnomalyClass.DOUBLE_ACK)
    every = f"SELECT {', '.join(_KEY)}, {_CLAIM}, false AS ambiguous FROM individual"
    if ctx.count("cumulative_acks"):
        every += f" UNION ALL SELECT {', '.join(_KEY)}, {_CLAIM}, ambiguous FROM {cumulative_claims(ctx)}"
    # Spark's collect_set skips nulls and gives [] for none; DuckDB's list gives null for none.
    # The (invoke_ns, ack) structs sort as Spark's array_sort sorts them: an ack claims a message
    # once, so ties end at its writer and index, before any field that may be null (whose order
    # inside a struct the two engines do not share).
    committed = f"(outcome = {_COMMITTED} AND NOT ambiguous)"
    unknown = f"(outcome = {_UNKNOWN} OR ambiguous)"
    per_message = f"""
        WITH {_claims(ctx)},
        every AS ({every}),
        per_message AS (
            SELECT {', '.join(_KEY)},
                   coalesce(list_sort(list(DISTINCT txn) FILTER (WHERE {committed} AND txn IS NOT NULL)), [])
                       AS txns,
                   coalesce(len(list(DISTINCT txn) FILTER (WHERE {unknown} AND txn IS NOT NULL)), 0) AS _unknown,
                   list_sort(list({{'_t': invoke_ns, '_op': ack}}))[1:{_EXAMPLE_ACKS}] AS _acks,
                   min(topic) AS topic, min(msg_id) AS msg_id, min(value) AS value
            FROM every GROUP BY {', '.join(_KEY)})"""
    found = f"""{per_message}
        SELECT topic, subscription, msg_id, value, txns, list_transform(_acks, lambda a: a._op) AS acks,
               _acks[1]._t AS first_ns
        FROM per_message WHERE len(txns) >= 2"""
    unjudged = f"{per_message} SELECT 1 FROM per_message WHERE len(txns) < 2 AND len(txns) + _unknown >= 2"
    return SqlCheck(AnomalyClass.DOUBLE_ACK, found, ["first_ns", "topic", "subscription", "msg_id"],
                    max_examples=ctx.max_examples, unjudged=unjudged,
                    note="{n} message(s) acked ok in one committed transaction and in others of unknown "
                         "outcome (or only in transactions of unknown outcome): a double-ack if more than "
                         "one committed")


CHECKS: dict[AnomalyClass, PlanCheck] = {AnomalyClass.DOUBLE_ACK: plan_double_ack}
