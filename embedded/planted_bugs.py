"""Planted bugs: deliberate, off-by-default faults in the embedded cluster (BUGGIFY).

Theory of operation. A chaos harness is trusted only once it has caught bugs, so the
embedded cluster carries a catalogue of small, realistic mistakes of the kind real
transaction code has had (each cited from apache/pulsar's tracker, BookKeeper's, or the
PIP-473 review). Each lives in the real code path as a guarded branch:

    if planted_bugs.on(V4_REPLAY_KEEPS_LAST_PARTITIONS):
        ...   # DELIBERATE FAULT (txnbench self-test): the mistake
    else:
        ...   # the correct code

A bug is switched on by a setting named after it (`txnbenchBug...: true`), which every
process of the cluster receives (brokers in their settings, the stores in their
config's `planted_bugs`). They are **never** on by default, `txnbench run` refuses them
without `--allow-planted-bugs`, `bench`, `chaos` and `sweep` refuse them always
(`orchestrator.planted.refuse_planted_bugs`), and every manifest and report names the ones that
were on. `txnbench selftest` (orchestrator/selftest.py) runs each with the scenario meant to
catch it and reports caught or missed.

The active set is process-wide, like FoundationDB's BUGGIFY: a planted bug is a
property of the process under test, not of one object, and a branch must cost nothing
when nothing is planted (`on()` is a frozenset lookup).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PREFIX = "txnbenchBug"
"""Every planted bug's setting starts with this; nothing else may."""


class Component(enum.Enum):
    """Which process carries the bug (and so which process must be told it is on)."""

    BROKER = "broker"
    LEDGER = "ledger"
    METADATA = "metadata"


@dataclass(frozen=True)
class PlantedBug:
    """One catalogue entry: what the mistake is, where it lives, where it comes from, what catches it."""

    id: str                      # the setting that switches it on; starts with PREFIX
    paths: tuple[str, ...]       # the transaction paths it lives on; the self-test runs it on the first
    component: Component
    where: str                   # file and function of the guarded branch
    title: str
    description: str
    citations: tuple[str, ...]   # apache/pulsar issues and PRs (or other public sources) of the bug class
    scenario: str                # the scenario meant to catch it (scenarios/<name>.yaml)
    catches: tuple[str, ...]     # the anomaly classes it is expected to produce
    needs: str = ""              # what the catching scenario relies on, when it is not obvious


V4_REPLAY_KEEPS_LAST_PARTITIONS = "txnbenchBugV4ReplayKeepsLastPartitions"
V4_BATCHED_REPLAY_FIRST_RECORD = "txnbenchBugV4BatchedReplayFirstRecordOnly"
V4_PENDING_ACK_REPLAY_DROPS_OPEN = "txnbenchBugV4PendingAckReplayDropsOpenAcks"
V4_FANOUT_TIMEOUT_IS_DONE = "txnbenchBugV4FanoutTimeoutCountsAsDone"
V4_PENDING_ACK_FORGETS_EARLY = "txnbenchBugV4PendingAckForgetsBeforeCursorFlush"
V4_BUFFER_REPLAY_ABORT_AS_COMMIT = "txnbenchBugV4BufferReplayAbortAsCommit"
V5_RECOVERY_FORGETS_ABORTED = "txnbenchBugV5RecoveryForgetsAborted"
V5_SEALED_SEGMENT_STOPS_LISTENING = "txnbenchBugV5SealedSegmentStopsListening"
V5_SPLIT_CHILD_SKIPS_FIRST = "txnbenchBugV5SplitChildSkipsFirstEntry"
V5_PARTICIPANT_LOCAL_TIMEOUT = "txnbenchBugV5ParticipantAbortsOnLocalTimeout"
V5_GC_RETENTION_UNITS = "txnbenchBugV5GcRetentionInMillis"
V5_FANOUT_COMMITS_SUBSCRIPTIONS = "txnbenchBugV5FanoutCommitsSubscriptions"
LEDGER_ACK_BEFORE_JOURNAL = "txnbenchBugLedgerAckBeforeJournal"
LEDGER_TRIM_OFF_BY_ONE = "txnbenchBugTrimConsumedOffByOne"
METADATA_ACK_BEFORE_WAL = "txnbenchBugMetadataAckBeforeWal"

