"""The ordering check: nonmonotonic.

For one process and key on one topic, the final reads must show the process's
visible values in the order it sent them. Only sends that completed ok are
ordered (at most one operation per process is outstanding, so each ok send
finished before the next was invoked). Values without a key are ordered only
within one segment (partition), as Pulsar routes them round-robin. The read
order is the drainer's event order, which follows each topic's log order and
reads v5 parent segments before their children, so each value's first read
orders the values of one topic: by time, and by the drainer's line index where
a coarse clock gives two reads one time (ties are not order).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import reduce
from typing import Any

from pyspark.sql import Window
from pyspark.sql import functions as F

from analysis.checks.base import NO_DRAIN_REASON, PendingCheck, Plan, clean, ref, skipped, to_plain
from analysis.checks.context import CheckContext
from analysis.checks.writes import send_ref
from harness.anomalies import AnomalyClass
from harness.history.schema import OpF, OpType


def plan_nonmonotonic(ctx: CheckContext) -> Plan:
    """A value read before a value the same process sent earlier with the same key and topic."""
    if not ctx.drain.complete:
        return skipped(AnomalyClass.NONMONOTONIC, NO_DRAIN_REASON)
    if ctx.count("sends") == 0 or ctx.count("reads") == 0:
        return clean(AnomalyClass.NONMONOTONIC)
    ordered = ctx.sends.filter((F.col("type") == OpType.OK.value) & F.col("visible")).withColumn(
        "_order_key",
        F.when(F.col("key").isNotNull(), F.concat(F.lit("k:"), F.col("key")))
        .otherwise(F.concat(F.lit("s:"), F.coalesce(F.col("segment"), F.lit("")))))
    # A hash of the sequence's fields leads its keys: the window's sort then compares one long for
    # nearly every pair of rows, where the fields themselves (the writer first) share their first bytes.
    sequence = ("writer", "process", "topic", "_order_key")
    w = (Window.partitionBy(F.xxhash64(*sequence), *sequence).orderBy("index")
         .rowsBetween(Window.unboundedPreceding, -1))
    # The window carries only what finds the latest-read earlier send: its read position, and its
    # index where one value was sent twice. The examples look that send up (`finish`), whole: its
    # own segment, which a keyed value split across segments need not share with the later send.
    latest_earlier = F.max(F.struct("read_pos", "index")).over(w)
    hits = (ordered.withColumn("_earlier", latest_earlier)
            .filter(F.col("_earlier.read_pos") > F.col("read_pos")))
    out = hits.select(
        "process", "topic", "key", "value", ref(hits, f=OpF.SEND.value, time="invoke_ns").alias("send"),
        F.col("read_ns").alias("first_read_ns"), F.col("_earlier.index").alias("_earlier_index"))

    def finish(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        found = _sends_at(ctx, [(e["send"]["writer"], e["_earlier_index"]) for e in examples])
        for e in examples:
            earlier = found[(e["send"]["writer"], e.pop("_earlier_index"))]
            e["sent_earlier_read_later"] = to_plain({
                "value": earlier["value"], "send": send_ref(earlier), "first_read_ns": earlier["read_ns"]})
        return examples

    return PendingCheck(AnomalyClass.NONMONOTONIC, out, ["send.time_ns", "value"], max_examples=ctx.max_examples,
                        finish=finish)


def _sends_at(ctx: CheckContext, places: Sequence[tuple[str, int]]) -> dict[tuple[str, int], Any]:
    """(writer, index) -> that send's row, for a few sends (the examples' earlier sends)."""
    by_writer: dict[str, set[int]] = {}
    for writer, index in places:
        by_writer.setdefault(writer, set()).add(index)
    if not by_writer:
        return {}
    wanted = [(F.col("writer") == writer) & F.col("index").isin(*sorted(indexes))
              for writer, indexes in sorted(by_writer.items())]
    rows = ctx.sends.filter(reduce(operator.or_, wanted)).select(
        "writer", "index", "process", "type", "invoke_ns", "txn", "value", "topic", "segment", "msg_id",
        "read_ns").collect()
    return {(row["writer"], row["index"]): row for row in rows}
