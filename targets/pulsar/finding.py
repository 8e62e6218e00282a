"""`txnbench finding NAME`: a finding about Pulsar reproduced with Pulsar's own Java client.

Why: a finding in `docs/findings/` is only as good as its reproduction, and one that runs
txnbench's client and checker could be a bug of ours. Here the reproduction is a Java program
of ours (`targets/pulsar/repro/*.java`, compiled like the transaction check, `txn_check.py`)
on Pulsar's Java client and the admin REST API; it decides in each try whether the bug showed,
by what it read back, and prints JSON lines (`repro/Out.java`). No txnbench client and no
checker is in the loop: txnbench only starts a fresh `pulsar`-target cluster at the finding's
release, answers the program's requests to restart or kill a broker, or to cut its link to the
metadata store for a while (steps a client cannot take; run by hand, the program asks the person),
and keeps the output and the brokers' logs.

`FINDINGS` is the registry: per finding (the stem of its `docs/findings/` file) its release,
path, broker settings, program class and sources, default tries, and the log lines worth
quoting. The verdict (`judge`) is read from the program's `try` lines: exit 1 when the bug
showed in any try, 0 when every try ran and it never did, 2 when it could not run (no try
finished, a set-up step failed, the cluster did not start, a tool is missing). A race gets
N tries and the rate. `txnbench finding` itself (both kinds: these and the tool findings of
`tool_finding.py`) is `finding_command.py`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any

from harness.errors import ConfigError, TxnbenchError
from harness.txn_paths import TxnPath

REPRO_SOURCES = Path(__file__).parent / "repro"
COMMON_SOURCES = ("Out.java", "Cli.java", "Admin.java", "Repro.java")
#: the transaction check's JSON lines, which repro/Out.java writes too
JSON_LINES = Path(__file__).parent / "txncheck" / "JsonLines.java"
FINDINGS_DOCS = Path(__file__).resolve().parents[2] / "docs" / "findings"
#: Exit statuses, as the issue asks: the bug shows, it does not, it could not run.
SHOWS, NOT_SHOWN, COULD_NOT_RUN = 1, 0, 2
SETUP_BUDGET_S = 300.0


@dataclass(frozen=True)
class Finding:
    """One finding's reproduction: what runs, on which release, and how to run it."""

    name: str                         # the stem of docs/findings/<name>.md
    release: str                      # the Pulsar release it was found on (its default)
    txn_path: TxnPath
    main_class: str                   # repro/<main_class>.java
    what: str                         # one line: the bug
    tries: int = 1                    # default; a race gets more
    race: bool = False
    try_timeout_s: float = 180.0
    brokers: int = 2
    settings: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    args: tuple[str, ...] = ()        # extra program arguments
    extra_sources: tuple[str, ...] = ()
    #: broker log lines that say what happened inside Pulsar (quoted after the run, not judged)
    log_signs: tuple[str, ...] = ()
    #: "historical": a bug of older releases that a later one fixed (docs/findings/historical/)
    folder: str = ""
    #: the file's stem when it is not `name` (one finding, two reproductions: a v4 and a v5 shape)
    doc_stem: str = ""
    #: stack frames of a thread that never returns: the brokers' threads are dumped (twice) before the
    #: cluster goes down and the threads holding one are quoted with their CPU time (thread_dumps.py)
    thread_signs: tuple[str, ...] = ()

    @property
    def doc(self) -> Path:
        return FINDINGS_DOCS / self.folder / f"{self.doc_stem or self.name}.md"

    def sources(self) -> list[Path]:
        return [JSON_LINES, *(REPRO_SOURCES / name for name in
                              (*COMMON_SOURCES, *self.extra_sources, f"{self.main_class}.java"))]


