"""Critical-path depth per operation: sequential durable writes and round trips, measured by the cluster.

Theory of operation. Every broker traces its transactional requests (`embedded.tracing`)
and exports, per request kind, how many it served and the summed depth of their paths
(`txnbench_request_spans_total`, `txnbench_request_span_writes_total`,
`txnbench_request_span_round_trips_total`). The window's deltas give the mean depth of
one request. A harness operation maps to the requests the client sends for it:

* open: NEW_TXN;
* send: SEND (v4 also ADD_PARTITION_TO_TXN before a partition's first send, shown apart);
* ack: ACK (v4 also ADD_SUBSCRIPTION_TO_TXN);
* commit: END_TXN; v4's coordinator calls every participant in parallel
  (END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION, traced on the participant's broker),
  so its depth is END_TXN's plus the deeper of the two participant requests (END_TXN's
  own round trips already count the call to the participant once).

A target whose brokers do not export the spans (compose, external) has none: the block
says so instead of inventing a depth.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis.perf.io import Selector, window_delta
from analysis.perf.prom import Snapshot

__all__ = ["OPERATIONS", "REQUESTS", "critical_path"]

REQUESTS = ("NEW_TXN", "ADD_PARTITION_TO_TXN", "SEND", "ADD_SUBSCRIPTION_TO_TXN", "ACK", "END_TXN",
            "END_TXN_ON_PARTITION", "END_TXN_ON_SUBSCRIPTION")
OPERATIONS: dict[str, str] = {"txn-open": "NEW_TXN", "send": "SEND", "ack": "ACK", "txn-commit": "END_TXN"}
_PARTICIPANT_REQUESTS = ("END_TXN_ON_PARTITION", "END_TXN_ON_SUBSCRIPTION")


def _mean(snapshots: Mapping[str, Mapping[str, Snapshot]], window: str, baseline: str | None,
          request: str) -> dict[str, Any] | None:
    def delta(name: str) -> float | None:
        return window_delta(snapshots, window, baseline, Selector(name, {"request": (request,)}))
    count = delta("txnbench_request_spans_total")
    if not count:
        return None
    writes, trips = delta("txnbench_request_span_writes_total"), delta("txnbench_request_span_round_trips_total")
    return {"requests": int(count),
            "writes": round((writes or 0.0) / count, 3), "round_trips": round((trips or 0.0) / count, 3)}


def critical_path(snapshots: Mapping[str, Mapping[str, Snapshot]], window: str | None,
                  baseline: str | None) -> dict[str, Any]:
    """The `critical_path` block of perf.json (see the module docstring)."""
    if not window or baseline is None:
        return {"absent": True, "reason": "no measured window bounded by metrics snapshots"}
    requests = {r: m for r in REQUESTS if (m := _mean(snapshots, window, baseline, r)) is not None}
    if not requests:
        return {"absent": True, "reason": "no broker exported txnbench_request_span_* in the window (only the "
                                          "embedded cluster traces its requests)"}
    operations: dict[str, dict[str, Any]] = {}
    for op, request in OPERATIONS.items():
        base = requests.get(request)
        if base is None:
            continue
        entry = {"requests": [request], "writes": base["writes"], "round_trips": base["round_trips"]}
        if op == "txn-commit":
            nested = [requests[r] for r in _PARTICIPANT_REQUESTS if r in requests]
            if nested:
                deepest = max(nested, key=lambda m: (m["writes"], m["round_trips"]))
                entry["requests"] = [request, *[r for r in _PARTICIPANT_REQUESTS if r in requests]]
                entry["writes"] = round(base["writes"] + deepest["writes"], 3)
                entry["round_trips"] = round(base["round_trips"] + deepest["round_trips"], 3)
        operations[op] = entry
    return {"window": window, "requests": requests, "operations": operations,
            "source": "embedded.tracing spans (txnbench_request_span_*), per request, mean over the window"}
