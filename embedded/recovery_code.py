"""The failure-handling code of the embedded cluster, named in one place.

Why a list: a chaos run that never reaches a replay or a clean-up path cannot find its
bugs, and nothing in a verdict says so. `txnbench chaos --coverage` runs every embedded
process under coverage.py and reports, for exactly the functions below, which of their
lines and branches the run reached (orchestrator/coverage.py); the chaos scenario is
judged by that figure (issue #29: at least 90% across the three paths). A function added
to a recovery path belongs here, or the figure stops meaning what it says.

Each area lists `(file, qualified name)` pairs: the file relative to the repository, the
function as `Class.method` or `function`. `tests/unit/test_recovery_code.py` checks that
every one exists. Branches guarded by a planted bug (`planted_bugs.on(...)`) are left out of
the measurement: with no bug switched on they cannot run.

Only code a process of the cluster calls belongs here: `LedgerClient.recover_ledger` (fence,
then close) is the ledger client's API for tools and tests, and no broker calls it (a managed
ledger taking over fences with `fence`, which `LedgerBook.fence` stands for), so it is not listed.

This module is plain data; it imports nothing and nothing in the cluster imports it.
"""

from __future__ import annotations

#: area -> the functions that implement it
RECOVERY_CODE: dict[str, tuple[tuple[str, str], ...]] = {
    "log replay": (
        ("embedded/broker/v4/coordinator.py", "TransactionCoordinator.load"),
        ("embedded/broker/v4/coordinator_state.py", "CoordinatorState.replay"),
        ("embedded/broker/v4/record_log.py", "RecordLog.replay"),
        ("embedded/broker/v4/coordinator_service.py", "V4CoordinatorService._load"),
        ("embedded/broker/v4/coordinator_service.py", "V4CoordinatorService._loaded"),
        ("embedded/ledger/recovery.py", "recover"),
        ("embedded/ledger/recovery.py", "_replay_segment"),
        ("embedded/ledger/book.py", "LedgerBook.replay"),
        ("embedded/ledger/book.py", "LedgerBook.replay_entry"),
        ("embedded/metadata/durable.py", "DurableStore.recover"),
    ),
    "snapshot restore": (
        ("embedded/broker/v4/buffer.py", "TopicTransactionBuffer.recover"),
        ("embedded/broker/v4/buffer.py", "TopicTransactionBuffer._replay_after"),
        ("embedded/broker/v4/buffer_state.py", "BufferState.restore"),
        ("embedded/broker/v4/buffer_state.py", "BufferState.replay"),
        ("embedded/metadata/durable.py", "DurableStore._newest_snapshot"),
        ("embedded/metadata/snapshot.py", "read_snapshot"),
    ),
    "pending-ack replay": (
        ("embedded/broker/v4/pending_ack.py", "PendingAckHandleImpl.recover"),
        ("embedded/broker/v4/pending_ack.py", "PendingAckHandleImpl._replay"),
        ("embedded/broker/v5/txn/pending_ack.py", "MetadataPendingAckStore.recover"),
    ),
    "v5 recovery": (
        ("embedded/broker/v5/txn/buffer.py", "MetadataTransactionBuffer.recover"),
        ("embedded/broker/v5/txn/buffer.py", "MetadataTransactionBuffer._cleanup_quietly"),
        ("embedded/broker/v5/txn/visibility.py", "SegmentVisibility.recovered"),
        ("embedded/broker/v5/txn/visibility.py", "SegmentVisibility.recovered_aborted"),
        ("embedded/broker/v5/txn/visibility.py", "SegmentVisibility.finish_recovery"),
        ("embedded/broker/v5/txn/coordinator.py", "TransactionCoordinatorV5._on_change"),
        ("embedded/broker/v5/txn/participant.py", "Participant._reconcile_loop"),
        ("embedded/broker/v5/txn/events.py", "EventFeed.catch_up"),
        ("embedded/broker/v5/txn/events.py", "EventFeed._on_resync"),
    ),
    "fencing and takeover": (
        ("embedded/broker/managed_ledger/ledger.py", "ManagedLedger._fence"),
        ("embedded/broker/managed_ledger/ledger.py", "ManagedLedger._ledger_failed"),
        ("embedded/broker/managed_ledger/cursor.py", "ManagedCursor._on_fenced"),
        ("embedded/broker/topic.py", "PersistentTopic._on_fenced"),
        ("embedded/broker/v4/coordinator_service.py", "V4CoordinatorService._fenced"),
        ("embedded/broker/v4/coordinator_service.py", "V4CoordinatorService._release_fenced"),
        ("embedded/broker/v4/coordinator_service.py", "V4CoordinatorService.on_released"),
        ("embedded/broker/v4/coordinator_service.py", "V4CoordinatorService.unload"),
        ("embedded/ledger/book.py", "LedgerBook.fence"),
    ),
    "timeout sweep": (
        ("embedded/broker/v4/coordinator.py", "TransactionCoordinator._sweep_loop"),
        ("embedded/broker/v4/coordinator_state.py", "CoordinatorState.expired"),
        ("embedded/broker/v5/txn/coordinator.py", "TransactionCoordinatorV5._sweep_loop"),
        ("embedded/broker/v5/txn/coordinator.py", "TransactionCoordinatorV5.sweep_timeouts"),
        ("embedded/metadata/server.py", "MetadataService._expire_due"),
    ),
    "garbage collection": (
        ("embedded/broker/v5/txn/coordinator.py", "TransactionCoordinatorV5.sweep_gc"),
        ("embedded/broker/v5/txn/coordinator.py", "TransactionCoordinatorV5._gc_one"),
    ),
    "sealed and split segments": (
        ("embedded/broker/managed_ledger/ledger.py", "ManagedLedger.terminate"),
        ("embedded/broker/topic.py", "PersistentTopic.terminate"),
        ("embedded/broker/v5/scalable/controller.py", "ScalableTopicController.split"),
        ("embedded/broker/v5/scalable/controller.py", "ScalableTopicController.merge"),
        ("embedded/broker/v5/scalable/controller.py", "ScalableTopicController._reshape"),
        ("embedded/broker/v5/scalable/controller.py", "ScalableTopicController.terminate_segment"),
        ("embedded/broker/v5/scalable/controller.py", "ScalableTopicController._terminate_local"),
        ("embedded/broker/v5/scalable/layout.py", "SegmentInfo.sealed"),
        ("embedded/broker/v5/scalable/layout.py", "SegmentLayout.split"),
        ("embedded/broker/v5/scalable/layout.py", "SegmentLayout.merge"),
    ),
}

#: a line starting a block that only a planted bug runs: not measured (coverage.py exclusion regex)
PLANTED_BUG_BRANCH = r"planted_bugs\.on\("