FINDINGS: dict[str, Finding] = {f.name: f for f in (
    Finding(
        name="v4-commit-marker-skipped-on-bundle-unload", release="4.0.8", txn_path=TxnPath.V4,
        main_class="V4CommitMarkerSkippedOnBundleUnload",
        what="a commit answered OK while a participant's bundle unloads never reaches that partition "
             "(TransactionBufferHandlerImpl.endTxn completes on BrokerMetadataException)",
        tries=5, race=True, try_timeout_s=240.0,
        log_signs=("endTxn error topic", "Successes to abort low water mark",
                   "is being unloaded")),
    # a try: P loaded on X with M1, X cut from ZooKeeper past its session, B takes P and is sent M2, B cut past its
    # session before X comes back (X acquires the vanished lock again), a fresh read of P; a control without B's cut
    Finding(
        name="stale-ledgers-after-ownership-reacquired", release="4.0.8", txn_path=TxnPath.V4,
        main_class="StaleLedgersAfterOwnershipReacquired",
        what="a broker whose metadata session expired while another took its bundle, and whose ownership node "
             "vanished with that broker's session too, acquires the bundle again on its new session and serves "
             "the topic from the ledger list it loaded before: acknowledged messages the other broker stored "
             "are given to no reader (ResourceLockImpl.revalidate re-creates a missing lock)",
        tries=1, try_timeout_s=300.0,
        settings=MappingProxyType({"metadataStoreSessionTimeoutMillis": 6000}),
        log_signs=("re-acquired missing lock", "Resource lock for", "SessionReestablished", "Fenced")),
    # a try: a transaction T whose coordinator N is on X sends to P and is never ended, X cut from ZooKeeper past its
    # session, B loads N, B cut past its session before X comes back (X acquires N's vanished lock again), T's state
    # past its timeout and a fresh read of P; a control without B's cut
    Finding(
        name="stale-coordinator-after-ownership-reacquired", release="5.0.1", txn_path=TxnPath.V4,
        main_class="StaleCoordinatorAfterOwnershipReacquired", doc_stem="stale-ledgers-after-ownership-reacquired",
        extra_sources=("TxnState.java",),
        what="a broker that acquires again the vanished lock of a transaction coordinator another broker loaded "
             "meanwhile keeps the coordinator it loaded before: its log writes fail on the fenced ledger and a "
             "transaction it holds is never aborted, its partitions' later messages unreadable",
        tries=1, try_timeout_s=400.0,
        settings=MappingProxyType({"metadataStoreSessionTimeoutMillis": 6000}),
        log_signs=("re-acquired missing lock", "End transaction fail", "Closing managed ledger", "Fenc")),
    # a try: a transaction on the coordinator of the broker X owning P, X cut from ZooKeeper past its session while
    # the other broker takes P, the commit; a control without the cut
    Finding(
        name="v4-commit-stuck-at-stale-owner", release="2.10.5", txn_path=TxnPath.V4,
        main_class="V4CommitStuckAtStaleOwner", folder="historical",
        what="after a broker's metadata session expired and was established again, its transaction coordinator "
             "sends END_TXN_ON_PARTITION to itself for a partition another broker took meanwhile (its metadata "
             "cache still names it the owner): the commit never ends and the partition's later messages stay "
             "unreadable (up to 3.2; apache/pulsar#23018)",
        tries=1, try_timeout_s=300.0,
        settings=MappingProxyType({"metadataStoreSessionTimeoutMillis": 6000}),
        log_signs=("not served by this instance", "Resource lock for", "SessionReestablished")),
    # a try: a transaction whose coordinator is on X sends to P on Y, Y's peer link cut, the commit, X killed and
    # started again, a second transaction to P, a fresh read of P; a control with the commit awaited before the kill
    Finding(
        name="v4-commit-stuck-after-coordinator-recovery", release="2.11.0", txn_path=TxnPath.V4,
        main_class="V4CommitStuckAfterCoordinatorRecovery", folder="historical",
        what="a coordinator that loads again with a transaction COMMITTING or ABORTING in its log fails to end it "
             "(\"Transaction coordinator with id N not found!\": the recovery ends it before the store is "
             "registered) and never tries again: the transaction stays COMMITTING and its partitions deliver "
             "nothing after it (2.11.0; apache/pulsar#19201)",
        tries=1, try_timeout_s=300.0,
        settings=MappingProxyType({"metadataStoreSessionTimeoutMillis": 6000}),
        log_signs=("End transaction fail!", "not found!", "Added new transaction meta store")),
    # a try: 8 abandoned transactions (5 s timeout), their first coordinator's broker killed and started again under
    # spinning threads, 40 s, each one's state, a second committed message per topic and a fresh read
    Finding(
        name="v4-timeout-lost-after-coordinator-recovery", release="2.10.5", txn_path=TxnPath.V4,
        main_class="V4TimeoutLostAfterCoordinatorRecovery", folder="historical", extra_sources=("TxnState.java",),
        what="a coordinator that loads again after an abandoned transaction's timeout passed can drop it from its "
             "timeout tracker (the replay starts the tracker before the store is registered; the timer finds "
             "\"Transaction coordinator with id N not found!\"): the transaction stays OPEN and its partitions "
             "deliver nothing after it (2.10.5)",
        tries=6, race=True, try_timeout_s=300.0,
        settings=MappingProxyType({"metadataStoreSessionTimeoutMillis": 6000}),
        log_signs=("End transaction fail!", "not found!", "Added new transaction meta store")),
    # a try: up to 30 rounds on fresh topics of 8 subscriptions; an unload, a commit, a second unload; new consumers
    Finding(
        name="v4-pending-ack-replay-spins-after-reload", release="3.0.0", txn_path=TxnPath.V4,
        main_class="V4PendingAckReplaySpinsAfterReload", folder="historical",
        what="a topic unloaded again while it loads leaves its subscription's pending-ack store open; the next load "
             "is given the same cursor, already read to its end, and its replay loops for ever on a transaction "
             "executor thread: the subscription is never answered again, nor any other pinned to that thread",
        try_timeout_s=900.0,   # one try (a stuck thread spoils the cluster for later ones) of up to 30 racing rounds
        log_signs=("pending ack state reply fail", "Transaction buffer recover fail", "already present on the connection",
                   "Failed to init transaction pending ack"),
        thread_signs=("MLPendingAckStore$PendingAckReplay.run",)),
    # a try: 6 rounds of 48 transactions of one message each on a fresh topic, a topic unload, all aborted at once
    Finding(
        name="v4-abort-marker-skipped-on-closing-topic", release="2.10.5", txn_path=TxnPath.V4,
        main_class="V4AbortMarkerSkippedOnClosingTopic",
        what="an abort whose END_TXN_ON_PARTITION reaches a closing topic is answered OK with no abort marker "
             "(TopicTransactionBuffer.abortTxn completes when the buffer is not Ready; PersistentTopic.close "
             "closes the buffer first): the next load replays the transaction as open and holds every later "
             "message behind it",
        tries=2, race=True, try_timeout_s=300.0,
        log_signs=("Successes to abort low water mark", "Unloading topic", "Topic closed")),
    # a try: per delay D a fresh topic, 48 transactions of one message each, an unload, every transaction ended,
    # a second unload D ms later (while the reload's buffer recovery reads the snapshot topic), the coordinators
    # unloaded where transactions stayed stuck; a control round without the second unload
    Finding(
        name="v4-end-abandoned-when-buffer-recovery-fails", release="2.10.5", txn_path=TxnPath.V4,
        main_class="V4EndAbandonedWhenBufferRecoveryFails", folder="historical", extra_sources=("TxnState.java",),
        what="an END_TXN_ON_PARTITION queued on a transaction buffer whose recovery fails because its topic was "
             "closed meanwhile is answered UnknownError (the raw ManagedLedgerException), which the coordinator "
             "does not retry: the transaction stays ABORTING or COMMITTING (its commit answered failed) until its "
             "coordinator is loaded again, and every later message of the partition stays behind it (2.10.5-4.0.8; "
             "5.0.1 answers ServiceNotReady, retried)",
        tries=3, race=True, try_timeout_s=480.0,
        log_signs=("End transaction fail", "has already been closed", "Transaction buffer recover fail")),
    # a try: four cases, each a topic of five messages whose third a transaction acks; its END_TXN_ON_SUBSCRIPTION
    # sent five times in one write (the coordinator's queued retries reaching the subscription together) or once
    Finding(
        name="v4-repeated-cumulative-end-fails", release="5.0.1", txn_path=TxnPath.V4,
        main_class="V4RepeatedCumulativeEndFails",
        what="an END_TXN_ON_SUBSCRIPTION that reaches a subscription again while an earlier one of the same end "
             "still runs fails with a NullPointerException (cumulativeAckOfTransaction) when the transaction acked "
             "cumulatively; answered UnknownError, which the coordinator does not retry: a retried commit or abort "
             "is abandoned, COMMITTING or ABORTING until the coordinator loads again, its client told it failed",
        tries=3, race=True, try_timeout_s=240.0,
        log_signs=("cumulativeAckOfTransaction", "pending ack store commit", "pending ack store abort",
                   "handleEndTxnOnSubscription fail")),
    # a try: three cases, each a topic whose subscription's pending-ack log holds BULK records of open
    # transactions; an unload, the ledger link slowed, a cumulative ack's transaction ended at once
    Finding(
        name="v4-repeated-cumulative-end-abandoned", release="4.0.8", txn_path=TxnPath.V4,
        main_class="V4RepeatedCumulativeEndAbandoned", doc_stem="v4-repeated-cumulative-end-fails",
        extra_sources=("TxnState.java",),
        what="the coordinator's half of v4-repeated-cumulative-end-fails: its retries of an END_TXN_ON_SUBSCRIPTION "
             "queue at a subscription replaying its pending-ack log and run together; the later fail with the "
             "NullPointerException and the end is abandoned, COMMITTING or ABORTING, its client told it failed",
        tries=1, try_timeout_s=900.0,
        log_signs=("cumulativeAckOfTransaction", "End transaction fail", "handleEndTxnOnSubscription fail")),
    # a try: 8 rounds of 24 messages acked in 6 transactions, an unload, the commits 200 ms apart, 3 s watched
    Finding(
        name="v4-committed-ack-redelivered-after-move", release="4.0.8", txn_path=TxnPath.V4,
        main_class="V4CommittedAckRedeliveredAfterMove",
        what="a message acked in a transaction whose commit returned OK is delivered again to its Shared "
             "subscription after the topic moved: the commits queued during the new owner's pending-ack replay "
             "run as the consumers attach, and the dispatcher sends entries they acknowledge (2.10.5 to 5.0.1)",
        tries=5, race=True, try_timeout_s=240.0,
        # 2.10-4.0 log "pending ack handle cache request success!", 5.0 "Pending ack handle cache request success"
        log_signs=("ack handle cache request success", "endTxn error topic", "low water mark success")),
    # a try: 6 rounds of a fresh topic whose Failover subscription has 5,250 pending-ack records (250 aborted
    # transactions of 20 cumulative acks), B's cumulative ack, an unload, B's commit, a second unload GAP ms later
    Finding(
        name="v4-commit-lost-when-pending-ack-replay-fails", release="5.0.1", txn_path=TxnPath.V4,
        main_class="V4CommitLostWhenPendingAckReplayFails",
        what="a commit that reaches a subscription whose pending-ack replay is cut short by an unload is answered "
             "OK without its commit mark (PendingAckHandleImpl.commitTxn has no Close case, exceptionHandleFuture "
             "runs queued requests on the partial state): the next owner keeps the cumulative ack pending and "
             "delivers the committed-acked messages again",
        tries=3, race=True, try_timeout_s=420.0,   # 4.0.8's set-up requests time out now and then (30 s each)
        log_signs=("PendingAckHandleImpl init fail", "cursor was closed while replaying",
                   "Failed to init transaction pending ack")),
    # a try: three topics of five messages, a Failover subscription each; A's cumulative ack, B refused and
    # aborted, an unload, A's commit; two controls (no B, no unload)
    Finding(
        name="v4-pending-cumulative-ack-erased-by-other-abort", release="5.0.1", txn_path=TxnPath.V4,
        main_class="V4PendingCumulativeAckErasedByOtherAbort",
        what="the abort of a transaction whose cumulative ack was refused is logged in the subscription's "
             "pending-ack log, and the log's replay (a topic reload) clears whichever transaction's cumulative "
             "ack is pending (PendingAckHandleImpl.handleAbort ignores the id): the holder's commit is then "
             "answered OK without acknowledging, its messages are delivered again and consumed a second time",
        try_timeout_s=240.0),
    # a try: three batches of two on a Shared subscription; per batch the holder's acks, then a sibling's ack
    Finding(
        name="v4-fully-held-batch-acked-twice", release="4.0.8", txn_path=TxnPath.V4,
        main_class="V4FullyHeldBatchAckedTwice",
        what="once the pending transactional acks of a batch cover every index, any transaction's ack of one "
             "of its messages is accepted: two committed transactions consume one message (the pending ack "
             "set is all zero, and the overlap check reads it as an empty bit set; 2.10.5 to 5.0.1)",
        try_timeout_s=180.0),
    # a try: three topics with a Failover subscription each; two cumulative transactional acks in turn
    Finding(
        name="v4-cumulative-ack-of-acked-batch-message", release="4.0.8", txn_path=TxnPath.V4,
        main_class="V4CumulativeAckOfAckedBatchMessage",
        what="a transactional cumulative ack of a batch message that an earlier committed cumulative ack already "
             "acknowledged is accepted and commits: one message consumed by two committed transactions (the "
             "mark-delete check compares entries only; the acked batch indexes are never consulted)",
        try_timeout_s=180.0),
    # a try: four topics with a Failover subscription each; a transaction's cumulative ack and an unload
    Finding(
        name="v4-cumulative-batch-ack-across-reload", release="2.10.5", txn_path=TxnPath.V4,
        main_class="V4CumulativeBatchAckAcrossReload",
        what="a transactional cumulative ack inside a batch acknowledges the whole batch once the "
             "subscription's pending acks are replayed (a topic reload): the replay drops its ack set, and the "
             "batch's other messages are never delivered (2.10.5 to 5.0.1)",
        try_timeout_s=240.0),
    # a try (~3 min): per case 8 rounds of a 5,000-message backlog; A is closed mid-stream, B takes over
    Finding(
        name="failover-takeover-skips-unacked", release="3.2.0", txn_path=TxnPath.V4,
        main_class="FailoverTakeoverSkipsUnacked",
        what="the consumer that takes over a Failover subscription is sent messages past those its "
             "predecessor was sent, before the delayed rewind: its cumulative ack acknowledges messages nobody "
             "received (no transaction involved)",
        tries=2, race=True, try_timeout_s=420.0),
    Finding(
        name="v5-cumulative-ack-of-acked-batch-message", release="5.0.1", txn_path=TxnPath.V5,
        main_class="V5CumulativeAckOfAckedBatchMessage", extra_sources=("V5Clients.java",),
        doc_stem="v4-cumulative-ack-of-acked-batch-message",
        what="the same on v5 segments with the v5 stream consumer: a transaction's cumulative ack of a batch "
             "message an earlier committed one acknowledged commits too (5.0.1: 4 of 4 tries)",
        try_timeout_s=180.0),
    Finding(
        name="v5-fully-held-batch-acked-twice", release="5.0.1", txn_path=TxnPath.V5,
        main_class="V5FullyHeldBatchAckedTwice", extra_sources=("V5Clients.java",),
        doc_stem="v4-fully-held-batch-acked-twice",
        what="the same on v5 segments (their subscriptions keep PendingAckHandleImpl; MetadataPendingAckStore "
             "is its store only): once pending acks cover a batch, another transaction's ack of it commits too",
        try_timeout_s=180.0),
    Finding(
        name="v5-stale-last-message-id", release="5.0.1", txn_path=TxnPath.V5, main_class="V5StaleLastMessageId",
        extra_sources=("V5Clients.java",),
        what="GET_LAST_MESSAGE_ID on a v5 segment keeps its first answer after transactional commits: it names a "
             "message before the last committed one, which the subscription delivered",
        try_timeout_s=120.0),
    Finding(
        name="v5-committed-acks-redelivered-after-crash", release="5.0.1", txn_path=TxnPath.V5,
        main_class="V5CommittedAcksRedelivered", extra_sources=("V5Clients.java",),
        what="acks of a committed v5 transaction are lost when the segment moves while it is open or its broker "
             "is killed right after the commit: the acked messages are delivered again",
        try_timeout_s=240.0, settings=MappingProxyType({"metadataStoreSessionTimeoutMillis": 6000}),
        log_signs=("Recovered cursor",)),
    # a try: 8 transactions over two one-segment topics, a broker cut from ZooKeeper past its session and every
    # commit 1 s into the cut, readers live after the timeout, every broker restarted, readers at once and later
    Finding(
        name="v5-commit-failed-at-session-expiry", release="5.0.1", txn_path=TxnPath.V5,
        main_class="V5CommitFailedAtSessionExpiry", extra_sources=("V5Clients.java",),
        doc_stem="v5-chaos-aborted-read",
        what="a v5 commit that fails because its coordinator's broker lost its metadata session is aborted, and a "
             "reader right after a restart is given its values (the recovery race); the probe says whether each "
             "transaction is all or nothing and the same on the live system (read twice) and after the restart",
        try_timeout_s=900.0, settings=MappingProxyType({"metadataStoreSessionTimeoutMillis": 6000}),
        log_signs=("SessionExpired", "v5 TC sweep", "Aborted-txn scan errored")),
    # a try: eight one-segment topics (on either broker), one broker cut from ZooKeeper for 10 s (in turn), every
    # commit 1 s into the cut, a nudge on odd topics, reads 30 s after the cut and every 20 s to 240 s
    Finding(
        name="v5-decision-missed-at-session-loss", release="5.0.1", txn_path=TxnPath.V5,
        main_class="V5DecisionMissedAtSessionLoss", extra_sources=("V5Clients.java",),
        what="a v5 decision published while the segment's broker is cut from the metadata store past its session "
             "is never heard by the segment: a commit answered OK stays invisible until the next decision on that "
             "segment or the coordinator's GC sweep publishes it again (retention 900 s by default)",
        try_timeout_s=900.0, settings=MappingProxyType({"metadataStoreSessionTimeoutMillis": 6000}),
        log_signs=("session has been re-established", "Reconcile encountered error", "v5 TC sweep")),
    # a try: six one-segment topics (either broker), 48 commits at once, a broker cut from ZooKeeper for 10 s 120 ms
    # after them (the brokers in turn; a try whose cut broker leads no coordinator is not judged), reads 30 s after
    # the cut and every 20 s to 200 s, a restart, a read 40 s after it
    Finding(
        name="v5-commit-unannounced-after-failed-fan-out", release="5.0.1", txn_path=TxnPath.V5,
        main_class="V5CommitUnannouncedAfterFailedFanOut", extra_sources=("V5Clients.java",), tries=4, race=True,
        what="a v5 commit whose coordinator wrote the COMMITTED header but failed to enumerate the participants "
             "(its broker lost the metadata session) is answered as failed and announced to no participant: "
             "segments on a healthy broker hold it, and every later transaction, until the GC sweep publishes it "
             "again (retention 900 s by default) or the segment is loaded again",
        try_timeout_s=900.0, settings=MappingProxyType({"metadataStoreSessionTimeoutMillis": 6000}),
        log_signs=("participant enumeration encountered an error", "session has been re-established")),
    # the load is bounded at 300 s in the program and the probes (+0 to +90 s, 45 s each at most) follow it
    Finding(
        name="v5-segment-visibility-lag", release="5.0.1", txn_path=TxnPath.V5, main_class="V5SegmentVisibilityLag",
        extra_sources=("V5Clients.java",),
        what="under concurrent transactions a v5 segment's committed messages turn readable tens of seconds after "
             "the commit: a new subscription right after the load misses them, later ones deliver them",
        try_timeout_s=600.0),
    Finding(
        name="v4-reader-stuck-at-transaction-marker", release="2.10.5", txn_path=TxnPath.V4,
        main_class="V4ReaderStuckAtTransactionMarker", folder="historical",
        what="after a transactional commit and abort, Reader.hasMessageAvailable() stays true while readNext gives "
             "nothing: GET_LAST_MESSAGE_ID names the last confirmed entry, a marker no reader is given (2.10-3.2; "
             "3.3 answers the last dispatchable position)",
        try_timeout_s=120.0),
    Finding(
        name="terminated-topic-unreadable-after-reload", release="2.10.5", txn_path=TxnPath.V4,
        main_class="TerminatedTopicUnreadableAfterReload", folder="historical",
        what="a terminated topic loaded again (unload, restart) keeps no current ledger: GET_LAST_MESSAGE_ID "
             "there throws a NullPointerException and the broker closes the client's connection, so "
             "Reader.hasMessageAvailable() fails (apache/pulsar#24063)",
        try_timeout_s=180.0, log_signs=('because "currentLedger" is null',)),
    # a try: 50 messages on each of two topics (ledgers of 20 entries), all acked but one, an unload, a fresh consumer
    Finding(
        name="acked-messages-redelivered-after-reload", release="3.2.0", txn_path=TxnPath.V4,
        main_class="AckedMessagesRedeliveredAfterReload", folder="historical",
        what="after a topic is loaded again, messages acknowledged (in committed transactions or plainly) behind "
             "an unacknowledged one are delivered again once it is acknowledged: the dispatcher re-reads them and "
             "filters after the read by the individually deleted ranges only, which that ack empties (up to 3.2; "
             "apache/pulsar#21739)",
        try_timeout_s=240.0,
        settings=MappingProxyType({"managedLedgerMaxEntriesPerLedger": 20,
                                   "managedLedgerMinLedgerRolloverTimeMinutes": 0,
                                   "managedLedgerCursorMaxEntriesPerLedger": 20})),
    # a try: two topics (a control), a committed, an aborted and a committed transaction, terminate, unload
    Finding(
        name="aborted-read-after-terminated-reload", release="2.11.0", txn_path=TxnPath.V4,
        main_class="AbortedReadAfterTerminatedReload",
        what="a terminated topic loaded again delivers messages of transactions aborted after the transaction "
             "buffer's last snapshot: TopicTransactionBufferRecover skips the replay when the last confirmed "
             "entry is <ledger>:-1, a terminated ledger's end (the release matrix's 2.11.0 aborted-read 4; "
             "2.11.0, 4.0.8, 5.0.1 reproduced)",
        try_timeout_s=180.0,
        settings=MappingProxyType({"transactionBufferSnapshotMinTimeInMillis": 600000}),
        log_signs=("Transaction buffer snapshot recover cursor close complete", "Topic terminated at")),
    # a try: ~300 transactions, the live subscription (<= 180 s), a broker restart, two reads 30 s apart
    Finding(
        name="v5-chaos-aborted-read", release="5.0.1", txn_path=TxnPath.V5, main_class="V5AbortedReadAfterRestart",
        extra_sources=("V5Clients.java",),
        what="a reader that subscribes at once to a v5 segment loaded again after its broker restarted is given "
             "values of aborted transactions (one 30 s later is not): MetadataTransactionBuffer dispatches before "
             "recover() has loaded the aborted set",
        tries=3, race=True, try_timeout_s=600.0,
        log_signs=("Aborted-txn scan errored", "TB recovery failed")),
    # a try: a never-written topic terminated, Readers before and after its reload, a durable subscription, a control
    Finding(
        name="empty-terminated-topic-rejects-readers", release="5.0.1", txn_path=TxnPath.V4,
        main_class="EmptyTerminatedTopicRejectsReaders",
        what="a terminated topic whose ledgers are all empty, loaded again, has no ledger left: a Reader from "
             "earliest is refused for good: ManagedLedgerImpl.getFirstPosition throws "
             "NoSuchElementException (ledgers.firstKey() on an empty map)",
        try_timeout_s=300.0, log_signs=("NoSuchElementException", "Failed to create consumer")),
    # the same on v5: a scalable topic's two never-written segments merged (which terminates them), a reload
    Finding(
        name="v5-empty-merged-segment-rejects-readers", release="5.0.1", txn_path=TxnPath.V5,
        main_class="EmptyTerminatedTopicRejectsReaders", args=("--segments", "true"),
        doc_stem="empty-terminated-topic-rejects-readers",
        what="a v5 segment that never held a message, terminated by a merge and loaded again, refuses every Reader "
             "from earliest (the same ManagedLedgerImpl.getFirstPosition NoSuchElementException)",
        try_timeout_s=300.0, log_signs=("NoSuchElementException", "Failed to create consumer")),
)}


