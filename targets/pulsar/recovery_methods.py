"""Pulsar's transaction recovery methods, named in one place.

Why a list: a chaos run that never enters a replay, a takeover or a timeout sweep cannot find
its bugs, and a verdict does not say so. With `--coverage` on the pulsar target, every
broker and the bookie run under JaCoCo (targets/pulsar/jacoco.py), and the run's report
(targets/pulsar/coverage_report.py, orchestrator/pulsar_coverage.py) shows each method below
as reached or not, the faults that were active when it was first reached, and its line and
branch coverage. The chaos scenario is judged by how many of them it enters (issue #41: at
least 80% of 5.0.1's, across v4, v4-batched and v5).

An entry is a class (binary name, `$` for nested and anonymous classes) and a method name:
every overload counts, and so do the lambdas javac compiles out of its body
(`lambda$<method>$<n>`, where most of Pulsar's asynchronous code runs). "Reached" means JaCoCo
saw one instruction of the method or of one of those lambdas run.

What belongs here: code that runs because something failed or moved (a broker died, a
topic or a coordinator changed owners, a log had to be replayed, a transaction timed out, a
write was fenced) or that clears up after it (garbage collection of finished state). Not
the commit path every transaction takes. `paths` says which transaction paths can reach an
entry (PIP-160's batched writer runs only on v4-batched; v5's code only on v5); `since`/`until`
the releases that have it (`tests/unit/pulsar/test_recovery_methods.py` checks every entry
against each release's class files when they are cached; the report says "not in this
release" for one that is missing). `unreachable` says why a method cannot be reached from
outside the broker, by any fault or workload (it then still shows, apart, and does not
count): the figure is of what a harness can reach. `needs` says, for one the shipped chaos
scenario does not reach, what would (the report shows it beside the method).

This module is plain data; it imports nothing of the project.
"""

from __future__ import annotations

from dataclasses import dataclass

V4_PATHS = ("v4", "v4-batched")
BATCHED = ("v4-batched",)
V5 = ("v5",)


@dataclass(frozen=True)
class RecoveryMethod:
    area: str
    cls: str                      # binary name: org.apache.pulsar...Outer$Inner
    method: str                   # every overload of this name, and its lambdas
    paths: tuple[str, ...]
    what: str                     # what recovery it does, in a few words
    since: str = ""               # first release with it ("" = every release listed)
    until: str = ""               # last release with it
    unreachable: str = ""         # why no fault or workload from outside the broker reaches it
    needs: str = ""               # what would reach it, when the shipped chaos scenario does not

    @property
    def key(self) -> str:
        return f"{self.cls}.{self.method}"

    @property
    def internal_class(self) -> str:
        return self.cls.replace(".", "/")

    @property
    def simple(self) -> str:
        """`MLTransactionLogImpl$TransactionLogReplayer.start`: the name a report shows."""
        return f"{self.cls.rsplit('.', 1)[-1]}.{self.method}"

    def in_release(self, version: str) -> bool:
        return (not self.since or _v(version) >= _v(self.since)) and (not self.until or _v(version) <= _v(self.until))


def _v(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("-")[0].split(".") if p.isdigit())


_TC = "org.apache.pulsar.transaction.coordinator.impl"
_SVC = "org.apache.pulsar.broker.TransactionMetadataStoreService"
_TB = "org.apache.pulsar.broker.transaction.buffer.impl"
_PA = "org.apache.pulsar.broker.transaction.pendingack.impl"
_V5TC = "org.apache.pulsar.broker.transaction.coordinator.v5.TransactionCoordinatorV5"
_V5MD = "org.apache.pulsar.broker.transaction.metadata.TxnMetadataStore"

COORDINATOR = "coordinator log replay"
DECISIONS = "applying decisions after a restart"
TIMEOUT = "timeout"
BUFFER = "transaction buffer recovery and snapshots"
PENDING_ACK = "pending-ack replay"
FENCING = "fencing and takeover"
BATCHED_WRITER = "PIP-160 batched writer"
GC = "garbage collection"
V5_PARTICIPANTS = "v5 participant recovery"

