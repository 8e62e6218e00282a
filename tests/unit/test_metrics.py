from __future__ import annotations

from harness.metrics import Registry, parse_prometheus_text


def test_exact_names_and_round_trip() -> None:
    reg = Registry()
    adds = reg.counter("bookkeeper_server_ADD_ENTRY_count", "appends")
    by_kind = reg.counter("txnbench_ledger_entries_total", "appends by kind", ["kind"])
    gauge = reg.gauge("txnbench_metadata_records", "records")
    hist = reg.histogram("pulsar_txn_tc_batched_log_records_count_per_entry", "records per entry",
                         [10, 50, 100], ["broker"])
    adds.inc(3)
    by_kind.inc(kind="data")
    by_kind.inc(2, kind='we"ird')
    gauge.set(7)
    hist.observe(12, broker="b0")
    hist.observe(200, broker="b0")
    text = reg.render()
    assert "bookkeeper_server_ADD_ENTRY_count 3" in text
    assert "bookkeeper_server_ADD_ENTRY_count_total" not in text
    parsed = parse_prometheus_text(text)
    assert parsed[("txnbench_ledger_entries_total", (("kind", "data"),))] == 1
    assert parsed[("txnbench_ledger_entries_total", (("kind", 'we"ird'),))] == 2
    assert parsed[("txnbench_metadata_records", ())] == 7
    assert parsed[("pulsar_txn_tc_batched_log_records_count_per_entry_bucket", (("broker", "b0"), ("le", "50")))] == 1
    assert parsed[("pulsar_txn_tc_batched_log_records_count_per_entry_bucket", (("broker", "b0"), ("le", "+Inf")))] == 2
    assert parsed[("pulsar_txn_tc_batched_log_records_count_per_entry_count", (("broker", "b0"),))] == 2