def get(name: str) -> Finding:
    try:
        return FINDINGS[name]
    except KeyError:
        raise ConfigError("txnbench finding", name, "no such finding with a reproduction",
                          f"choose one of {', '.join(sorted(FINDINGS))} (docs/findings/<name>.md)") from None


# ---- the program's output and the verdict ---------------------------------------------------------


@dataclass
class Outcome:
    """What one reproduction printed, and what it means."""

    finding: str
    release: str
    lines: list[dict[str, Any]] = field(default_factory=list)
    problem: str = ""                 # why it could not run, from our side (cluster, tools, timeout)
    returncode: int | None = None
    folder: Path | None = None
    log_lines: dict[str, list[str]] = field(default_factory=dict)
    #: what ran, as the summary names it, when it is not Pulsar itself (a tool finding: "Oxia v0.14.0")
    system: str = ""

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("kind") == kind]

    @property
    def tries(self) -> list[dict[str, Any]]:
        return [t for t in self.of("try") if isinstance(t.get("shows"), bool)]

    @property
    def shown(self) -> int:
        return sum(1 for t in self.tries if t["shows"])

    @property
    def rate(self) -> float | None:
        return self.shown / len(self.tries) if self.tries else None

    @property
    def exit_code(self) -> int:
        return judge(self)

    def to_json(self) -> dict[str, Any]:
        return {"finding": self.finding, "release": self.release, "exit_code": self.exit_code,
                "verdict": VERDICT[self.exit_code], "tries": len(self.tries), "shown": self.shown,
                "rate": self.rate, "problem": self.problem, "program_exit": self.returncode,
                "errors": [e.get("what", "") for e in self.of("error")], "log_lines": self.log_lines,
                **({"system": self.system} if self.system else {})}