RECOVERY_METHODS: tuple[RecoveryMethod, ...] = (
    # ---- v4: the transaction coordinator and its log (PIP-31) ----
    RecoveryMethod(COORDINATOR, _SVC, "handleTcClientConnect", V4_PATHS,
                   "a broker that now owns a coordinator's assign partition loads it"),
    RecoveryMethod(COORDINATOR, _SVC, "openTransactionMetadataStore", V4_PATHS,
                   "opens the coordinator's log and its store"),
    RecoveryMethod(COORDINATOR, f"{_TC}.MLTransactionMetadataStore", "init", V4_PATHS,
                   "replays the transaction log into the coordinator's state"),
    RecoveryMethod(COORDINATOR, f"{_TC}.MLTransactionMetadataStore$1", "handleMetadataEntry", V4_PATHS,
                   "applies one replayed log record (new, add partition, status change)"),
    RecoveryMethod(COORDINATOR, f"{_TC}.MLTransactionMetadataStore$1", "replayComplete", V4_PATHS,
                   "ends the replay: the coordinator serves again"),
    RecoveryMethod(COORDINATOR, f"{_TC}.MLTransactionLogImpl", "initialize", V4_PATHS,
                   "opens the log's managed ledger and cursor (fencing the previous owner's)"),
    RecoveryMethod(COORDINATOR, f"{_TC}.MLTransactionLogImpl", "replayAsync", V4_PATHS,
                   "starts reading the log from its cursor"),
    RecoveryMethod(COORDINATOR, f"{_TC}.MLTransactionLogImpl$TransactionLogReplayer", "start", V4_PATHS,
                   "reads every log entry and hands its records to the store"),
    RecoveryMethod(COORDINATOR, f"{_TC}.MLTransactionLogImpl", "deserializeEntry", V4_PATHS,
                   "decodes a replayed entry, a PIP-160 batch included", since="2.11.0"),
    RecoveryMethod(COORDINATOR, f"{_TC}.MLTransactionSequenceIdGenerator", "onManagedLedgerLastLedgerInitialize",
                   V4_PATHS, "recovers the next transaction id from the log's last entry"),
    RecoveryMethod(DECISIONS, "org.apache.pulsar.broker.transaction.recover.TransactionRecoverTrackerImpl",
                   "updateTransactionStatus", V4_PATHS, "sorts a replayed transaction by its last status"),
    RecoveryMethod(DECISIONS, "org.apache.pulsar.broker.transaction.recover.TransactionRecoverTrackerImpl",
                   "handleOpenStatusTransaction", V4_PATHS, "keeps a replayed open transaction for its timeout"),
    RecoveryMethod(DECISIONS, "org.apache.pulsar.broker.transaction.recover.TransactionRecoverTrackerImpl",
                   "appendOpenTransactionToTimeoutTracker", V4_PATHS,
                   "re-arms the timeouts of the open transactions the replay found"),
    RecoveryMethod(DECISIONS, "org.apache.pulsar.broker.transaction.recover.TransactionRecoverTrackerImpl",
                   "handleCommittingAndAbortingTransaction", V4_PATHS,
                   "ends again the transactions the previous owner left COMMITTING or ABORTING"),
    RecoveryMethod(TIMEOUT, "org.apache.pulsar.broker.transaction.timeout.TransactionTimeoutTrackerImpl", "run",
                   V4_PATHS, "the coordinator's timeout sweep"),
    RecoveryMethod(TIMEOUT, "org.apache.pulsar.broker.transaction.timeout.TransactionTimeoutTrackerImpl",
                   "replayAddTransaction", V4_PATHS, "a replayed open transaction's timeout"),
    RecoveryMethod(TIMEOUT, _SVC, "endTransactionForTimeout", V4_PATHS, "aborts a transaction that timed out"),
    RecoveryMethod(FENCING, _SVC, "removeTransactionMetadataStore", V4_PATHS,
                   "unloads a coordinator whose assign partition moved away"),
    RecoveryMethod(FENCING, _SVC, "handleOpFail", V4_PATHS,
                   "a coordinator whose log write failed (fenced) is unloaded to be loaded again"),
    # ---- v4: the transaction buffer and its snapshots ----
    RecoveryMethod(BUFFER, f"{_TB}.TopicTransactionBuffer", "recover", V4_PATHS,
                   "a topic's buffer recovers when the topic loads (after a move or a restart)"),
    RecoveryMethod(BUFFER, f"{_TB}.TopicTransactionBuffer$TopicTransactionBufferRecover", "run", V4_PATHS,
                   "reads the snapshot, then replays the topic after it"),
    RecoveryMethod(BUFFER, f"{_TB}.TopicTransactionBuffer$1", "handleTxnEntry", V4_PATHS,
                   "rebuilds the open transactions from a replayed transactional entry"),
    RecoveryMethod(BUFFER, f"{_TB}.TopicTransactionBuffer$1", "recoverComplete", V4_PATHS,
                   "ends the buffer's recovery: the topic serves transactional reads again"),
    RecoveryMethod(BUFFER, f"{_TB}.TopicTransactionBuffer$1", "recoverExceptionally", V4_PATHS,
                   "the buffer's recovery failed (its ledger or the snapshot topic unreachable)"),
    RecoveryMethod(BUFFER, f"{_TB}.TopicTransactionBuffer", "updateMaxReadPositionAfterRecovery", V4_PATHS,
                   "puts the read horizon back after a recovery", since="5.0.1"),
    RecoveryMethod(BUFFER, f"{_TB}.AbstractSnapshotAbortedTxnProcessor", "recoverFromSnapshot", V4_PATHS,
                   "restores the aborted transactions from the buffer's snapshot", since="5.0.1"),
    RecoveryMethod(BUFFER, f"{_TB}.SingleSnapshotAbortedTxnProcessorImpl", "doRecoverFromSnapshot", V4_PATHS,
                   "reads the newest snapshot of the topic from the snapshot system topic", since="5.0.1"),
    RecoveryMethod(BUFFER, f"{_TB}.SingleSnapshotAbortedTxnProcessorImpl", "recoverFromSnapshot", V4_PATHS,
                   "reads the newest snapshot of the topic from the snapshot system topic", since="3.0.0",
                   until="4.0.8"),
    RecoveryMethod(BUFFER, f"{_TB}.SingleSnapshotAbortedTxnProcessorImpl", "handleSnapshot", V4_PATHS,
                   "applies a snapshot read back: aborted transactions and their positions", since="3.0.0"),
    RecoveryMethod(FENCING, f"{_TB}.TopicTransactionBuffer", "checkAppendMarkerException", V4_PATHS,
                   "a commit or abort marker refused by a fenced ledger: the topic is unloaded"),
    RecoveryMethod(DECISIONS, f"{_TB}.TopicTransactionBuffer", "handleLowWaterMark", V4_PATHS,
                   "aborts buffered transactions under the coordinator's low watermark (missed aborts)"),
    RecoveryMethod(GC, f"{_TB}.SingleSnapshotAbortedTxnProcessorImpl", "trimExpiredAbortedTxns", V4_PATHS,
                   "forgets aborted transactions whose ledgers were trimmed", since="3.0.0"),
    # ---- v4: pending acks and their store ----
    RecoveryMethod(PENDING_ACK, f"{_PA}.PendingAckHandleImpl", "initPendingAckStore", V4_PATHS,
                   "a subscription's pending acks open their store and replay it"),
    RecoveryMethod(PENDING_ACK, f"{_PA}.MLPendingAckStore", "replayAsync", V4_PATHS,
                   "starts replaying the pending-ack log"),
    RecoveryMethod(PENDING_ACK, f"{_PA}.MLPendingAckStore$PendingAckReplay", "run", V4_PATHS,
                   "reads every pending-ack log entry"),
    RecoveryMethod(PENDING_ACK, f"{_PA}.MLPendingAckReplyCallBack", "handleMetadataEntry", V4_PATHS,
                   "applies one replayed ack, commit or abort"),
    RecoveryMethod(PENDING_ACK, f"{_PA}.MLPendingAckReplyCallBack", "replayComplete", V4_PATHS,
                   "ends the replay: the subscription takes acks again"),
    RecoveryMethod(PENDING_ACK, f"{_PA}.MLPendingAckReplyCallBack", "replayFailed", V4_PATHS,
                   "the replay failed (its ledger unreachable)"),
    RecoveryMethod(PENDING_ACK, f"{_PA}.PendingAckHandleImpl", "handleIndividualAckRecover", V4_PATHS,
                   "restores a replayed individual transactional ack"),
    RecoveryMethod(PENDING_ACK, f"{_PA}.PendingAckHandleImpl", "handleCumulativeAckRecover", V4_PATHS,
                   "restores a replayed cumulative transactional ack",
                   needs="a transactional cumulative acknowledgement (on an Exclusive or Failover subscription) "
                         "replayed by the subscription's next owner: the harness's workloads acknowledge one "
                         "message at a time on Shared subscriptions, and its checks would have to read cumulative "
                         "transactional acks first"),
    RecoveryMethod(PENDING_ACK, f"{_PA}.PendingAckHandleImpl", "handleCacheRequest", V4_PATHS,
                   "serves the acks, commits and aborts that waited for the replay"),
    RecoveryMethod(PENDING_ACK, f"{_PA}.PendingAckHandleImpl", "exceptionHandleFuture", V4_PATHS,
                   "the pending-ack handle failed to recover: its requests are refused"),
    RecoveryMethod(DECISIONS, f"{_PA}.PendingAckHandleImpl", "handleLowWaterMark", V4_PATHS,
                   "aborts pending acks under the coordinator's low watermark (missed aborts)"),
    RecoveryMethod(GC, f"{_PA}.MLPendingAckStore", "clearUselessLogData", V4_PATHS,
                   "trims the pending-ack log behind the subscription"),
    # ---- v4-batched: PIP-160's batched writer ----
    RecoveryMethod(BATCHED_WRITER, f"{_TC}.TxnLogBufferedWriter", "failureCallbackByContextAndRecycle", BATCHED,
                   "a batch's write failed: every record in it fails", since="2.11.0"),
    RecoveryMethod(BATCHED_WRITER, f"{_TC}.TxnLogBufferedWriter$BookKeeperBatchedWriteCallback", "addFailed",
                   BATCHED, "the ledger refused a batch (fenced, closed, unreachable)", since="3.0.0"),
    RecoveryMethod(BATCHED_WRITER, f"{_TC}.TxnLogBufferedWriter", "failureCallbackByArgs", BATCHED,
                   "a record could not join a batch (writer closed or fenced)", since="2.11.0"),
    RecoveryMethod(BATCHED_WRITER, f"{_TC}.TxnLogBufferedWriter", "close", BATCHED,
                   "the writer closes with its log (unload, takeover), failing what waits", since="2.11.0"),
    # ---- v5 (PIP-473): the metadata-driven coordinator ----
    RecoveryMethod(FENCING, _V5TC, "onElectionStateChange", V5,
                   "a coordinator's leadership changed: this broker takes it or lets it go", since="5.0.1"),
    RecoveryMethod(TIMEOUT, _V5TC, "sweepTimeouts", V5, "aborts open transactions past their deadline",
                   since="5.0.1"),
    RecoveryMethod(GC, _V5TC, "sweepGc", V5, "collects finalized transactions past their retention",
                   since="5.0.1"),
    RecoveryMethod(GC, _V5TC, "gcFinalized", V5, "one state's finalized transactions", since="5.0.1"),
    RecoveryMethod(GC, _V5TC, "gcOneTxn", V5,
                   "re-drives a collected transaction's decision to participants still holding its ops",
                   since="5.0.1"),
    RecoveryMethod(TIMEOUT, _V5MD, "listOpenByDeadlineRange", V5, "finds the open transactions past a deadline",
                   since="5.0.1"),
    RecoveryMethod(GC, _V5MD, "listFinalizedByStateAndTimeRange", V5,
                   "finds the finalized transactions past retention", since="5.0.1"),
    RecoveryMethod(GC, _V5MD, "deleteHeader", V5, "deletes a collected transaction's header", since="5.0.1"),
    RecoveryMethod(GC, _V5MD, "deleteAbortedTxn", V5, "forgets an aborted transaction's record on a segment",
                   since="5.0.1",
                   needs="an aborted transaction whose entries the segment's retention trimmed away (the buffer's "
                         "GC sweep, pruneTrimmedAbortedTxns, forgets records before the ledger's first position): "
                         "txnbench's namespaces keep every ledger (infinite retention) so that the final reads see "
                         "everything, so nothing is ever trimmed"),
    # ---- v5: participants (MetadataTransactionBuffer, MetadataPendingAckStore) ----
    RecoveryMethod(V5_PARTICIPANTS, f"{_TB}.MetadataTransactionBuffer", "recover", V5,
                   "a segment's buffer rebuilds its open and aborted transactions from the store", since="5.0.1"),
    RecoveryMethod(V5_PARTICIPANTS, f"{_TB}.MetadataTransactionBuffer", "applyHeaderForRecovery", V5,
                   "applies the decision a recovered transaction's header holds", since="5.0.1"),
    RecoveryMethod(V5_PARTICIPANTS, _V5MD, "scanAbortedTxns", V5,
                   "reads a segment's aborted-transaction records back", since="5.0.1"),
    RecoveryMethod(V5_PARTICIPANTS, _V5MD, "getSegmentWatermark", V5, "reads a segment's watermark back",
                   since="5.0.1"),
    RecoveryMethod(V5_PARTICIPANTS, _V5MD, "listWritesBySegment", V5,
                   "lists the transactional writes a segment holds", since="5.0.1"),
    RecoveryMethod(V5_PARTICIPANTS, _V5MD, "listAcksBySegmentSubscription", V5,
                   "lists the transactional acks a subscription holds", since="5.0.1"),
    RecoveryMethod(DECISIONS, f"{_TB}.MetadataTransactionBuffer", "triggerReconcile", V5,
                   "the safety net: reads the headers of transactions whose decision event never came",
                   since="5.0.1"),
    RecoveryMethod(DECISIONS, f"{_TB}.MetadataTransactionBuffer", "applyTerminalNow", V5,
                   "applies a decision to the segment (visibility, aborted record, op clean-up)",
                   since="5.0.1"),
    RecoveryMethod(V5_PARTICIPANTS, f"{_PA}.MetadataPendingAckStore", "replayAsync", V5,
                   "a subscription's pending acks rebuilt from the store", since="5.0.1"),
    RecoveryMethod(DECISIONS, f"{_PA}.MetadataPendingAckStore", "triggerReconcile", V5,
                   "the pending acks' safety net: reads headers whose decision event never came",
                   since="5.0.1"),
    RecoveryMethod(DECISIONS, f"{_PA}.MetadataPendingAckStore", "applyTerminal", V5,
                   "applies a decision to the pending acks", since="5.0.1"),
    RecoveryMethod(GC, f"{_TB}.MetadataTransactionBuffer", "pruneTrimmedAbortedTxns", V5,
                   "forgets aborted records of trimmed ledgers", since="5.0.1"),
    RecoveryMethod(GC, f"{_TB}.MetadataTransactionBuffer", "scheduleAbortedGc", V5,
                   "schedules that pruning", since="5.0.1"),
    # segment lifecycle where it touches transactions: a segment deleted takes its transaction state along
    RecoveryMethod(GC, _V5MD, "deleteAllSegmentState", V5,
                   "a deleted segment's watermark and aborted records go with it", since="5.0.1",
                   unreachable="in 5.0.1 no broker code calls it (a later release calls it when a scalable "
                               "topic is deleted); nothing from outside the broker reaches it"),
)