CATALOGUE: tuple[PlantedBug, ...] = (
    PlantedBug(
        V4_REPLAY_KEEPS_LAST_PARTITIONS, ("v4",), Component.BROKER,
        "embedded/broker/v4/coordinator_state.py: CoordinatorState.replay",
        "v4 coordinator log replay forgets a transaction's earlier partitions",
        "Replaying ADD_PARTITION assigns the record's partitions instead of adding them, so a "
        "transaction that registered two topics in two records comes back from recovery knowing "
        "only the last. Its commit then writes markers to that topic only; the other topic's "
        "messages stay pending for ever.",
        ("apache/pulsar#20150 (a committed transaction rolls back to OPEN after a restart)",
         "apache/pulsar#8723 (transaction log replay not handled right)",
         "apache/pulsar#18923 (TC recovery fails in handleCommittingAndAbortingTransaction)"),
        "selftest-v4-recovery", ("partial-txn", "lost-write"),
        "coordinator recoveries while transactions are open: repeated kills of the coordinator's broker"),
    PlantedBug(
        V4_BATCHED_REPLAY_FIRST_RECORD, ("v4-batched",), Component.BROKER,
        "embedded/broker/v4/record_log.py: RecordLog.replay",
        "PIP-160 replay reads only the first record of a batched entry",
        "Recovery treats a batched log entry as one record: the coordinator log and the "
        "pending-ack logs lose every record after the first of each batch, so transactions "
        "being committed come back without their decision or their partitions, and pending "
        "acknowledgements vanish.",
        ("apache/pulsar#16428 and #16685 (PIP-160: readers of batched transaction logs)",
         "apache/pulsar#16707 (PIP-160: pending-ack log store with batched entries)",
         "../shared/reference/pip-160-batched-txn-log.txt"),
        "selftest-v4-recovery", ("partial-txn", "lost-write", "lost-ack"),
        "recoveries of batched logs under concurrency (batches hold several records)"),
    PlantedBug(
        V4_PENDING_ACK_REPLAY_DROPS_OPEN, ("v4",), Component.BROKER,
        "embedded/broker/v4/pending_ack.py: PendingAckHandleImpl._replay",
        "v4 pending-ack log replay drops the acks of transactions still open",
        "The replay filter is inverted: it holds only acks whose position the cursor already "
        "acknowledged, i.e. none of the open transactions' acks. After a subscription moves, "
        "messages acknowledged inside an open transaction are delivered again, and the "
        "transaction's commit finds nothing to apply.",
        ("apache/pulsar#16240 (pending-ack log replay skips records of unfinished transactions)",
         "apache/pulsar#8881 (pending-ack persistence and replay)"),
        "selftest-v4-recovery", ("lost-ack", "ctp-duplicate"),
        "subscriptions reloaded (their broker killed) while acks are held in open transactions"),
    PlantedBug(
        V4_FANOUT_TIMEOUT_IS_DONE, ("v4",), Component.BROKER,
        "embedded/broker/v4/fanout.py: EndTxnFanOut._one",
        "v4 end-txn marker fan-out gives up on a participant that does not answer",
        "A participant whose owner does not answer END_TXN_ON_PARTITION in time is counted "
        "as done (as if its topic did not exist) instead of being retried, so the coordinator "
        "logs COMMITTED while that partition never gets its marker.",
        ("apache/pulsar#13792 (END_TXN response timeout handling in the TC)",
         "apache/pulsar#19200 (timed-out transactions never end after a restart)"),
        "selftest-v4-fanout", ("partial-txn", "lost-write"),
        "participants unreachable from the coordinator while transactions end: repeated "
        "broker-to-broker partitions longer than transactionBufferClientOperationTimeoutInMills"),
    PlantedBug(
        V4_PENDING_ACK_FORGETS_EARLY, ("v4",), Component.BROKER,
        "embedded/broker/v4/pending_ack.py: PendingAckHandleImpl._forget",
        "v4 deletes a committed transaction's pending-ack records before its acks are durable",
        "After a commit the pending-ack records are deleted at once instead of after the "
        "subscription's cursor persisted the acknowledgements; the cursor persists at most once "
        "a second, so a broker crash in that window forgets acknowledgements the client was "
        "told are committed (an acknowledgement before durability).",
        ("apache/pulsar#14974 (pending-ack store mark-delete handling)",
         "apache/pulsar#4849 (acknowledged messages redelivered after a broker failure)"),
        "selftest-v4-recovery", ("lost-ack",),
        "kills of a subscription's broker within a second of commits"),
    PlantedBug(
        V4_BUFFER_REPLAY_ABORT_AS_COMMIT, ("v4",), Component.BROKER,
        "embedded/broker/v4/buffer_state.py: BufferState.replay",
        "v4 transaction-buffer recovery reads abort markers as commits",
        "Replaying the topic after the last snapshot, the buffer recognises a marker but not "
        "its type, so transactions aborted since the snapshot are not added to the aborted "
        "set: after the topic moves, their messages are delivered.",
        ("apache/pulsar#19814 / #19815 (consumers receive aborted messages on replay reads)",
         "apache/pulsar#9490 (transaction-buffer snapshot of aborted transactions)"),
        "selftest-v4-recovery", ("aborted-read",),
        "topic reloads (broker kills) with aborts in the last snapshot interval"),
    PlantedBug(
        V5_RECOVERY_FORGETS_ABORTED, ("v5",), Component.BROKER,
        "embedded/broker/v5/txn/buffer.py: MetadataTransactionBuffer.recover",
        "v5 segment recovery forgets the durable aborted records",
        "Recovery of a segment rebuilds visibility from the op records only and skips the "
        "segment's aborted records, so transactions aborted and cleaned up before the segment "
        "moved become visible after it moves.",
        ("../shared/reference/pip-473-metadata-driven-transactions.txt (recovery reads the aborted records)",
         "apache/pulsar#19814 (aborted messages delivered after a reload, v4's version of the class)"),
        "selftest-v5-recovery", ("aborted-read",),
        "segment reloads (broker kills) after aborts"),
    PlantedBug(
        V5_SEALED_SEGMENT_STOPS_LISTENING, ("v5",), Component.BROKER,
        "embedded/broker/v5/txn/buffer.py: MetadataTransactionBuffer.apply",
        "v5 sealed segment stops materializing decisions",
        "A segment that has been sealed (terminated, or a split/merge parent) drops decision "
        "events instead of applying them, on the idea that a sealed segment has nothing left "
        "to do; transactions that wrote to it before the seal stay invisible there.",
        ("../shared/reference/pip-473-metadata-driven-transactions.txt (seal must not block the end of a transaction)",
         "apache/pulsar#19200 (transactions that never end)"),
        "selftest-v5-segments", ("partial-txn", "lost-write"),
        "seals, splits and merges of transactionally written segments, each at a commit; warm final "
        "reads (a reload recovers the segment from its op records and heals it)"),
    PlantedBug(
        V5_SPLIT_CHILD_SKIPS_FIRST, ("v5",), Component.BROKER,
        "embedded/broker/v5/scalable/controller.py: ScalableTopicController._create_local",
        "v5 split/merge children's subscriptions skip their first message",
        "The child segment's subscriptions are created at its first position instead of just "
        "before it, so the first message written to each child is never delivered to them.",
        ("apache/pulsar#24855 (cursor positions around ledger boundaries)",
         "../shared/reference/pip-473-metadata-driven-transactions.txt (children must deliver what follows the parent)"),
        "selftest-v5-segments", ("undelivered",),
        "splits and merges, and the `undelivered` check (completeness per subscription)"),
    PlantedBug(
        V5_PARTICIPANT_LOCAL_TIMEOUT, ("v5",), Component.BROKER,
        "embedded/broker/v5/txn/participant.py: Participant._reconcile_loop",
        "v5 participant aborts a transaction on its own timeout",
        "The safety net that re-reads the headers of transactions tracked too long assumes "
        "such a transaction was aborted instead of reading its header, so a commit that takes "
        "longer than the sweep interval (a coordinator failover) is aborted on some "
        "participants and committed on others.",
        ("apache/pulsar#14370 (ending a transaction in the TIMEOUT state)",
         "apache/pulsar#19200 (timeout handling after restarts)"),
        "selftest-v5-timeouts", ("partial-txn", "lost-write"),
        "transactions held open longer than the participants' reconcile interval (hold_s, a coordinator kill)"),
    PlantedBug(
        V5_GC_RETENTION_UNITS, ("v5",), Component.BROKER,
        "embedded/broker/v5/txn/coordinator.py: TransactionCoordinatorV5.sweep_gc",
        "v5 GC deletes too early (retention read as milliseconds)",
        "The GC cutoff subtracts the retention in seconds from a time in milliseconds, so a "
        "120 s window becomes 120 ms and a participant that materializes a decision later "
        "than that finds its op records force-deleted: the PIP-473 review's race, made likely.",
        ("../shared/reference/pip-473-review-thread.txt ([BUG] GC orphan-cleanup window vs. slow participant)",
         "apache/pulsar#24855 (deleting while a reader still needs it)"),
        "selftest-v5-gc", ("lost-ack",),
        "a participant slower than the (broken) window: latency on one broker's metadata link, with the GC "
        "force-deleting leftover op records (Pulsar 5.0's re-drive would only re-publish)"),
    PlantedBug(
        V5_FANOUT_COMMITS_SUBSCRIPTIONS, ("v5",), Component.BROKER,
        "embedded/broker/v5/txn/coordinator.py: TransactionCoordinatorV5.publish",
        "v5 decision fan-out sends COMMITTED to every subscription participant",
        "The subscription events are built with the commit decision whatever was decided, so "
        "the acks of aborted transactions are applied instead of released.",
        ("apache/pulsar#13792 (end-txn fan-out to participants)",
         "../shared/reference/pip-473-metadata-driven-transactions.txt (one event per participant)"),
        "selftest-v5-recovery", ("stuck-ack",),
        "aborted transactions that acknowledged messages (the workload's abort ratio)"),
    PlantedBug(
        LEDGER_ACK_BEFORE_JOURNAL, ("v4",), Component.LEDGER,
        "embedded/ledger/store.py: LedgerStore.append",
        "ledger store acknowledges an append before it is in the journal",
        "The store answers an append as soon as the record is queued for group commit, "
        "before it is written and fsynced; a crash of the store loses entries the brokers "
        "were told are durable.",
        ("apache/bookkeeper#889 and #754 (acknowledging before the journal's fsync)",
         "apache/bookkeeper#3329 (entries lost after kill -9 although fsync was on)"),
        "selftest-stores", ("lost-write", "partial-txn"),
        "kills of the ledger store under load, then cold reads (entries cached by brokers hide the loss)"),
    PlantedBug(
        LEDGER_TRIM_OFF_BY_ONE, ("v4",), Component.BROKER,
        "embedded/broker/managed_ledger/ledger.py: ManagedLedger._trim",
        "consumed-ledger trimming deletes one ledger too many",
        "Trimming compares ledger ids with <= instead of <, so the ledger holding the slowest "
        "cursor's mark-delete position is deleted with the fully consumed ones: the pending-ack "
        "logs lose the records of transactions still open.",
        ("apache/pulsar#24855 (ledger trimming deletes ledgers cursors still point to)",
         "apache/pulsar#20898 (discontinuous ledger deletion)"),
        "selftest-v4-trim", ("lost-ack", "ctp-duplicate"),
        "pending-ack logs that roll over often (10-entry ledgers) while transactions hold their acks for "
        "seconds (ack_hold_s), and subscriptions that reload meanwhile (topic unloads, broker restarts)"),
    PlantedBug(
        METADATA_ACK_BEFORE_WAL, ("v5",), Component.METADATA,
        "embedded/metadata/durable.py: DurableStore.wait_durable",
        "metadata store acknowledges a write before its WAL record is written",
        "`wait_durable` returns at once instead of waiting for the group commit, so a crash "
        "of the store loses header CASes and op records that brokers were told succeeded.",
        ("apache/bookkeeper#889 (acknowledging before the journal is forced)",
         "apache/pulsar#20150 (a committed transaction going back to OPEN after a restart)"),
        "selftest-v5-metadata", ("partial-txn", "lost-write", "lost-ack"),
        "kills of the metadata store under v5 load, many of them (the window is one group commit)"),
)