VERDICT = {SHOWS: "the bug shows", NOT_SHOWN: "the bug does not show", COULD_NOT_RUN: "could not run"}


def judge(outcome: Outcome) -> int:
    """1 when any finished try showed the bug; 0 when tries finished and none did and nothing
    failed; 2 when no try finished, or a step failed before any try showed the bug."""
    if outcome.shown:
        return SHOWS
    if outcome.problem or outcome.of("error") or not outcome.tries:
        return COULD_NOT_RUN
    return NOT_SHOWN


def parse_line(text: str) -> dict[str, Any] | None:
    """One JSON line of the program, or None for anything else it printed."""
    text = text.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) and "kind" in value else None


def describe(line: Mapping[str, Any]) -> Iterator[str]:
    """The program's line as a person reads it."""
    kind = line.get("kind")
    if kind == "info":
        yield f"  {line.get('name')}: {line.get('value')}"
    elif kind == "try":
        yield f"try {line.get('n')}: {'BUG SHOWS' if line.get('shows') else 'not shown'}: {line.get('summary')}"
        for example in line.get("examples") or ():
            yield f"    {example}"
    elif kind == "ask":
        yield f"  asked: {line.get('action')} {line.get('target')}"
    elif kind == "error":
        yield f"  could not run: {line.get('what')}"
    elif kind == "done":
        yield f"  program done: {line.get('shown')} of {line.get('tries')} tries showed the bug"


