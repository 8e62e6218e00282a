"""The broker's Prometheus metrics: Pulsar's names where they exist, ours where not.

Every name a transaction path reports is registered here, once, so v4 and v5 (both
installed on the v5 path) never register a name twice and the analysis finds the
same names on every run (docs/architecture.md, "Metrics"). Per-topic counters are
bumped on the hot path through `TopicCounters`, which keeps the label key so a SEND
costs a dict update, not a label lookup.

Gauges that describe current state (producers, consumers, backlog) are computed at
scrape time by collectors (`CollectingRegistry.add_collector`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from embedded.tracing import Span
from harness.metrics import Counter, Gauge, Histogram, Registry

log = logging.getLogger(__name__)

LATENCY_MS_BUCKETS = (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 1000)
RECORDS_PER_ENTRY_BUCKETS = (10, 50, 100, 200, 500, 1000)
ENTRY_SIZE_BUCKETS = (128, 512, 1024, 2048, 4096, 16_384, 102_400, 1_232_896)
OLDEST_RECORD_DELAY_BUCKETS = (1, 5, 10)
SECONDS_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5)


class CollectingRegistry(Registry):
    """A registry that runs collectors (state gauges) before rendering."""

    def __init__(self) -> None:
        super().__init__()
        self._collectors: list[Callable[[], None]] = []

    def add_collector(self, collector: Callable[[], None]) -> None:
        self._collectors.append(collector)

    def render(self) -> str:
        for collector in self._collectors:
            try:
                collector()
            except Exception:
                log.exception("metrics collector %r failed", collector)
        return super().render()


class TopicCounters:
    """One topic's in/out counters with their label key computed once."""

    __slots__ = ("_key", "_metrics", "bytes_in", "bytes_out", "msgs_in", "msgs_out")

    def __init__(self, metrics: BrokerMetrics, topic: str) -> None:
        self._metrics = metrics
        self._key = (topic,)
        self.msgs_in = self.bytes_in = self.msgs_out = self.bytes_out = 0

    def published(self, messages: int, size: int) -> None:
        self.msgs_in += messages
        self.bytes_in += size
        m = self._metrics
        key = self._key
        m.in_messages.values[key] = m.in_messages.values.get(key, 0.0) + messages
        m.in_bytes.values[key] = m.in_bytes.values.get(key, 0.0) + size

    def dispatched(self, messages: int, size: int) -> None:
        self.msgs_out += messages
        self.bytes_out += size
        m = self._metrics
        key = self._key
        m.out_messages.values[key] = m.out_messages.values.get(key, 0.0) + messages
        m.out_bytes.values[key] = m.out_bytes.values.get(key, 0.0) + size