BY_ID: dict[str, PlantedBug] = {bug.id: bug for bug in CATALOGUE}

_active: frozenset[str] = frozenset()


class UnknownPlantedBug(ValueError):
    """A setting starts with the planted-bug prefix but names no catalogued bug."""


def is_planted_setting(key: str) -> bool:
    return key.startswith(PREFIX)


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def enabled_in(settings: Mapping[str, Any]) -> list[str]:
    """The planted bugs `settings` switch on, in catalogue order; an unknown bug name is an error."""
    unknown = sorted(k for k in settings if is_planted_setting(k) and k not in BY_ID)
    if unknown:
        raise UnknownPlantedBug(f"setting {unknown[0]} names no planted bug; the catalogue has "
                                f"{', '.join(BY_ID)} (embedded/planted_bugs.py)")
    return [bug.id for bug in CATALOGUE if _truthy(settings.get(bug.id, False))]


def activate(bug_ids: Iterable[str]) -> frozenset[str]:
    """Switch these bugs on in this process (and every other one off); returns the active set."""
    global _active
    ids = frozenset(bug_ids)
    unknown = sorted(ids - BY_ID.keys())
    if unknown:
        raise UnknownPlantedBug(f"{unknown[0]} names no planted bug")
    _active = ids
    return _active


def active() -> frozenset[str]:
    return _active


def on(bug_id: str) -> bool:
    """Whether the planted bug `bug_id` is switched on in this process (False unless a self-test set it)."""
    return bug_id in _active