def summary(outcome: Outcome) -> str:
    where = outcome.system or f"Pulsar {outcome.release}"
    if outcome.exit_code == COULD_NOT_RUN and not outcome.tries:
        why = outcome.problem or "; ".join(e.get("what", "") for e in outcome.of("error")) or "no try finished"
        return f"{outcome.finding} on {where}: could not run: {why}"
    rate = f" ({outcome.rate:.0%})" if outcome.rate is not None else ""
    return (f"{outcome.finding} on {where}: {VERDICT[outcome.exit_code]}: "
            f"{outcome.shown} of {len(outcome.tries)} tries{rate}")


# ---- running it ----------------------------------------------------------------------------------


Ask = Callable[[str, str], str]


def program_argv(java: Path | str, classpath: str, finding: Finding, *, service_url: str, admin_url: str,
                 listener: str | None, tries: int, args: Sequence[str] = ()) -> list[str]:
    argv = [str(java), "-Xmx384m", "-cp", classpath, finding.main_class, "--service-url", service_url,
            "--admin-url", admin_url, "--tries", str(tries), *finding.args, *args]
    return argv + (["--listener", listener] if listener else [])


def run_program(argv: Sequence[str], *, ask: Ask, timeout_s: float, say: Callable[[str], None],
                log: Path | None = None) -> tuple[list[dict[str, Any]], int | None, str]:
    """Runs the program, echoing its lines, answering its `ask` lines with `ask(action, target)`
    (one line on its stdin); its lines, exit status (None: killed at the timeout) and stderr's tail."""
    lines: list[dict[str, Any]] = []
    stderr_path = (log.with_suffix(".stderr") if log else None)
    with open(stderr_path or os.devnull, "w") as err_out:
        proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err_out,
                                text=True, bufsize=1)
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None and proc.stdin is not None
            for text in proc.stdout:
                line = parse_line(text)
                if line is None:
                    continue
                lines.append(line)
                for said in describe(line):
                    say(said)
                if line["kind"] == "ask":
                    answer = ask(str(line.get("action")), str(line.get("target")))
                    say(f"  answered: {answer}")
                    _answer(proc.stdin, answer)
            code = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        killed = timer.finished.is_set() and code < 0
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    tail = stderr_path.read_text(errors="replace")[-2000:] if stderr_path and stderr_path.is_file() else ""
    return lines, (None if killed else code), tail