class BrokerMetrics:
    def observe_span(self, span: Span) -> None:
        """A traced request ended: count it and the depth of its path."""
        self.spans.inc(request=span.name)
        self.span_writes.inc(span.writes, request=span.name)
        self.span_round_trips.inc(span.round_trips, request=span.name)

    def __init__(self, registry: CollectingRegistry | None = None) -> None:
        r = self.registry = registry or CollectingRegistry()
        # ---- topics (Pulsar names, label `topic`)
        self.in_messages = r.counter("pulsar_in_messages_total", "Messages published", ("topic",))
        self.out_messages = r.counter("pulsar_out_messages_total", "Messages dispatched to consumers", ("topic",))
        self.in_bytes = r.counter("pulsar_in_bytes_total", "Bytes published", ("topic",))
        self.out_bytes = r.counter("pulsar_out_bytes_total", "Bytes dispatched to consumers", ("topic",))
        self.producers = r.gauge("pulsar_producers_count", "Connected producers", ("topic",))
        self.consumers = r.gauge("pulsar_consumers_count", "Connected consumers", ("topic",))
        self.subscriptions = r.gauge("pulsar_subscriptions_count", "Subscriptions", ("topic",))
        self.backlog = r.gauge("pulsar_msg_backlog", "Entries not yet acknowledged, summed over subscriptions",
                               ("topic",))
        self.topics = r.gauge("pulsar_broker_topics_count", "Topics loaded on this broker")
        self.storage_write_latency = r.histogram(
            "pulsar_storage_write_latency_ms", "Managed-ledger append latency (ms)", LATENCY_MS_BUCKETS)
        # ---- managed ledgers (ours; I/O by ledger kind)
        self.ml_add_entries = r.counter("txnbench_ml_add_entries_total", "Entries appended to managed ledgers",
                                        ("kind",))
        self.ml_add_bytes = r.counter("txnbench_ml_add_bytes_total", "Bytes appended to managed ledgers", ("kind",))
        self.ml_add_errors = r.counter("txnbench_ml_add_errors_total", "Failed managed-ledger appends", ("kind",))
        self.ml_read_entries = r.counter("txnbench_ml_read_entries_total",
                                         "Entries read from the ledger store (cache misses)", ("kind",))
        self.ml_read_bytes = r.counter("txnbench_ml_read_bytes_total", "Bytes read from the ledger store", ("kind",))
        self.ml_cache_hits = r.counter("txnbench_ml_cache_hits_total", "Entries served from the entry cache")
        self.ml_ledgers_created = r.counter("txnbench_ml_ledgers_created_total", "Ledgers created", ("kind",))
        self.ml_rollovers = r.counter("txnbench_ml_rollovers_total", "Ledger rollovers", ("kind", "reason"))
        self.ml_metadata_updates = r.counter("txnbench_ml_metadata_updates_total",
                                             "Managed-ledger and cursor metadata CAS writes", ("result",))
        self.cursor_persists = r.counter("txnbench_ml_cursor_persists_total", "Cursor state writes to cursor ledgers")
        self.cursor_persist_bytes = r.counter("txnbench_ml_cursor_persist_bytes_total", "Bytes of cursor state written")
        self.ack_receipt_latency = r.histogram(
            "txnbench_ack_receipt_latency_ms", "ACK with request_id until its persisted ACK_RESPONSE (ms)",
            LATENCY_MS_BUCKETS)
        # ---- ownership and lookups
        self.lookups = r.counter("txnbench_broker_lookups_total", "LOOKUP answers", ("answer",))
        self.ownership_changes = r.counter("txnbench_broker_ownership_total", "Topic ownership acquired/released",
                                           ("event",))
        self.peer_requests = r.counter("txnbench_broker_peer_requests_total", "Broker-to-broker requests",
                                       ("result",))
        self.connections = r.gauge("txnbench_broker_connections", "Open client connections")
        # ---- request spans (ours, embedded.tracing): the critical path of transactional requests
        self.spans = r.counter("txnbench_request_spans_total", "Transactional requests traced, by request",
                               ("request",))
        self.span_writes = r.counter(
            "txnbench_request_span_writes_total",
            "Sequential durable writes (metadata writes, ledger appends, cursor flushes that waited for each "
            "other) on the path of each traced request, summed", ("request",))
        self.span_round_trips = r.counter(
            "txnbench_request_span_round_trips_total",
            "Sequential round trips (metadata, ledger, other brokers) on the path of each traced request, summed",
            ("request",))
        # ---- transaction coordinator (Pulsar names, label `coordinator_id`)
        tc = ("coordinator_id",)
        self.txn_active = r.gauge("pulsar_txn_active_count", "Open transactions", tc)
        self.txn_created = r.counter("pulsar_txn_created_total", "Transactions created", tc)
        self.txn_committed = r.counter("pulsar_txn_committed_total", "Transactions committed", tc)
        self.txn_aborted = r.counter("pulsar_txn_aborted_total", "Transactions aborted", tc)
        self.txn_timeout = r.counter("pulsar_txn_timeout_total", "Transactions timed out", tc)
        self.txn_append_log = r.counter("pulsar_txn_append_log_total", "Coordinator log records appended", tc)
        self.txn_recovery_seconds = r.gauge("pulsar_txn_coordinator_recovery_seconds",
                                            "Duration of the last coordinator recovery", tc)
        # ---- PIP-160 batched writers (label `broker`), for the coordinator log and the pending-ack log
        self.tc_batched = BatchedLogMetrics(r, "pulsar_txn_tc")
        self.pending_ack_batched = BatchedLogMetrics(r, "pulsar_txn_pending_ack_store")
        # ---- PIP-473
        self.txn_md_op_writes = r.counter("pulsar_txn_metadata_store_op_writes_total",
                                          "Transaction op records written to the metadata store")
        self.txn_md_header_cas = r.counter("pulsar_txn_metadata_store_header_cas_total",
                                           "Transaction header CAS writes", ("result",))
        self.txn_md_index_query = r.histogram("pulsar_txn_metadata_store_index_query_seconds",
                                              "Secondary-index queries", SECONDS_BUCKETS)
        self.txn_md_outstanding_ops = r.gauge("pulsar_txn_metadata_store_outstanding_op_records",
                                              "Op records not yet garbage-collected")

    def topic_counters(self, topic: str) -> TopicCounters:
        return TopicCounters(self, topic)


class BatchedLogMetrics:
    """PIP-160's `<prefix>_batched_log_*` family (TxnLogBufferedWriterMetricsStats)."""

    def __init__(self, r: Registry, prefix: str) -> None:
        labels = ("broker",)
        self.records_per_entry: Histogram = r.histogram(
            f"{prefix}_batched_log_records_count_per_entry", "Records per batched entry",
            RECORDS_PER_ENTRY_BUCKETS, labels)
        self.entry_size_bytes: Histogram = r.histogram(
            f"{prefix}_batched_log_entry_size_bytes", "Batched entry size", ENTRY_SIZE_BUCKETS, labels)
        self.oldest_record_delay_seconds: Histogram = r.histogram(
            f"{prefix}_batched_log_oldest_record_delay_time_seconds", "Delay of a batch's oldest record",
            OLDEST_RECORD_DELAY_BUCKETS, labels)
        self.by_records: Counter = r.counter(f"{prefix}_batched_log_triggering_count_by_records_total",
                                             "Batches flushed because max records was reached", labels)
        self.by_size: Counter = r.counter(f"{prefix}_batched_log_triggering_count_by_size_total",
                                          "Batches flushed because max size was reached", labels)
        self.by_delay: Counter = r.counter(f"{prefix}_batched_log_triggering_count_by_delay_time_total",
                                           "Batches flushed because max delay passed", labels)
        self.by_force: Counter = r.counter(f"{prefix}_batched_log_triggering_count_by_force_total",
                                           "Batches flushed by force", labels)


__all__ = ["BatchedLogMetrics", "BrokerMetrics", "CollectingRegistry", "Counter", "Gauge", "TopicCounters"]
