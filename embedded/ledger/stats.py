"""The ledger store's metrics, under BookKeeper's names where the analysis relies on them.

The first four are the names docs/architecture.md fixes (as a bookie exposes them);
the per-kind counters let the analysis split I/O per transaction into data,
coordinator-log, pending-ack, cursor and snapshot writes. The rest help explain a
benchmark: append latency (accept to fsync), records per fsync, cache hit rate,
journal size and reclaimed bytes, recovery time, ledgers by state.
"""

from __future__ import annotations

from embedded.ledger.model import LedgerKind, LedgerState
from harness.metrics import Registry

LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)


class LedgerStats:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.add_entry = registry.counter("bookkeeper_server_ADD_ENTRY_count", "Entries appended and acknowledged")
        self.read_entry = registry.counter("bookkeeper_server_READ_ENTRY_count", "Entries read")
        self.write_bytes = registry.counter("bookie_WRITE_BYTES", "Entry bytes appended")
        self.read_bytes = registry.counter("bookie_READ_BYTES", "Entry bytes read")
        self.journal_syncs = registry.counter("bookie_journal_JOURNAL_SYNC_count", "Journal fsyncs")
        self.entries_by_kind = registry.counter("txnbench_ledger_entries_total", "Appends by ledger kind", ["kind"])
        self.bytes_by_kind = registry.counter("txnbench_ledger_bytes_total", "Appended bytes by ledger kind", ["kind"])
        for kind in LedgerKind:
            self.entries_by_kind.inc(0, kind=kind.value)
            self.bytes_by_kind.inc(0, kind=kind.value)
        self.requests = registry.counter("txnbench_ledger_requests_total",
                                         "Requests by operation and result (ok or error code)", ["op", "result"])
        self.append_latency = registry.histogram("txnbench_ledger_append_latency_seconds",
                                                 "Append latency from acceptance to durable (journal fsync)",
                                                 LATENCY_BUCKETS_S)
        self.batch_records = registry.histogram("txnbench_ledger_journal_batch_records",
                                                "Records per journal write and fsync (group commit)", BATCH_BUCKETS)
        self.journal_bytes = registry.counter("txnbench_ledger_journal_bytes_total",
                                              "Bytes written to the journal, framing included")
        self.journal_segments = registry.gauge("txnbench_ledger_journal_segments", "Journal segment files")
        self.journal_disk_bytes = registry.gauge("txnbench_ledger_journal_disk_bytes", "Bytes in journal segments")
        self.reclaimed_bytes = registry.counter("txnbench_ledger_reclaimed_bytes_total",
                                                "Journal bytes freed by removing segments of deleted ledgers")
        self.cache_hits = registry.counter("txnbench_ledger_read_cache_hits_total", "Entries read from the cache")
        self.cache_misses = registry.counter("txnbench_ledger_read_cache_misses_total", "Entries read from disk")
        self.ledgers = registry.gauge("txnbench_ledger_ledgers", "Ledgers by state", ["state"])
        self.open_ledgers = registry.gauge("txnbench_ledger_open_ledgers", "Ledgers open for appends")
        self.recovery_seconds = registry.gauge("txnbench_ledger_recovery_seconds",
                                               "Time the last start-up spent replaying the journal")
        self.recovered_entries = registry.gauge("txnbench_ledger_recovered_entries",
                                                "Entries replayed at the last start-up")

    def set_ledger_counts(self, counts: dict[LedgerState, int]) -> None:
        for state, count in counts.items():
            self.ledgers.set(count, state=state.value)
        self.open_ledgers.set(counts[LedgerState.OPEN])