def _answer(stdin: IO[str], answer: str) -> None:
    try:
        stdin.write(answer + "\n")
        stdin.flush()
    except (BrokenPipeError, OSError):
        pass


#: `cut-metadata:S`, `cut-peers:S`: the longest cut a program may ask for (a broker's metadata session is 6-30 s)
MAX_CUT_S = 60.0


#: sets a Toxiproxy link on or off: (the Toxiproxy API URL, the link's name, enabled)
SetLink = Callable[[str, str, bool], None]
#: delays a Toxiproxy link both ways by the milliseconds given, or (None) stops delaying it
SetLatency = Callable[[str, str, int | None], None]
#: `slow-ledger:MS,S`: the longest delay and the longest time a program may ask for
MAX_SLOW_MS, MAX_SLOW_S = 10_000, 60.0


def broker_action(cluster: Any, action: str, target: str, set_link: SetLink | None = None,
                  set_latency: SetLatency | None = None) -> str:
    """Does what the program asked to a broker named by its admin (HTTP) or service URL:
    `restart-broker` (SIGTERM, wait, start), `kill-broker` (SIGKILL, then start it again),
    `cut-metadata:S` (its link to the metadata store cut now and mended S seconds later, in the
    background: the program acts while the broker is cut off, e.g. past its session's expiry),
    `cut-peers:S` (the link the other brokers reach it through, cut and mended the same way: a
    coordinator elsewhere cannot reach its partitions, its clients still can), `slow-ledger:MS,S`
    (every broker's link to the bookie delayed MS ms both ways for S seconds, from now, in the
    background: ledger writes, the coordinators' logs among them, take MS ms longer each).
    Returns `done`, or what went wrong. `set_link`, `set_latency`: how a link is switched or
    delayed (tests pass fakes)."""
    info = cluster.info()
    names = [s.name for s in info.services
             if s.name.startswith("broker-") and target and target.rstrip("/") in
             (str(s.admin_url or "").rstrip("/"), str(s.service_url or ""), *s.internal_urls)]
    if not names:
        return f"no broker of this cluster answers at {target}"
    name = names[0]
    try:
        if action.partition(":")[0] == "slow-ledger":
            from targets.pulsar.cluster import SHARED_LEDGER_LINK

            return _slow_link(info, SHARED_LEDGER_LINK, action, set_latency or _set_toxiproxy_latency)
        link = _cut_link_of(action.partition(":")[0], name)
        if link is not None:
            return _cut_link(info, link, action, set_link or _set_toxiproxy_link)
        if action == "restart-broker":
            cluster.stop(name)
        elif action == "kill-broker":
            cluster.kill(name)
        else:
            return f"unknown action {action}"
        cluster.start(name)
    except Exception as err:   # said to the program, which reports the try as unjudged
        return f"{action} {name} failed: {err}"
    return "done"


