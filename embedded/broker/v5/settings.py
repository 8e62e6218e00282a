"""The v5 path's settings: Pulsar 5.0's names, plus finer-grained ones of ours.

Pulsar's keys (`transactionCoordinatorScalableTopics*`) are in seconds; tests that
reproduce the PIP-473 review's GC race need sub-second windows, so each interval has
a `txnbenchV5...Millis` twin that wins when set. Two more of ours shape the design
probes:

* `txnbenchV5GcLeftoverOps`: what the GC sweep does with op records still present
  after the retention window. `redrive` (default) is what Pulsar 5.0 ships
  (`TransactionCoordinatorV5.gcOneTxn`): publish the decision events again and keep the
  header until the participants have cleaned up. `force-delete` is the PIP text: delete
  them, then the header (the review's race becomes reachable).
* Model-only behaviours, each off by default because neither the PIP nor Pulsar 5.0
  does it (every report that turns one on names it: harness/model_settings.py):
  `txnbenchV5DeleteConsumedEvents` (participants delete each decision event they
  processed; 5.0 leaves them in the store) and `txnbenchV5IdBlocks` (NEW_TXNs queued
  behind a counter CAS share the next one; 5.0 does one get + CAS per id) and
  `txnbenchV5AckReadsHeader` (a subscription's first transactional ack of a transaction
  reads its header and refuses one already decided; 5.0's `MetadataPendingAckStore`
  appends the ack records without a header check, leaving it to the handle's memory).
* `txnbenchV5AnswerEndTxnAfterCas`: the PIP text answers END_TXN once the header CAS
  landed; Pulsar 5.0 (the default) answers after the decision events are written.
* `txnbenchV5ParticipantDelayMillis` with `txnbenchV5ParticipantDelayMatch`: a
  participant whose `segment|subscription` contains the match text (empty: every
  participant) waits this long between learning a decision and materializing it:
  the "slow participant" of the review.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from embedded.broker.config import Settings
from harness import model_settings as model


class GcLeftoverOps(enum.Enum):
    FORCE_DELETE = "force-delete"
    REDRIVE = "redrive"


@dataclass(frozen=True)
class V5Settings:
    parallelism: int = 16
    timeout_sweep_interval_s: float = 60.0
    gc_interval_s: float = 300.0
    gc_retention_s: float = 900.0
    gc_leftover_ops: GcLeftoverOps = GcLeftoverOps.REDRIVE
    delete_consumed_events: bool = False
    answer_end_txn_after_cas: bool = False
    id_blocks: bool = False
    ack_reads_header: bool = False
    participant_delay_s: float = 0.0
    participant_delay_match: str = ""
    default_segments: int = 1
    allow_auto_create: bool = True

    def __post_init__(self) -> None:
        if self.parallelism < 1:
            raise ValueError(f"transactionCoordinatorScalableTopicsParallelism must be >= 1, got {self.parallelism}")
        for name in ("timeout_sweep_interval_s", "gc_interval_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"the v5 {name.replace('_', ' ')} must be > 0, got {getattr(self, name)}")
        if self.gc_retention_s < 0:
            raise ValueError(f"the v5 GC retention must be >= 0 s, got {self.gc_retention_s}")

    def delay_for(self, participant: str) -> float:
        """How long `participant` (`segment|subscription`) waits before materializing a decision."""
        if self.participant_delay_s <= 0:
            return 0.0
        if self.participant_delay_match and self.participant_delay_match not in participant:
            return 0.0
        return self.participant_delay_s

    @classmethod
    def from_settings(cls, s: Settings) -> V5Settings:
        def seconds(pulsar_key: str, ours: str, default_s: float) -> float:
            if s.get(ours) is not None:
                return s.int(ours) / 1000.0
            return float(s.int(pulsar_key, int(default_s)))

        leftover = s.str(model.GC_LEFTOVER_OPS, GcLeftoverOps.REDRIVE.value)
        try:
            policy = GcLeftoverOps(leftover)
        except ValueError:
            choices = ", ".join(p.value for p in GcLeftoverOps)
            raise ValueError(f"setting {model.GC_LEFTOVER_OPS} is {leftover!r}; use one of {choices}") from None
        return cls(
            parallelism=s.int("transactionCoordinatorScalableTopicsParallelism", 16),
            timeout_sweep_interval_s=seconds("transactionCoordinatorScalableTopicsTimeoutSweepIntervalSeconds",
                                             "txnbenchV5TimeoutSweepIntervalMillis", 60),
            gc_interval_s=seconds("transactionCoordinatorScalableTopicsGcIntervalSeconds",
                                  "txnbenchV5GcIntervalMillis", 300),
            gc_retention_s=seconds("transactionCoordinatorScalableTopicsGcRetentionSeconds",
                                   "txnbenchV5GcRetentionMillis", 900),
            gc_leftover_ops=policy,
            delete_consumed_events=s.bool(model.DELETE_CONSUMED_EVENTS, False),
            answer_end_txn_after_cas=s.bool(model.ANSWER_END_TXN_AFTER_CAS, False),
            id_blocks=s.bool(model.ID_BLOCKS, False),
            ack_reads_header=s.bool(model.ACK_READS_HEADER, False),
            participant_delay_s=s.int("txnbenchV5ParticipantDelayMillis", 0) / 1000.0,
            participant_delay_match=s.str("txnbenchV5ParticipantDelayMatch", ""),
            default_segments=max(1, s.int("txnbenchV5DefaultSegments", 1)),
            allow_auto_create=s.bool("allowAutoTopicCreation", True),
        )
