"""One coordinator over an in-memory log: requests, fan-out, retries, timeouts, recovery, batching."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from embedded import planted_bugs
from embedded.broker.txn_api import PeerUnavailable, TxnError
from embedded.broker.v4.coordinator import TransactionCoordinator, log_topic
from embedded.broker.v4.coordinator_state import TxnState
from embedded.broker.v4.fanout import EndTxnFanOut
from embedded.broker.v4.records import (
    TransactionMetadataEntry,
    TransactionMetadataOp,
    TxnStatus,
    split_entry,
)
from harness.wire import Command, CommandType, ServerError, TxnAction, TxnId, commands
from tests.unit.v4.fakes import FakeBroker, FakeFactory, FakePeers, v4_metrics, v4_settings

FAST = {"txnbenchTxnEndRetryIntervalMillis": 20}
BATCHED = {**FAST, "transactionLogBatchedWriteEnabled": True, "transactionLogBatchedWriteMaxRecords": 512,
           "transactionLogBatchedWriteMaxDelayInMillis": 5}


def answer(topic: Any, command: Command, error: ServerError | None = None) -> Command:
    body = command.body
    txn = TxnId(body.txnid_most_bits, body.txnid_least_bits)
    kind = (CommandType.END_TXN_ON_PARTITION_RESPONSE if command.type is CommandType.END_TXN_ON_PARTITION
            else CommandType.END_TXN_ON_SUBSCRIPTION_RESPONSE)
    return commands.txn_response(kind, body.request_id, txn, error=error, message="injected" if error else None)


async def coordinator(broker: FakeBroker, **settings: Any) -> TransactionCoordinator:
    metrics = v4_metrics(broker)   # a second V4Metrics on one registry reuses the same families
    config = v4_settings(**{**FAST, **settings})
    tc = TransactionCoordinator(0, broker, config, metrics, EndTxnFanOut(broker.peers, 1.0, metrics))  # type: ignore[arg-type]
    await tc.load()
    return tc


def log_records(broker: FakeBroker) -> list[Any]:
    ml = broker.managed_ledgers.open_ledgers[log_topic(0).persistence_name]
    return [TransactionMetadataEntry.FromString(r) for data in ml.all_data() for r in split_entry(data)]


async def wait_for(condition: Any, timeout_s: float = 3.0) -> None:
    for _ in range(int(timeout_s / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")


def test_commit_logs_five_records_tells_participants_and_forgets_the_transaction() -> None:
    async def run() -> None:
        broker = FakeBroker(peers=FakePeers(answer))
        tc = await coordinator(broker)
        txn = await tc.new_txn(10_000)
        await tc.add_partitions(txn, ["persistent://public/default/a", "persistent://public/default/b"])
        await tc.add_subscriptions(txn, [("persistent://public/default/in", "sub")])
        await tc.end_txn(txn, TxnAction.COMMIT)
        ops = [(TransactionMetadataOp(r.metadata_op), TxnStatus(r.new_status) if r.HasField("new_status") else None)
               for r in log_records(broker)]
        assert ops == [(TransactionMetadataOp.NEW, None), (TransactionMetadataOp.ADD_PARTITION, None),
                       (TransactionMetadataOp.ADD_SUBSCRIPTION, None),
                       (TransactionMetadataOp.UPDATE, TxnStatus.COMMITTING),
                       (TransactionMetadataOp.UPDATE, TxnStatus.COMMITTED)]
        sent = sorted((t, c.type.name, c.body.txn_action) for t, c in broker.peers.requests)
        assert sent == [("persistent://public/default/a", "END_TXN_ON_PARTITION", 0),
                        ("persistent://public/default/b", "END_TXN_ON_PARTITION", 0),
                        ("persistent://public/default/in", "END_TXN_ON_SUBSCRIPTION", 0)]
        assert all(c.body.txnid_least_bits_of_low_watermark == 0 for _, c in broker.peers.requests)
        m = broker.metrics
        assert (m.txn_created.get(coordinator_id="0"), m.txn_committed.get(coordinator_id="0"),
                m.txn_append_log.get(coordinator_id="0"), m.txn_active.get(coordinator_id="0")) == (1, 1, 5, 0)
        assert tc.log is not None and tc.log.cursor.is_acked(tc.log.ml.last_confirmed)   # every record deleted
        with pytest.raises(TxnError) as err:
            await tc.end_txn(txn, TxnAction.COMMIT)
        assert err.value.error is ServerError.TransactionNotFound
        assert "pulsar_txn_execution_latency_le_" in m.registry.render()
        await tc.close()

    asyncio.run(run())


def test_batched_log_puts_many_transactions_records_in_few_entries() -> None:
    async def run() -> None:
        broker = FakeBroker(peers=FakePeers(answer))
        tc = await coordinator(broker, **BATCHED)

        async def one(i: int) -> None:
            txn = await tc.new_txn(10_000)
            await tc.add_partitions(txn, [f"persistent://public/default/t{i}"])
            await tc.end_txn(txn, TxnAction.COMMIT if i % 2 else TxnAction.ABORT)

        await asyncio.gather(*(one(i) for i in range(32)))
        assert tc.log is not None
        assert tc.log.writer.records_written == 32 * 4
        assert tc.log.writer.entries_written <= 32 * 4 / 5   # at least five records per entry on average
        m = broker.metrics
        assert m.txn_committed.get(coordinator_id="0") == 16 and m.txn_aborted.get(coordinator_id="0") == 16
        assert m.tc_batched.records_per_entry.sums[("broker-0",)] == 32 * 4
        assert tc.log.cursor.is_acked(tc.log.ml.last_confirmed)   # all batch indexes deleted
        await tc.close()

    asyncio.run(run())


def test_a_failing_participant_stalls_the_answer_until_it_answers() -> None:
    """Pulsar keeps the client's END_TXN pending while it retries a participant that refuses the
    marker (a terminated topic): the client sees the commit stall, which PIP-473 exists to fix."""
    async def run() -> None:
        failing = {"on": True}

        def handler(topic: Any, command: Command) -> Command:
            if failing["on"] and str(topic).endswith("/sealed"):
                return answer(topic, command, ServerError.PersistenceError)
            return answer(topic, command)

        broker = FakeBroker(peers=FakePeers(handler))
        tc = await coordinator(broker)
        txn = await tc.new_txn(60_000)
        await tc.add_partitions(txn, ["persistent://public/default/open", "persistent://public/default/sealed"])
        commit = asyncio.create_task(tc.end_txn(txn, TxnAction.COMMIT))
        retry = asyncio.create_task(tc.end_txn(txn, TxnAction.COMMIT))   # a client retry joins the stalled commit
        await wait_for(lambda: [t for t, _ in broker.peers.requests].count("persistent://public/default/sealed") >= 4)
        assert not commit.done() and not retry.done()   # the stall: no answer while the marker is refused
        assert tc.state.txns[txn.least].state is TxnState.COMMITTING
        assert tc.metrics.end_retries.get(coordinator_id="0") >= 3
        partitions = [t for t, c in broker.peers.requests]
        assert partitions.count("persistent://public/default/open") == 1   # the done participant is not asked again
        assert tc.metrics.tb_commit_failed.get() >= 4
        assert "txnbench_txn_end_retries_total" in broker.metrics.registry.render()
        failing["on"] = False
        await asyncio.wait_for(commit, 3)
        await asyncio.wait_for(retry, 3)
        assert txn.least not in tc.state.txns
        assert broker.metrics.txn_committed.get(coordinator_id="0") == 1
        await tc.close()

    asyncio.run(run())


def test_a_stalled_answer_gives_up_after_its_bound_with_an_unknown_outcome() -> None:
    async def run() -> None:
        broker = FakeBroker(peers=FakePeers(lambda t, c: answer(t, c, ServerError.PersistenceError)))
        tc = await coordinator(broker, txnbenchTxnEndResponseTimeoutMillis=300)
        txn = await tc.new_txn(60_000)
        await tc.add_partitions(txn, ["persistent://public/default/sealed"])
        started = asyncio.get_running_loop().time()
        with pytest.raises(TxnError) as err:
            await tc.end_txn(txn, TxnAction.COMMIT)
        assert asyncio.get_running_loop().time() - started >= 0.29
        assert err.value.error is ServerError.PersistenceError   # outcome unknown for the client
        assert tc.state.txns[txn.least].state is TxnState.COMMITTING   # the coordinator keeps retrying
        before = tc.metrics.end_retries.get(coordinator_id="0")
        await wait_for(lambda: tc.metrics.end_retries.get(coordinator_id="0") > before)
        await tc.close()

    asyncio.run(run())


def test_participant_errors_that_would_look_definite_are_answered_as_unknown() -> None:
    async def run() -> None:
        broker = FakeBroker(peers=FakePeers(lambda t, c: answer(t, c, ServerError.NotAllowedError)))
        tc = await coordinator(broker)
        txn = await tc.new_txn(60_000)
        await tc.add_partitions(txn, ["persistent://public/default/x"])
        with pytest.raises(TxnError) as err:
            await tc.end_txn(txn, TxnAction.COMMIT)
        assert err.value.error is ServerError.UnknownError and "NotAllowedError" in err.value.message
        await asyncio.sleep(0.1)
        assert len(broker.peers.requests) == 1   # not retryable: left for the next recovery
        await tc.close()

    asyncio.run(run())


def test_timed_out_transactions_are_aborted() -> None:
    async def run() -> None:
        broker = FakeBroker(peers=FakePeers(answer))
        tc = await coordinator(broker)
        txn = await tc.new_txn(50)
        await tc.add_partitions(txn, ["persistent://public/default/a"])
        await wait_for(lambda: txn.least not in tc.state.txns)
        assert broker.metrics.txn_timeout.get(coordinator_id="0") == 1
        assert broker.metrics.txn_aborted.get(coordinator_id="0") == 1
        assert [c.body.txn_action for _, c in broker.peers.requests] == [int(TxnAction.ABORT)]
        with pytest.raises(TxnError) as err:
            await tc.end_txn(txn, TxnAction.COMMIT)
        assert err.value.error is ServerError.TransactionNotFound
        await tc.close()

    asyncio.run(run())


def test_recovery_replays_the_log_and_completes_decided_transactions() -> None:
    async def run() -> None:
        down = {"on": True}

        def handler(topic: Any, command: Command) -> Command:
            if down["on"]:
                raise PeerUnavailable("participant unreachable")
            return answer(topic, command)

        broker = FakeBroker(peers=FakePeers(handler))
        tc = await coordinator(broker, txnbenchTxnEndResponseTimeoutMillis=200)
        committing = await tc.new_txn(60_000)
        await tc.add_partitions(committing, ["persistent://public/default/a"])
        still_open = await tc.new_txn(60_000)
        await tc.add_partitions(still_open, ["persistent://public/default/b"])
        with pytest.raises(TxnError):
            await tc.end_txn(committing, TxnAction.COMMIT)
        # kill -9: nothing is flushed, the in-memory coordinator is gone
        broker.managed_ledgers = broker.managed_ledgers.crash()
        down["on"] = False
        recovered = await coordinator(broker)
        assert recovered.recovery_seconds > 0
        assert broker.metrics.txn_recovery_seconds.get(coordinator_id="0") == recovered.recovery_seconds
        await wait_for(lambda: committing.least not in recovered.state.txns)
        assert recovered.state.txns[still_open.least].state is TxnState.OPEN
        assert recovered.state.txns[still_open.least].partitions == ["persistent://public/default/b"]
        assert await recovered.new_txn(1000) == TxnId(0, 3)   # ids continue after the recovered ones
        await recovered.end_txn(still_open, TxnAction.ABORT)
        await recovered.close()

    asyncio.run(run())


@pytest.mark.parametrize("planted", [False, True])
def test_a_timeout_that_passed_while_the_coordinator_was_down(planted: bool) -> None:
    """Aborted at the load; kept OPEN with the planted bug on (2.10.5's dropped timeout)."""
    async def run() -> None:
        planted_bugs.activate([planted_bugs.V4_RECOVERY_DROPS_EXPIRED_TIMEOUTS] if planted else [])
        try:
            broker = FakeBroker(peers=FakePeers(answer))
            tc = await coordinator(broker)
            txn = await tc.new_txn(60_000)
            await tc.add_partitions(txn, ["persistent://public/default/a"])
            broker.managed_ledgers = broker.managed_ledgers.crash()     # kill -9 before the timeout
            later = tc.state.txns[txn.least].deadline_ms + 1_000
            metrics = v4_metrics(broker)
            recovered = TransactionCoordinator(0, broker, v4_settings(**FAST), metrics,  # type: ignore[arg-type]
                                               EndTxnFanOut(broker.peers, 1.0, metrics), clock_ms=lambda: later)
            await recovered.load()
            if planted:   # out of the sweeper's reach: nothing expired, no deadline to wake it
                assert recovered.state.txns[txn.least].state is TxnState.OPEN
                assert recovered.state.expired(later) == [] and recovered.state.next_deadline_ms() is None
                assert broker.peers.requests == []
            else:
                await wait_for(lambda: txn.least not in recovered.state.txns)
                assert [c.body.txn_action for _, c in broker.peers.requests] == [int(TxnAction.ABORT)]
            await recovered.close()
        finally:
            planted_bugs.activate([])

    asyncio.run(run())


def test_ids_are_never_reused_even_when_every_record_was_deleted() -> None:
    async def run() -> None:
        broker = FakeBroker(peers=FakePeers(answer))
        tc = await coordinator(broker, **BATCHED)
        for _ in range(3):
            txn = await tc.new_txn(1000)
            await tc.end_txn(txn, TxnAction.ABORT)
        assert tc.log is not None
        tc.log.cursor.persist()  # type: ignore[attr-defined]   # the cursor persisted its deletions (it does so in the background)
        broker.managed_ledgers = broker.managed_ledgers.crash()
        recovered = await coordinator(broker, **BATCHED)
        assert recovered.log is not None and recovered.log.replayed_records == 0
        assert await recovered.new_txn(1000) == TxnId(0, 4)
        await recovered.close()

    asyncio.run(run())


def test_requests_fail_with_coordinator_not_found_when_not_ready_or_closed() -> None:
    async def run() -> None:
        broker = FakeBroker(peers=FakePeers(answer), factory=FakeFactory())
        metrics = v4_metrics(broker)
        tc = TransactionCoordinator(0, broker, v4_settings(), metrics, EndTxnFanOut(broker.peers, 1.0, metrics))  # type: ignore[arg-type]
        with pytest.raises(TxnError) as err:
            await tc.new_txn(1000)
        assert err.value.error is ServerError.TransactionCoordinatorNotFound
        await tc.load()
        txn = await tc.new_txn(1000)
        await tc.close()
        with pytest.raises(TxnError) as err:
            await tc.end_txn(txn, TxnAction.COMMIT)
        assert err.value.error is ServerError.TransactionCoordinatorNotFound

    asyncio.run(run())
