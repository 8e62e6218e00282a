"""I/O per committed transaction from snapshot deltas: sums, absences, resets, derived totals."""

from __future__ import annotations

from pathlib import Path

from analysis.perf.io import io_for_window, io_keys
from analysis.perf.prom import Snapshot, parse_prometheus


def snap(phase: str, service: str, text: str) -> Snapshot:
    samples, _ = parse_prometheus(text)
    return Snapshot(phase, service, Path(f"{phase}-{service}.prom"), tuple(samples))


def snapshots(**phases: dict[str, str]) -> dict[str, dict[str, Snapshot]]:
    return {phase: {svc: snap(phase, svc, text) for svc, text in by_svc.items()} for phase, by_svc in phases.items()}


LEDGER_START = ('txnbench_ledger_entries_total{kind="data"} 100\ntxnbench_ledger_entries_total{kind="txn-log"} 10\n'
                'bookie_WRITE_BYTES 5000\nbookie_journal_JOURNAL_SYNC_count 50\n'
                'bookkeeper_server_ADD_ENTRY_count{success="true"} 110\n'
                'bookkeeper_server_ADD_ENTRY_count{success="false"} 3\n')
LEDGER_END = ('txnbench_ledger_entries_total{kind="data"} 400\ntxnbench_ledger_entries_total{kind="txn-log"} 70\n'
              'bookie_WRITE_BYTES 35000\nbookie_journal_JOURNAL_SYNC_count 110\n'
              'bookkeeper_server_ADD_ENTRY_count{success="true"} 470\n'
              'bookkeeper_server_ADD_ENTRY_count{success="false"} 9\n')
META_START = ('txnbench_metadata_ops_total{op="get",cas="false",result="ok"} 10\n'
              'txnbench_metadata_ops_total{op="put",cas="true",result="ok"} 20\n'
              'txnbench_metadata_requests_total{kind="create",family="txn-header",result="ok"} 10\n'
              'txnbench_metadata_requests_total{kind="cas",family="txn-header",result="ok"} 10\n'
              'txnbench_metadata_fsyncs_total 5\ntxnbench_metadata_wal_bytes_total 1000\n')
META_END = ('txnbench_metadata_ops_total{op="get",cas="false",result="ok"} 40\n'
            'txnbench_metadata_ops_total{op="put",cas="true",result="ok"} 80\n'
            'txnbench_metadata_ops_total{op="put",cas="true",result="conflict"} 6\n'
            'txnbench_metadata_requests_total{kind="create",family="txn-header",result="ok"} 40\n'
            'txnbench_metadata_requests_total{kind="cas",family="txn-header",result="ok"} 40\n'
            'txnbench_metadata_requests_total{kind="cas",family="txn-header",result="conflict"} 6\n'
            'txnbench_metadata_requests_total{kind="delete",family="txn-op",result="ok"} 12\n'
            'txnbench_metadata_fsyncs_total 35\ntxnbench_metadata_wal_bytes_total 7000\n')


def test_deltas_are_summed_over_services_and_divided_by_commits() -> None:
    snaps = snapshots(
        warmup={"ledger": LEDGER_START, "metadata": META_START,
                "broker-0": "pulsar_txn_committed_total{coordinator_id=\"0\"} 10\n",
                "broker-1": "pulsar_txn_committed_total{coordinator_id=\"1\"} 5\n"},
        steady={"ledger": LEDGER_END, "metadata": META_END,
                "broker-0": "pulsar_txn_committed_total{coordinator_id=\"0\"} 40\n",
                "broker-1": "pulsar_txn_committed_total{coordinator_id=\"1\"} 35\n"})
    io = io_for_window(snaps, "steady", "warmup", committed_txns=60)
    per = io["io_per_txn"]
    assert per["data_entries"] == 300 / 60
    assert per["coordinator_log_entries"] == 60 / 60
    assert per["ledger_entries"] == 360 / 60          # success="false" left out
    assert per["ledger_bytes"] == 30000 / 60
    assert per["metadata_reads"] == 30 / 60
    assert per["metadata_writes"] == (60 + 6) / 60     # the conflict series appeared in the window: from 0
    assert per["metadata_creates"] == 30 / 60       # creates are not CAS (the old metric counted them as CAS)
    assert per["metadata_cas"] == (30 + 6) / 60
    assert per["metadata_blind_puts"] == 0.0
    assert per["metadata_deletes"] == 12 / 60
    assert per["metadata_cas_conflicts"] == 6 / 60
    assert per["coordinator_commits"] == 60 / 60
    assert per["fsyncs"] == (60 + 30) / 60
    assert per["bytes_written"] == (30000 + 6000) / 60
    assert io["metrics"]["coordinator_commits"]["services"] == ["broker-0", "broker-1"]
    assert io["metrics"]["data_entries"]["delta"] == 300
    assert set(per) == set(io_keys())


