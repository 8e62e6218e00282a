"""Which coordinators a broker serves (assign-topic ownership), request routing, and install()."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from embedded.broker.topic_name import TopicDomain
from embedded.broker.txn_api import TxnError
from embedded.broker.txn_registry import TxnRegistry
from embedded.broker.v4 import install
from embedded.broker.v4.buffer import TopicTransactionBufferProvider
from embedded.broker.v4.coordinator_service import (
    V4CoordinatorService,
    assign_partition,
    coordinator_of,
)
from embedded.broker.v4.pending_ack import PendingAckHandleProvider
from embedded.broker.v4.settings import InvalidV4Settings
from harness.wire import ServerError, TxnAction
from tests.unit.v4.fakes import FakeBroker, FakePeers, v4_metrics, v4_settings


def not_found(error: TxnError) -> bool:
    return error.error is ServerError.TransactionCoordinatorNotFound


def test_assign_partitions_map_to_coordinator_ids() -> None:
    assert coordinator_of(assign_partition(3)) == 3
    assert coordinator_of(assign_partition(0).partitioned_base) is None


def test_coordinators_follow_the_ownership_of_their_assign_partition() -> None:
    async def run() -> None:
        broker = FakeBroker(peers=FakePeers(), settings={"transactionCoordinatorCount": 4})
        service = V4CoordinatorService(broker, v4_settings(transactionCoordinatorCount=4),   # type: ignore[arg-type]
                                       v4_metrics(broker))
        with pytest.raises(TxnError) as err:
            await service.tc_client_connect(9)
        assert not_found(err.value) and "transactionCoordinatorCount" in err.value.message
        with pytest.raises(TxnError) as err:
            await service.tc_client_connect(1)          # not owned here: the client looks it up again
        assert not_found(err.value)
        broker.ownership.owned.add(assign_partition(1))
        service.on_owned(assign_partition(1))           # loading starts in the background
        await service.tc_client_connect(1)              # and TC_CLIENT_CONNECT waits for it
        txn = await service.new_txn(1, 10_000)
        assert txn.most == 1
        with pytest.raises(TxnError) as err:
            await service.new_txn(2, 10_000)
        assert not_found(err.value)
        await service.end_txn(txn, TxnAction.ABORT)      # routed by TxnId.most
        broker.ownership.owned.discard(assign_partition(1))
        await service.on_released(assign_partition(1))
        with pytest.raises(TxnError) as err:
            await service.new_txn(1, 10_000)
        assert not_found(err.value)
        assert service.stats() == {}
        await service.stop()

    asyncio.run(run())


class Registry(TxnRegistry):
    def __init__(self) -> None:
        super().__init__(FakeBroker().settings, "v4")


def test_install_registers_every_part_and_refuses_bad_settings() -> None:
    broker = FakeBroker()
    registry = Registry()
    service = install(registry, broker)   # type: ignore[arg-type]
    assert registry.coordinator(scalable=False) is service
    assert isinstance(registry.buffer_provider(TopicDomain.PERSISTENT), TopicTransactionBufferProvider)
    assert isinstance(registry.pending_ack_provider(TopicDomain.SEGMENT), PendingAckHandleProvider)
    assert registry.lifecycles == [service] and broker.ownership.listeners == [service]
    assert {r.path for r in registry.http_routes if hasattr(r, "path")} >= {
        "/admin/v3/transactions/coordinatorStats"}
    bad: Any = FakeBroker(settings={"transactionLogBatchedWriteEnabled": True,
                                    "transactionLogBatchedWriteMaxRecords": 2})
    with pytest.raises(InvalidV4Settings, match="transactionLogBatchedWriteMaxRecords"):
        install(Registry(), bad)


def test_a_restarted_broker_takes_its_old_sessions_coordinator_back_on_connect() -> None:
    async def run() -> None:
        broker = FakeBroker(peers=FakePeers(), settings={"transactionCoordinatorCount": 4})
        service = V4CoordinatorService(broker, v4_settings(transactionCoordinatorCount=4),   # type: ignore[arg-type]
                                       v4_metrics(broker))
        broker.ownership.add_listener(service)
        broker.ownership.claimable.add(assign_partition(2))   # the owner record names this broker, old session
        await service.tc_client_connect(2)
        assert (await service.new_txn(2, 1000)).most == 2
        with pytest.raises(TxnError) as err:                   # owned by the other broker: look it up again
            await service.tc_client_connect(3)
        assert not_found(err.value) and "broker 1 does" in err.value.message
        await service.stop()

    asyncio.run(run())


def test_a_graceful_stop_gives_every_assign_partition_up() -> None:
    """Pulsar's shutdown unloads its bundles and deletes their ownership locks, so another broker
    serves the coordinators while this one is still stopping (and after it, should the stop be
    cut short by a kill: the old session's records would otherwise linger a session timeout)."""
    async def run() -> None:
        broker = FakeBroker(peers=FakePeers(), settings={"transactionCoordinatorCount": 4})
        service = V4CoordinatorService(broker, v4_settings(transactionCoordinatorCount=4),   # type: ignore[arg-type]
                                       v4_metrics(broker))
        broker.ownership.add_listener(service)
        broker.ownership.owned.update({assign_partition(1), assign_partition(3)})
        service.on_owned(assign_partition(1))
        await service.tc_client_connect(1)             # coordinator 1 loaded; 3 owned, not loaded yet
        await service.stop()
        assert sorted(broker.ownership.released, key=str) == [assign_partition(1), assign_partition(3)]
        assert not broker.ownership.owned and service.coordinators == {}

    asyncio.run(run())


def test_a_stop_cut_short_by_its_deadline_still_releases_the_partitions() -> None:
    """The broker bounds each part's stop (5 s); a coordinator whose close outlasts it (a slow
    ledger store) must not keep its partition until the session ends."""
    async def run() -> None:
        broker = FakeBroker(peers=FakePeers(), settings={"transactionCoordinatorCount": 4})
        service = V4CoordinatorService(broker, v4_settings(transactionCoordinatorCount=4),   # type: ignore[arg-type]
                                       v4_metrics(broker))
        broker.ownership.owned.add(assign_partition(2))

        async def slow_unload(tc_id: int) -> None:
            await asyncio.sleep(60)

        service.unload = slow_unload   # type: ignore[method-assign]
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(service.stop(), 0.1)
        assert broker.ownership.released == [assign_partition(2)]

    asyncio.run(run())
