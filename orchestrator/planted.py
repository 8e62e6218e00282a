"""The planted bugs' catalogue, and the guard that keeps them out of benchmarks.

The bugs themselves are guarded branches in the embedded cluster, switched by
embedded/planted_bugs.py; `CATALOGUE` says for each what the mistake is, where it lives,
where the class of bug comes from, and which scenario and anomaly classes catch it
(`txnbench selftest --list`, docs/selftest.md).

Planted bugs exist to prove the checker can catch bugs (`txnbench selftest`). They must
never leak into a benchmark or a chaos run that someone reads as a verdict on Pulsar's
designs, so every entry point that starts a cluster asks `refuse_planted_bugs` first:
`bench`, `chaos` and `sweep` refuse them always; `run` and `cluster up` only with
`--allow-planted-bugs`; the self-test passes `allowed=True`. Whatever was allowed is
written to the manifest (`planted_bugs`) and named at the top of every report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from embedded import planted_bugs
from harness.errors import ConfigError


class Component(Enum):
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


CATALOGUE: tuple[PlantedBug, ...] = (
    PlantedBug(
        planted_bugs.V4_REPLAY_KEEPS_LAST_PARTITIONS, ("v4",), Component.BROKER,
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
        planted_bugs.V4_BATCHED_REPLAY_FIRST_RECORD, ("v4-batched",), Component.BROKER,
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
        planted_bugs.V4_PENDING_ACK_REPLAY_DROPS_OPEN, ("v4",), Component.BROKER,
        "embedded/broker/v4/pending_ack.py: PendingAckHandleImpl._replay",
        "v4 pending-ack log replay drops the acks of transactions still open",
        "The replay filter is inverted: it holds only acks whose position the cursor already "
        "acknowledged, i.e. none of the open transactions' acks. After a subscription moves, "
        "messages acknowledged inside an open transaction are delivered again, and the "
        "transaction's commit finds nothing to apply.",
        ("apache/pulsar#16240 (pending-ack log replay skips records of unfinished transactions)",
         "apache/pulsar#8881 (pending-ack persistence and replay)"),
        "selftest-v4-trim", ("lost-ack", "ctp-duplicate"),
        "subscriptions reloaded (topic unloads, broker restarts) while acks are held in open "
        "transactions for seconds (`ack_hold_s`); under selftest-v4-recovery's kills alone the "
        "acks were rarely pending at a replay (2-4 lost acks, missed in "
        "20261126-085033-selftest-catalogue)"),
    PlantedBug(
        planted_bugs.V4_FANOUT_TIMEOUT_IS_DONE, ("v4",), Component.BROKER,
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
        planted_bugs.V4_PENDING_ACK_FORGETS_EARLY, ("v4",), Component.BROKER,
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
        planted_bugs.V4_BUFFER_REPLAY_ABORT_AS_COMMIT, ("v4",), Component.BROKER,
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
        planted_bugs.V5_RECOVERY_FORGETS_ABORTED, ("v5",), Component.BROKER,
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
        planted_bugs.V5_SEALED_SEGMENT_STOPS_LISTENING, ("v5",), Component.BROKER,
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
        planted_bugs.V5_SPLIT_CHILD_SKIPS_FIRST, ("v5",), Component.BROKER,
        "embedded/broker/v5/scalable/controller.py: ScalableTopicController._create_local",
        "v5 split/merge children's subscriptions skip their first message",
        "The child segment's subscriptions are created at its first position instead of just "
        "before it, so the first message written to each child is never delivered to them.",
        ("apache/pulsar#24855 (cursor positions around ledger boundaries)",
         "../shared/reference/pip-473-metadata-driven-transactions.txt (children must deliver what follows the parent)"),
        "selftest-v5-segments", ("undelivered",),
        "splits and merges, and the `undelivered` check (completeness per subscription)"),
    PlantedBug(
        planted_bugs.V5_PARTICIPANT_LOCAL_TIMEOUT, ("v5",), Component.BROKER,
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
        planted_bugs.V5_GC_RETENTION_UNITS, ("v5",), Component.BROKER,
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
        planted_bugs.V5_FANOUT_COMMITS_SUBSCRIPTIONS, ("v5",), Component.BROKER,
        "embedded/broker/v5/txn/coordinator.py: TransactionCoordinatorV5.publish",
        "v5 decision fan-out sends COMMITTED to every subscription participant",
        "The subscription events are built with the commit decision whatever was decided, so "
        "the acks of aborted transactions are applied instead of released.",
        ("apache/pulsar#13792 (end-txn fan-out to participants)",
         "../shared/reference/pip-473-metadata-driven-transactions.txt (one event per participant)"),
        "selftest-v5-recovery", ("stuck-ack",),
        "aborted transactions that acknowledged messages (the workload's abort ratio)"),
    PlantedBug(
        planted_bugs.LEDGER_ACK_BEFORE_JOURNAL, ("v4",), Component.LEDGER,
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
        planted_bugs.LEDGER_TRIM_OFF_BY_ONE, ("v4",), Component.BROKER,
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
        planted_bugs.METADATA_ACK_BEFORE_WAL, ("v5",), Component.METADATA,
        "embedded/metadata/durable.py: DurableStore.wait_durable",
        "metadata store acknowledges a write before its WAL record is written",
        "`wait_durable` returns at once instead of waiting for the group commit, so a crash "
        "of the store loses header CASes and op records that brokers were told succeeded.",
        ("apache/bookkeeper#889 (acknowledging before the journal is forced)",
         "apache/pulsar#20150 (a committed transaction going back to OPEN after a restart)"),
        "selftest-v5-metadata", ("partial-txn", "lost-write", "lost-ack"),
        "kills of the metadata store under v5 load, many of them (the window is one group commit)"),
    PlantedBug(
        planted_bugs.V4_COMMIT_STALLS_AFTER_MARKERS, ("v4",), Component.BROKER,
        "embedded/broker/v4/coordinator.py: TransactionCoordinator._complete",
        "v4 coordinator leaves a commit COMMITTING after its markers were written",
        "One commit in 50 (by sequence number, so a recovered coordinator repeats it) whose "
        "participants all took their commit markers (so none of them is a terminated topic) is "
        "never finished: COMMITTED is not logged and the client is not answered, so the commit "
        "stalls until the client gives up and the coordinator still holds the transaction "
        "COMMITTING after its timeout. A terminate leaves transactions in the same state; the bug "
        "is caught only if that expectation does not absorb stalls of transactions the terminate "
        "never touched.",
        ("apache/pulsar#23550 (transactions stuck committing -> committed, never finished)",
         "apache/pulsar#19200 (transactions that never end)"),
        "chaos", ("stalled-commit", "unresolved-txn"),
        "chaos.yaml itself: its terminate makes stalled-commit and unresolved-txn expected on v4, but only "
        "for transactions that sent to the terminated topic and were open when it was terminated "
        "(analysis/verdicts.py); the drain's txn-state readings (unresolved-txn)"),
    PlantedBug(
        planted_bugs.V4_COMMIT_ACKS_WHOLE_BATCH, ("v4",), Component.BROKER,
        "embedded/broker/v4/pending_ack.py: PendingAckHandleImpl._apply",
        "v4 commit acknowledges the whole batch of a batch-index ack",
        "A committed transaction that acknowledged some messages of a batch has the whole entry "
        "acknowledged on the cursor, not only its indexes: the batch's other messages are never "
        "delivered again, and a transaction that already holds one of them has its ack refused as "
        "already acknowledged and aborts, its input left to nobody. Only batched inputs reach it: "
        "without them every ack is of a whole entry.",
        ("apache/pulsar#16032 (a commit leaves the cursor with another transaction's batch ack set)",
         "apache/pulsar#8037 (transactional acks of a batch carry their batch index)",
         "apache/pulsar#14327 (batch-index acks of an aborted transaction redelivered wrongly)"),
        "selftest-v4-batches", ("stuck-ack",),
        "inputs fed in batches (workload.feed_batch) and transactions acking part of a batch"),
    PlantedBug(
        planted_bugs.FAILOVER_TAKEOVER_BEFORE_REWIND, ("v4",), Component.BROKER,
        "embedded/broker/dispatcher.py: SingleActiveDispatcher._pick_active",
        "Failover hand-over sends the new consumer later entries before the rewind",
        "When a Failover subscription's active consumer changes, the dispatcher goes on reading for "
        "the new one from its read position, past the entries the old one was sent and never "
        "processed, and rewinds to the mark-delete position only a second later: a cumulative ack "
        "of the new consumer's first messages acknowledges those entries, and nobody receives them; "
        "the late rewind sends it again what it holds unacknowledged, so a pipeline can process an "
        "input twice. Real Pulsar does this (2.10.5 to 5.0.1: docs/findings/failover-takeover-skips-unacked.md).",
        ("docs/findings/failover-takeover-skips-unacked.md (PersistentDispatcherSingleActiveConsumer "
         "reads for the new active consumer before its delayed rewind)",
         "apache/pulsar#807 (the delayed rewind on an active consumer change)",
         "apache/pulsar#15189 (a Failover subscription sends one message to two consumers)"),
        "selftest-failover", ("undelivered", "ctp-loss", "ctp-duplicate"),
        "Failover subscriptions acked cumulatively (the verifiers', ctp_cumulative_users) with consumers "
        "in two load processes, one of them killed while entries are in flight"),
    PlantedBug(
        planted_bugs.V4_REPLAYED_ABORT_CLEARS_ANY_CUMULATIVE, ("v4",), Component.BROKER,
        "embedded/broker/v4/pending_ack.py: PendingAckHandleImpl.end_txn and _replay",
        "a refused transaction's abort, replayed after a reload, erases another's pending cumulative ack",
        "The abort of a transaction that holds nothing on a subscription (its cumulative ack was refused "
        "because another transaction holds one) is logged as a cumulative ABORT record, and the replay of "
        "that record after the topic moves clears the pending cumulative ack whoever holds it. The holder's "
        "commit then applies nothing and is answered OK: its messages are delivered again and consumed "
        "twice. Real Pulsar does this (2.10.5 to 5.0.1: "
        "docs/findings/v4-pending-cumulative-ack-erased-by-other-abort.md).",
        ("docs/findings/v4-pending-cumulative-ack-erased-by-other-abort.md (PendingAckHandleImpl.handleAbort "
         "ignores the transaction id)",
         "apache/pulsar#8881 (pending-ack persistence and replay)"),
        "selftest-v4-cumulative", ("lost-ack", "ctp-duplicate"),
        "a Failover input acked cumulatively whose holders commit late (timeout_commit_ratio) while the same "
        "user's next transactions are refused and aborted, and that input's topic unloaded every 1.5 s"),
    PlantedBug(
        planted_bugs.V5_NO_CATCH_UP_AFTER_RESYNC, ("v5",), Component.BROKER,
        "embedded/broker/v5/txn/events.py: EventFeed._on_resync; participant.py: Participant.start_reconciling",
        "v5 participants never list the decision events missed while their broker's metadata link was down",
        "A segment or subscription learns of decisions only from notifications of new event records; when "
        "its broker's connection to the metadata store comes back, nothing lists what was published "
        "meanwhile and no safety net reads the headers of its open transactions. A decision made then by "
        "another broker's coordinator waits for the next event on that participant or the GC sweep's "
        "re-publication: committed messages stay invisible, aborted acks keep their messages. Real Pulsar "
        "5.0.1 does this (docs/findings/v5-decision-missed-at-session-loss.md).",
        ("docs/findings/v5-decision-missed-at-session-loss.md (subscribeSequence; no reconcile on "
         "SessionReestablished)",
         "../shared/reference/pip-473-metadata-driven-transactions.txt (participants learn decisions from events)"),
        "selftest-v5-session", ("lost-write",),
        "decisions made while the broker serving their segments is cut from the metadata store, and the load "
        "stopping during such a cut, so no later decision wakes those segments before the final reads"),
    PlantedBug(
        planted_bugs.SHARED_DISPATCH_KEEPS_ABORTED, ("v4", "v4-batched", "v5"), Component.BROKER,
        "embedded/broker/dispatcher.py: Dispatcher._filter",
        "a Shared subscription's dispatcher delivers the messages of aborted transactions",
        "The Shared dispatcher skips transaction markers but not the entries of aborted transactions "
        "(the single-active dispatcher filters both), so consumers of a Shared subscription on a topic "
        "written in transactions are given aborted messages. Pulsar had this on the Shared dispatcher's "
        "replay reads; the model filters every read of a dispatcher alike, so the mistake is on all of "
        "the Shared dispatcher's reads. Only a run whose Shared subscriptions read transactional data "
        "can see it: before workload.feed_txn_ratio, chaos.yaml's Shared subscriptions read plain inputs.",
        ("apache/pulsar#19814 / #19815 (consumers of a Shared subscription receive aborted messages on "
         "replay reads)",
         "apache/pulsar#12500 (transaction messages filtered in the dispatcher by the transaction buffer)"),
        "selftest-shared-aborted", ("aborted-read",),
        "Shared subscriptions on topics written in transactions, some aborted: consume-transform-produce "
        "inputs fed in the feeders' transactions (workload.feed_txn_ratio)"),
    PlantedBug(
        planted_bugs.V4_RECOVERY_DROPS_EXPIRED_TIMEOUTS, ("v4", "v4-batched"), Component.BROKER,
        "embedded/broker/v4/coordinator.py: TransactionCoordinator.load",
        "a v4 coordinator that loads again drops the timeouts that passed while it was down",
        "Every transaction OPEN in the replayed log and already past its timeout when the coordinator "
        "becomes ready is taken out of the timeout sweeper's reach: it stays OPEN until the coordinator "
        "loads again, and its partitions' read horizons stay before its first message. Modelled on a real "
        "bug of Pulsar 2.10.4-2.10.5 that txnbench's chaos found (there a race the timer wins under load; "
        "here every time).",
        ("apache/pulsar#19200 (timed-out transactions never end after a broker restart)",
         "apache/pulsar#19201 (the fix; its 2.10 backport kept the replay's own tracker start)",
         "docs/findings/historical/v4-timeout-lost-after-coordinator-recovery.md"),
        "chaos", ("unresolved-txn", "lost-write"),
        "transactions whose client will not end them (killed writers, commits that fail while their "
        "coordinator is down) and whose timeout passes while that coordinator's broker is down or loading: "
        "chaos.yaml's client kills and coordinator kills; the drain's txn-state readings"),
)

BY_ID: dict[str, PlantedBug] = {bug.id: bug for bug in CATALOGUE}


def planted_in(settings: Mapping[str, Any], source: str = "cluster.settings") -> list[str]:
    """The planted bugs `settings` switch on (catalogue order); a misspelt one is a ConfigError."""
    try:
        return planted_bugs.enabled_in(settings)
    except planted_bugs.UnknownPlantedBug as err:
        raise ConfigError(source, "", str(err), "use an id from `txnbench selftest --list`") from None


def refuse_planted_bugs(settings: Mapping[str, Any], command: str, *, allowed: bool = False) -> list[str]:
    """The planted bugs switched on, or a ConfigError when `command` may not run with them."""
    planted = planted_in(settings, f"txnbench {command}")
    if planted and not allowed:
        fix = ("planted bugs are deliberate faults for `txnbench selftest` only; remove the setting"
               if command in ("bench", "chaos", "sweep") else
               "planted bugs are deliberate faults; pass --allow-planted-bugs to run with them on purpose")
        raise ConfigError(f"txnbench {command}", planted[0],
                          f"is a planted bug (a deliberate fault) and {command} refuses it", fix)
    return planted


def banner(planted: list[str] | tuple[str, ...]) -> str:
    """One line that says plainly that a run had deliberate faults on (empty when none)."""
    if not planted:
        return ""
    return ("PLANTED BUGS ON (deliberate faults of the txnbench self-test; this run says nothing about "
            f"Pulsar): {', '.join(planted)}")
