"""txn-id-reuse in SQL (analysis.checks.ids: the rules and their why)."""

from __future__ import annotations

from typing import Any

from analysis.checks.base import to_plain
from analysis.checks.ids import _EXAMPLE_OPENS
from analysis.duck.checks.registry import PlanCheck
from analysis.duck.evaluate import Plan, SqlCheck
from analysis.duck.frames import DuckContext
from analysis.duck.sql import in_list, literal, ref
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType


def plan_txn_id_reuse(ctx: DuckContext) -> Plan:
    reused = "SELECT txn, opens_ok AS opens, ok_open_invoke_ns AS first_open_ns FROM txns WHERE opens_ok > 1"
    open_ref = ref(ctx.columns("pairs"), f=OpF.TXN_OPEN.value, time="invoke_ns")

    def finish(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # Spark sorts (invoke_ns, op) structs: by invocation, then the op's writer and index (unique).
        rows = ctx.rows(f"""SELECT txn, list({open_ref} ORDER BY invoke_ns, writer, "index") AS opens FROM pairs
                            WHERE f = {literal(OpF.TXN_OPEN.value)} AND "type" = {literal(OpType.OK.value)}
                                  AND {in_list("txn", {e["txn"] for e in examples})}
                            GROUP BY txn""")
        named = {row["txn"]: to_plain(row["opens"][:_EXAMPLE_OPENS]) for row in rows}
        return [{k: v for k, v in {"txn": e["txn"], "opens": e.get("opens"), "open": named.get(e["txn"]),
                                   "first_open_ns": e.get("first_open_ns")}.items() if v is not None}
                for e in examples]

    return SqlCheck(AnomalyClass.TXN_ID_REUSE, reused, ["first_open_ns", "txn"], max_examples=ctx.max_examples,
                    finish=finish)


CHECKS: dict[AnomalyClass, PlanCheck] = {AnomalyClass.TXN_ID_REUSE: plan_txn_id_reuse}
