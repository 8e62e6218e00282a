"""The micro-benchmark's null broker and scenarios work (functional, not timed)."""

from __future__ import annotations

import pytest

from harness.client import PulsarClient
from tools.bench.client import SCENARIOS, _start_null_broker, measure


@pytest.fixture(scope="module")
def null_broker_url():
    process, port = _start_null_broker(tc_count=2)
    try:
        yield f"pulsar://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_scenario_runs_against_the_null_broker(null_broker_url: str, scenario: str) -> None:
    result = measure(null_broker_url, scenario, workers=2, seconds=0.2, mode="threads")
    assert result["count"] > 0 and result["rate"] > 0
    assert result["unit"] == ("txn/s" if scenario.startswith("txn") else "msg/s")
    assert result["cpu_ms_per_op"] > 0
    if scenario == "txn-pipelined":   # pulsar-perf's loop: the wait for an open is what it reports
        assert result["open_mean_ms"] > 0


@pytest.mark.parametrize("txn_path", ["v4", "v5"])
def test_null_broker_serves_both_transaction_paths(null_broker_url: str, txn_path: str) -> None:
    with PulsarClient(null_broker_url, txn_path=txn_path, operation_timeout_s=5) as client:
        topic = "topic://public/default/null" if txn_path == "v5" else "null"
        producer = client.create_producer(topic)
        txn = client.new_transaction()
        receipt = producer.send(b"x", key="k", txn=txn)
        txn.commit()
        assert receipt.message_id.ledger_id == 1
        assert set(client.coordinator_brokers()) == {0, 1}