def test_absent_metrics_are_absent_never_zero() -> None:
    snaps = snapshots(warmup={"ledger": LEDGER_START}, steady={"ledger": LEDGER_END})
    io = io_for_window(snaps, "steady", "warmup", committed_txns=60)
    for key in ("metadata_reads", "metadata_fsyncs", "txn_header_cas", "coordinator_commits"):
        assert io["io_per_txn"][key] is None
        assert io["metrics"][key]["absent"] is True
        assert "no service exposes" in io["metrics"][key]["reason"]
        assert key in io["absent"]
    # A derived total needs every part.
    assert io["io_per_txn"]["fsyncs"] is None and "metadata_fsyncs" in io["metrics"]["fsyncs"]["reason"]
    # A selected label value that never occurred, on an exposed metric, is a real zero.
    assert io["io_per_txn"]["pending_ack_entries"] == 0.0
    assert io["metrics"]["pending_ack_entries"]["absent"] is False


def test_a_service_missing_at_one_end_makes_the_sum_absent() -> None:
    snaps = snapshots(
        warmup={"broker-0": "pulsar_txn_append_log_total 5\n", "broker-1": "pulsar_txn_append_log_total 5\n"},
        steady={"broker-0": "pulsar_txn_append_log_total 25\n"})
    io = io_for_window(snaps, "steady", "warmup", committed_txns=10)
    entry = io["metrics"]["coordinator_log_records"]
    assert entry["absent"] is True and "broker-1 has no snapshot at the end of steady" in entry["reason"]


def test_counter_reset_counts_from_zero_and_is_flagged() -> None:
    snaps = snapshots(warmup={"ledger": "bookie_journal_JOURNAL_SYNC_count 500\n"},
                      steady={"ledger": "bookie_journal_JOURNAL_SYNC_count 40\n"})
    entry = io_for_window(snaps, "steady", "warmup", committed_txns=20)["metrics"]["ledger_fsyncs"]
    assert entry["delta"] == 40 and entry["per_txn"] == 2.0 and entry["counter_reset"] is True


def test_missing_snapshots_or_commits() -> None:
    snaps = snapshots(steady={"ledger": LEDGER_END})
    io = io_for_window(snaps, "steady", "warmup", committed_txns=10)
    assert all(v is None for v in io["io_per_txn"].values())
    assert "no metrics snapshot at the end of warmup" in io["metrics"]["data_entries"]["reason"]
    io = io_for_window(snapshots(warmup={"ledger": LEDGER_START}, steady={"ledger": LEDGER_END}), "steady",
                       "warmup", committed_txns=0)
    assert io["metrics"]["data_entries"]["delta"] == 300 and io["io_per_txn"]["data_entries"] is None
    assert "no transactions were committed" in io["metrics"]["data_entries"]["note"]
    io = io_for_window(snaps, "steady", None, committed_txns=10)
    assert "no phase before it" in io["metrics"]["data_entries"]["reason"]


def test_real_brokers_metadata_store_calls_are_counted_by_type() -> None:
    """Real Pulsar brokers export their metadata-store calls (MetadataStoreStats); failures are left out."""
    def broker(get: int, put: int, delete: int, failed: int) -> str:
        series = 'pulsar_metadata_store_ops_latency_ms_count{cluster="c",name="metadata-store",type="%s",status="%s"} %d\n'
        return (series % ("get", "success", get) + series % ("put", "success", put)
                + series % ("del", "success", delete) + series % ("put", "fail", failed))
    snaps = snapshots(warmup={"broker-0": broker(10, 5, 1, 0), "broker-1": broker(0, 0, 0, 0)},
                      steady={"broker-0": broker(70, 35, 7, 9), "broker-1": broker(30, 20, 0, 0)})
    per = io_for_window(snaps, "steady", "warmup", committed_txns=10)["io_per_txn"]
    assert per["broker_metadata_gets"] == (60 + 30) / 10
    assert per["broker_metadata_writes"] == (30 + 6 + 20) / 10
