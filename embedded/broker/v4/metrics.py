"""The v4 path's metrics: the broker's registered families, plus the few Pulsar names it lacks.

The coordinator counters (`pulsar_txn_*`, label `coordinator_id`) and the PIP-160
batched-log families are registered by the broker (`embedded/broker/metrics.py`); this
module adds, on the same registry:

* `pulsar_txn_execution_latency_le_<bucket>{coordinator_id}`: Pulsar's transaction
  execution latency buckets (ms from NEW_TXN to COMMITTED/ABORTED), each a counter of
  the transactions that fell into that bucket (not cumulative, as Pulsar's StatsBuckets);
* `pulsar_txn_tb_client_commit_failed_total`, `pulsar_txn_tb_client_abort_failed_total`:
  END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION requests that failed (Pulsar's TB
  client counters), and `pulsar_txn_tb_client_pending_requests`;
* `txnbench_txn_end_retries_total{coordinator_id}`: END_TXN completions the coordinator
  retried after a failure (Pulsar retries every second; ours, to make a stall visible).

A family that is already registered (e.g. by the v5 path on the same broker) is reused.
"""

from __future__ import annotations

from typing import Any

from embedded.broker.metrics import BrokerMetrics
from harness.metrics import Counter, Gauge

LATENCY_BUCKETS_MS = (10, 20, 50, 100, 500, 1000, 5000, 15000, 30000, 60000, 300000, 1500000, 3000000)


def _existing(registry: Any, name: str) -> Any:
    return getattr(registry, "_metrics", {}).get(name)


def _counter(registry: Any, name: str, help_text: str, labels: tuple[str, ...] = ()) -> Counter:
    found = _existing(registry, name)
    return found if found is not None else registry.counter(name, help_text, labels)


def _gauge(registry: Any, name: str, help_text: str, labels: tuple[str, ...] = ()) -> Gauge:
    found = _existing(registry, name)
    return found if found is not None else registry.gauge(name, help_text, labels)


class V4Metrics:
    def __init__(self, broker: BrokerMetrics, broker_label: str) -> None:
        self.broker = broker
        self.broker_label = broker_label
        r = broker.registry
        tc = ("coordinator_id",)
        self.latency_buckets = [(bound, _counter(r, f"pulsar_txn_execution_latency_le_{bound}",
                                                 f"Transactions that ended within {bound} ms", tc))
                                for bound in LATENCY_BUCKETS_MS]
        self.latency_overflow = _counter(r, "pulsar_txn_execution_latency_le_overflow",
                                         f"Transactions that took more than {LATENCY_BUCKETS_MS[-1]} ms", tc)
        self.tb_commit_failed = _counter(r, "pulsar_txn_tb_client_commit_failed_total",
                                         "END_TXN_ON_PARTITION/SUBSCRIPTION commits that failed")
        self.tb_abort_failed = _counter(r, "pulsar_txn_tb_client_abort_failed_total",
                                        "END_TXN_ON_PARTITION/SUBSCRIPTION aborts that failed")
        self.tb_pending = _gauge(r, "pulsar_txn_tb_client_pending_requests",
                                 "END_TXN_ON_PARTITION/SUBSCRIPTION requests in flight")
        self.end_retries = _counter(r, "txnbench_txn_end_retries_total",
                                    "Transaction completions retried after a participant or log failure", tc)

    def observe_latency(self, coordinator_id: int, millis: float) -> None:
        label = str(coordinator_id)
        for bound, counter in self.latency_buckets:
            if millis <= bound:
                counter.inc(coordinator_id=label)
                return
        self.latency_overflow.inc(coordinator_id=label)