#: The classes whose coverage a report lists (JaCoCo's HTML and the per-class table): Pulsar's
#: transaction code, as prefixes of internal class names. Generated protobuf classes are left out.
TRANSACTION_CODE: tuple[str, ...] = (
    "org/apache/pulsar/transaction/coordinator/",
    "org/apache/pulsar/broker/transaction/",
    "org/apache/pulsar/broker/TransactionMetadataStoreService",
    "org/apache/pulsar/broker/service/TransactionBufferSnapshotServiceFactory",
    "org/apache/pulsar/broker/service/SystemTopicTxnBufferSnapshotService",
    "org/apache/pulsar/broker/systopic/TransactionBufferSnapshotBaseSystemTopicClient",
)
EXCLUDED_CODE: tuple[str, ...] = ("/proto/",)
#: The jars that hold it (a release's lib folder: <name>-<version>.jar)
TRANSACTION_JARS: tuple[str, ...] = ("pulsar-broker", "pulsar-transaction-coordinator")

#: Which part of the transaction code a class is, for the per-class table (first match wins)
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("org/apache/pulsar/broker/transaction/coordinator/v5/", "v5 coordinator"),
    ("org/apache/pulsar/broker/transaction/metadata/", "v5 metadata store"),
    ("org/apache/pulsar/broker/transaction/buffer/impl/MetadataTransactionBuffer", "v5 buffer"),
    ("org/apache/pulsar/broker/transaction/pendingack/impl/MetadataPendingAckStore", "v5 pending acks"),
    ("org/apache/pulsar/transaction/coordinator/impl/TxnLogBufferedWriter", "PIP-160 batched writer"),
    ("org/apache/pulsar/transaction/coordinator/impl/TxnBatchedPositionImpl", "PIP-160 batched writer"),
    ("org/apache/pulsar/transaction/coordinator/", "v4 coordinator and log"),
    ("org/apache/pulsar/broker/TransactionMetadataStoreService", "v4 coordinator and log"),
    ("org/apache/pulsar/broker/transaction/recover/", "v4 coordinator and log"),
    ("org/apache/pulsar/broker/transaction/timeout/", "v4 coordinator and log"),
    ("org/apache/pulsar/broker/transaction/buffer/", "v4 buffer and snapshots"),
    ("org/apache/pulsar/broker/service/", "v4 buffer and snapshots"),
    ("org/apache/pulsar/broker/systopic/", "v4 buffer and snapshots"),
    ("org/apache/pulsar/broker/transaction/pendingack/", "v4 pending acks and store"),
    ("org/apache/pulsar/broker/transaction/", "shared"),
)


#: The paths whose runs load each component's classes (a run's own figure counts only these)
COMPONENT_PATHS: dict[str, tuple[str, ...]] = {
    "v4 coordinator and log": V4_PATHS,
    "v4 buffer and snapshots": V4_PATHS,
    "v4 pending acks and store": (*V4_PATHS, *V5),       # PendingAckHandleImpl serves v5's store too
    "PIP-160 batched writer": BATCHED,
    "v5 coordinator": V5,
    "v5 metadata store": V5,
    "v5 buffer": V5,
    "v5 pending acks": V5,
    "shared": (*V4_PATHS, *V5),
}


def for_release(version: str, paths: tuple[str, ...] | None = None) -> list[RecoveryMethod]:
    """The listed methods a release has, of some paths (all paths: None)."""
    return [m for m in RECOVERY_METHODS
            if m.in_release(version) and (paths is None or any(p in m.paths for p in paths))]


def is_transaction_code(internal_name: str) -> bool:
    return internal_name.startswith(TRANSACTION_CODE) and not any(x in internal_name for x in EXCLUDED_CODE)


def component(internal_name: str) -> str:
    return next((label for prefix, label in COMPONENTS if internal_name.startswith(prefix)), "other")
