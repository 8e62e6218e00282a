"""nonmonotonic in SQL (analysis.checks.order: the rules and their why)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from analysis.checks.base import NO_DRAIN_REASON, clean, skipped, to_plain
from analysis.checks.writes import send_ref
from analysis.duck.checks.registry import PlanCheck
from analysis.duck.evaluate import Plan, SqlCheck
from analysis.duck.frames import DuckContext
from analysis.duck.sql import literal, ref
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType


def plan_nonmonotonic(ctx: DuckContext) -> Plan:
    if not ctx.drain.complete:
        return skipped(AnomalyClass.NONMONOTONIC, NO_DRAIN_REASON)
    if ctx.count("sends") == 0 or ctx.count("reads") == 0:
        return clean(AnomalyClass.NONMONOTONIC)
    # The latest-read earlier send of the same sequence: its read position, and its index where
    # one value was sent twice (`finish` looks that send up, whole).
    send = ref(ctx.columns("sends"), f=OpF.SEND.value, time="invoke_ns")
    anomalies = f"""
        WITH ordered AS (
            SELECT *, CASE WHEN "key" IS NOT NULL THEN 'k:' || "key" ELSE 's:' || coalesce(segment, '') END
                          AS _order_key
            FROM sends WHERE "type" = {literal(OpType.OK.value)} AND visible),
        hits AS (
            SELECT *, max({{'read_pos': read_pos, 'index': "index"}}) OVER (
                          PARTITION BY writer, process, topic, _order_key ORDER BY "index" ASC NULLS FIRST
                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS _earlier
            FROM ordered)
        SELECT process, topic, "key", value, {send} AS send, read_ns AS first_read_ns,
               _earlier."index" AS _earlier_index
        FROM hits WHERE _earlier.read_pos > read_pos"""

    def finish(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        found = _sends_at(ctx, [(e["send"]["writer"], e["_earlier_index"]) for e in examples])
        for e in examples:
            earlier = found[(e["send"]["writer"], e.pop("_earlier_index"))]
            e["sent_earlier_read_later"] = to_plain({
                "value": earlier["value"], "send": send_ref(earlier),
                "first_read_ns": earlier["read_ns"]})
        return examples

    return SqlCheck(AnomalyClass.NONMONOTONIC, anomalies, ["send.time_ns", "value"], max_examples=ctx.max_examples,
                    finish=finish)


def _sends_at(ctx: DuckContext, places: Sequence[tuple[str, int]]) -> dict[tuple[str, int], dict[str, Any]]:
    """(writer, index) -> that send's row, for a few sends (the examples' earlier sends)."""
    by_writer: dict[str, set[int]] = {}
    for writer, index in places:
        by_writer.setdefault(writer, set()).add(index)
    if not by_writer:
        return {}
    wanted = " OR ".join(f'(writer = {literal(writer)} AND "index" IN ({", ".join(literal(i) for i in sorted(indexes))}))'
                         for writer, indexes in sorted(by_writer.items()))
    rows = ctx.rows(f"""SELECT writer, "index", process, "type", invoke_ns, txn, value, topic, segment, msg_id, read_ns
                        FROM sends WHERE {wanted}""")
    return {(row["writer"], row["index"]): row for row in rows}


CHECKS: dict[AnomalyClass, PlanCheck] = {AnomalyClass.NONMONOTONIC: plan_nonmonotonic}
