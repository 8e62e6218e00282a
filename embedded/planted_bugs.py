"""Planted bugs: deliberate, off-by-default faults in the embedded cluster (BUGGIFY), and their switch.

Theory of operation. A chaos harness is trusted only once it has caught bugs, so the
embedded cluster carries small, realistic mistakes of the kind real transaction code has
had (each cited from apache/pulsar's tracker, BookKeeper's, or the PIP-473 review). Each
lives in the real code path as a guarded branch:

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

This module is the switch only (the ids, `activate`, `on`) and imports nothing of the
project; the catalogue that says what each bug is, where it comes from and what catches
it is the orchestrator's (`orchestrator/planted.py`), listing the ids of `IDS` in order.

The active set is process-wide, like FoundationDB's BUGGIFY: a planted bug is a
property of the process under test, not of one object, and a branch must cost nothing
when nothing is planted (`on()` is a frozenset lookup).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

PREFIX = "txnbenchBug"
"""Every planted bug's setting starts with this; nothing else may."""

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
V4_COMMIT_STALLS_AFTER_MARKERS = "txnbenchBugV4CommitStallsAfterMarkers"
V4_COMMIT_ACKS_WHOLE_BATCH = "txnbenchBugV4CommitAcksWholeBatch"
FAILOVER_TAKEOVER_BEFORE_REWIND = "txnbenchBugFailoverTakeoverBeforeRewind"
V4_REPLAYED_ABORT_CLEARS_ANY_CUMULATIVE = "txnbenchBugV4ReplayedAbortClearsAnyCumulativeAck"
V5_NO_CATCH_UP_AFTER_RESYNC = "txnbenchBugV5NoCatchUpAfterResync"
SHARED_DISPATCH_KEEPS_ABORTED = "txnbenchBugSharedDispatchKeepsAborted"
V4_RECOVERY_DROPS_EXPIRED_TIMEOUTS = "txnbenchBugV4RecoveryDropsExpiredTimeouts"

IDS: tuple[str, ...] = (
    V4_REPLAY_KEEPS_LAST_PARTITIONS,
    V4_BATCHED_REPLAY_FIRST_RECORD,
    V4_PENDING_ACK_REPLAY_DROPS_OPEN,
    V4_FANOUT_TIMEOUT_IS_DONE,
    V4_PENDING_ACK_FORGETS_EARLY,
    V4_BUFFER_REPLAY_ABORT_AS_COMMIT,
    V5_RECOVERY_FORGETS_ABORTED,
    V5_SEALED_SEGMENT_STOPS_LISTENING,
    V5_SPLIT_CHILD_SKIPS_FIRST,
    V5_PARTICIPANT_LOCAL_TIMEOUT,
    V5_GC_RETENTION_UNITS,
    V5_FANOUT_COMMITS_SUBSCRIPTIONS,
    LEDGER_ACK_BEFORE_JOURNAL,
    LEDGER_TRIM_OFF_BY_ONE,
    METADATA_ACK_BEFORE_WAL,
    V4_COMMIT_STALLS_AFTER_MARKERS,
    V4_COMMIT_ACKS_WHOLE_BATCH,
    FAILOVER_TAKEOVER_BEFORE_REWIND,
    V4_REPLAYED_ABORT_CLEARS_ANY_CUMULATIVE,
    V5_NO_CATCH_UP_AFTER_RESYNC,
    SHARED_DISPATCH_KEEPS_ABORTED,
    V4_RECOVERY_DROPS_EXPIRED_TIMEOUTS,
)
"""Every planted bug, in the catalogue's order (orchestrator/planted.py)."""

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
    unknown = sorted(k for k in settings if is_planted_setting(k) and k not in IDS)
    if unknown:
        raise UnknownPlantedBug(f"setting {unknown[0]} names no planted bug; the catalogue has "
                                f"{', '.join(IDS)} (orchestrator/planted.py)")
    return [bug_id for bug_id in IDS if _truthy(settings.get(bug_id, False))]


def activate(bug_ids: Iterable[str]) -> frozenset[str]:
    """Switch these bugs on in this process (and every other one off); returns the active set."""
    global _active
    ids = frozenset(bug_ids)
    unknown = sorted(ids - set(IDS))
    if unknown:
        raise UnknownPlantedBug(f"{unknown[0]} names no planted bug")
    _active = ids
    return _active


def active() -> frozenset[str]:
    return _active


def on(bug_id: str) -> bool:
    """Whether the planted bug `bug_id` is switched on in this process (False unless a self-test set it)."""
    return bug_id in _active