def _cut_link_of(kind: str, broker: str) -> str | None:
    """The Toxiproxy link a cut action switches for `broker` (`broker-N`), as the cluster names it;
    None for an action that is not a cut."""
    from targets.pulsar.cluster import METADATA_LINK, PEER_LINK

    pattern = {"cut-metadata": METADATA_LINK, "cut-peers": PEER_LINK}.get(kind)
    return None if pattern is None else pattern.format(broker.removeprefix("broker-"))


def _cut_link(info: Any, link: str, action: str, set_link: SetLink) -> str:
    """Disables the Toxiproxy link and enables it again after the asked seconds on a timer thread
    (bounded by MAX_CUT_S; the cluster's teardown stops Toxiproxy anyway)."""
    kind, _, given = action.partition(":")
    try:
        seconds = float(given or "10")
    except ValueError:
        return f"{kind} wants seconds ({kind}:10), not {action!r}"
    if not 0 < seconds <= MAX_CUT_S:
        return f"{kind}: {seconds:g} s is outside (0, {MAX_CUT_S:g}]"
    url = getattr(info, "toxiproxy_url", None)
    if not url:
        return "this cluster has no Toxiproxy to cut a link with"
    set_link(url, link, False)
    _undo_later(seconds, lambda: set_link(url, link, True))
    return "done"


def _undo_later(seconds: float, undo: Callable[[], None]) -> None:
    """`undo` after `seconds` on a daemon timer thread; a cluster already gone has nothing to undo."""
    def run() -> None:
        with contextlib.suppress(Exception):
            undo()

    timer = threading.Timer(seconds, run)
    timer.daemon = True
    timer.start()


def _slow_link(info: Any, link: str, action: str, set_latency: SetLatency) -> str:
    """Delays the Toxiproxy link now and stops delaying it after the asked seconds, on a timer thread."""
    kind, _, given = action.partition(":")
    try:
        latency_text, seconds_text = given.split(",")
        latency_ms, seconds = int(latency_text), float(seconds_text)
    except ValueError:
        return f"{kind} wants a delay and seconds ({kind}:3500,20), not {action!r}"
    if not (0 < latency_ms <= MAX_SLOW_MS and 0 < seconds <= MAX_SLOW_S):
        return f"{kind}: {latency_ms} ms for {seconds:g} s is outside (0, {MAX_SLOW_MS}] ms for (0, {MAX_SLOW_S:g}] s"
    url = getattr(info, "toxiproxy_url", None)
    if not url:
        return "this cluster has no Toxiproxy to delay a link with"
    set_latency(url, link, latency_ms)
    _undo_later(seconds, lambda: set_latency(url, link, None))
    return "done"


def _set_toxiproxy_latency(api_url: str, link: str, latency_ms: int | None) -> None:
    from harness.toxiproxy.client import ToxiproxyClient

    with ToxiproxyClient(api_url) as client:
        for stream in ("upstream", "downstream"):
            name = f"finding-latency-{stream}"
            if latency_ms is None:
                client.remove_toxic(link, name)
            else:
                client.add_toxic(link, "latency", {"latency": latency_ms, "jitter": 0}, stream=stream, name=name)


def _set_toxiproxy_link(api_url: str, link: str, enabled: bool) -> None:
    from harness.toxiproxy.client import ToxiproxyClient

    with ToxiproxyClient(api_url) as client:
        if enabled:
            client.enable(link)
        else:
            client.disable(link)


