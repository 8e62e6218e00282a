"""The v5 path's own metrics, beside the PIP-473 names registered in `embedded.broker.metrics`.

PIP-473 defines four metrics (op writes, header CAS outcomes, index query latency,
outstanding op records) and the coordinator keeps Pulsar's `pulsar_txn_*` counters;
these add what the design probes need to see from the broker's side: coordinator
leadership, the sweeps, and decisions materialized or lost by participants.
"""

from __future__ import annotations

from embedded.broker.metrics import SECONDS_BUCKETS, BrokerMetrics


class V5Metrics:
    def __init__(self, broker: BrokerMetrics) -> None:
        r = broker.registry
        tc = ("coordinator_id",)
        self.broker = broker
        self.leader = r.gauge("txnbench_v5_tc_leader", "1 when this broker leads the coordinator partition", tc)
        self.leader_acquired = r.counter("txnbench_v5_tc_leadership_acquired_total",
                                         "Coordinator partitions this broker became leader of", tc)
        self.election_seconds = r.histogram(
            "txnbench_v5_tc_election_seconds",
            "From seeing a partition without leader to leading it (this broker's takeovers)", SECONDS_BUCKETS)
        self.timeout_sweeps = r.counter("txnbench_v5_timeout_sweeps_total", "Timeout sweeps run")
        self.gc_sweeps = r.counter("txnbench_v5_gc_sweeps_total", "GC sweeps run")
        self.gc_headers_deleted = r.counter("txnbench_v5_gc_headers_deleted_total", "Finalized headers deleted by GC")
        self.gc_forced_ops = r.counter("txnbench_v5_gc_forced_op_records_total",
                                       "Leftover op records force-deleted by GC (PIP text)")
        self.gc_redrives = r.counter("txnbench_v5_gc_redrives_total",
                                     "Decision fan-outs re-driven by GC for leftover op records (Pulsar 5.0)")
        self.decisions = r.counter("txnbench_v5_participant_decisions_total",
                                   "Decisions materialized by participants", ("participant", "decision"))
        self.lost_acks = r.counter("txnbench_v5_pending_ack_lost_total",
                                   "Acks held for a committed transaction whose op records were gone at commit")
        self.fan_out_events = r.counter("txnbench_v5_decision_events_total", "Decision events published",
                                        ("kind",))