def quote_logs(logs: Path, signs: Sequence[str], limit: int = 3) -> dict[str, list[str]]:
    """Per broker log, the first lines that carry one of `signs` (and how many there were)."""
    out: dict[str, list[str]] = {}
    if not signs:
        return out
    pattern = re.compile("|".join(re.escape(s) for s in signs))
    for log in sorted(logs.glob("broker-*.log")):
        hits = [line.rstrip()[:400] for line in log.read_text(errors="replace").splitlines() if pattern.search(line)]
        if hits:
            counts = {s: sum(1 for h in hits if s in h) for s in signs}
            out[log.name] = [", ".join(f"{n} x {s!r}" for s, n in counts.items() if n), *hits[:limit]]
    return out


def reproduce(finding: Finding, cluster: Any, program: Any, *, tries: int, folder: Path,
              say: Callable[[str], None], args: Sequence[str] = ()) -> Outcome:
    """Runs `finding`'s program on a running cluster (ours: its brokers can be restarted);
    `args` go to the program after the finding's own."""
    info = cluster.info()
    outcome = Outcome(finding.name, cluster.release.version, folder=folder)
    folder.mkdir(parents=True, exist_ok=True)
    argv = program_argv(program.java, program.classpath, finding, service_url=info.service_url,
                        admin_url=info.admin_url, listener=info.listener_name, tries=tries, args=args)
    (folder / "command.txt").write_text(" ".join(argv) + "\n")
    outcome.lines, outcome.returncode, tail = run_program(
        argv, ask=lambda action, target: broker_action(cluster, action, target),
        timeout_s=60.0 + finding.try_timeout_s * tries, say=say, log=folder / "program.jsonl")
    if outcome.returncode is None:
        outcome.problem = f"the program did not finish within {60 + finding.try_timeout_s * tries:.0f} s"
    elif not outcome.of("done") and not outcome.shown:
        outcome.problem = f"the program ended without its `done` line (exit {outcome.returncode}): {tail[-600:]}"
    return outcome


def compiled(finding: Finding, release: Any, say: Callable[[str], None] | None = None) -> Any:
    """The finding's program compiled for `release`'s client (cached like the transaction check)."""
    from targets.pulsar.txn_check import ensure_program

    return ensure_program(release, say, sources=finding.sources(), name=f"repro-{finding.main_class}")


def reproduce_on(name: str, directory: Path, folder: Path, *, tries: int = 1, args: Sequence[str] = (),
                 say: Callable[[str], None] = print) -> Outcome:
    """`name`'s program on the pulsar cluster already running from `directory` (`txnbench cluster
    up`; the smoke test's), not a fresh one: for a finding that is at home on that cluster."""
    from targets.pulsar.cluster import PulsarCluster

    finding = get(name)
    cluster = PulsarCluster.attach(directory)
    return reproduce(finding, cluster, compiled(finding, cluster.release, say), tries=tries, folder=folder,
                     say=say, args=args)


def _dump_threads(cluster: Any, folder: Path, signs: Sequence[str]) -> dict[str, list[str]]:
    """The brokers' threads holding one of `signs` (thread_dumps.py); nothing when none is named."""
    from targets.pulsar.thread_dumps import dump_brokers

    if not signs:
        return {}

    brokers = [(s.name, s.pid) for s in cluster.info().services if s.name.startswith("broker-") and s.pid]
    return dump_brokers(brokers, cluster.java, folder, signs)


def run_finding(finding: Finding, *, tries: int | None = None, version: str | None = None,
                results: Path = Path("results"), say: Callable[[str], None] = print,
                args: Sequence[str] = (), brokers: int | None = None) -> Outcome:
    """A fresh cluster at the finding's release (or `version`; `brokers` of them), the program,
    the cluster down."""
    from targets.pulsar import versions
    from targets.pulsar.cluster import PulsarCluster, PulsarSpec

    chosen = version or finding.release
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    folder = (results / "findings" / f"{stamp}-{finding.name}").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    outcome = Outcome(finding.name, chosen, folder=folder)
    tries = tries or finding.tries
    say(f"{finding.name}: {finding.what}")
    say(f"  Pulsar {chosen}, path {finding.txn_path.value}, {brokers or finding.brokers} broker(s), "
        f"{tries} tr{'ies' if tries > 1 else 'y'}; "
        f"output in {folder}")
    cluster = None
    try:
        release = versions.release(chosen)
        if not release.supports(finding.txn_path):
            raise ConfigError("--pulsar-version", chosen, f"has no {finding.txn_path.value} path",
                              f"this finding needs it (found on {finding.release})")
        program = compiled(finding, release, say)
        cluster = PulsarCluster(PulsarSpec(txn_path=finding.txn_path, version=chosen, settings=dict(finding.settings),
                                           brokers=brokers or finding.brokers,
                                           directory=folder / "cluster", parent_pid=os.getpid(),
                                           ready_timeout_s=SETUP_BUDGET_S * 2, say=say))
        cluster.up()
        outcome = reproduce(finding, cluster, program, tries=tries, folder=folder, say=say, args=args)
    except (TxnbenchError, ValueError) as err:
        outcome.problem = str(err)
    finally:
        if cluster is not None:
            try:
                outcome.log_lines = _dump_threads(cluster, folder, finding.thread_signs)
                cluster.collect_logs(folder / "logs")
                outcome.log_lines.update(quote_logs(folder / "logs", finding.log_signs))
            finally:
                cluster.down()
    for log, lines in outcome.log_lines.items():
        say(f"  {log}: {lines[0]}")
        for line in lines[1:]:
            say(f"    {line}")
    (folder / "verdict.json").write_text(json.dumps(outcome.to_json(), indent=2) + "\n")
    say(summary(outcome))
    return outcome

