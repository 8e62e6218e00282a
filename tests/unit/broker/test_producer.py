"""Producer: receipts strictly in send order, errors mapped as Pulsar answers them."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from embedded.broker.managed_ledger.api import ManagedLedgerError, ManagedLedgerTerminated
from embedded.broker.position import Position
from embedded.broker.producer import Producer
from harness.wire import CommandType, Connection, Role, ServerError, TxnId, commands


class Topic:
    def __init__(self) -> None:
        self.futures: list[asyncio.Future[Position]] = []
        self.txn_calls: list[TxnId] = []
        self.counters = SimpleNamespace(published=lambda n, size: None)
        self.name = "persistent://public/default/t"

    def publish(self, data: bytes, info: Any) -> asyncio.Future[Position]:
        future: asyncio.Future[Position] = asyncio.get_running_loop().create_future()
        self.futures.append(future)
        return future

    async def publish_txn(self, txn: TxnId, data: bytes, info: Any) -> Position:
        self.txn_calls.append(txn)
        future = self.publish(data, info)
        return await future


class Cnx:
    closed = False
    remote = "test"

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, command: Any) -> None:
        self.sent.append(command)


def sends(count: int, txn_at: int | None = None) -> list[Any]:
    out = []
    for i in range(count):
        meta = commands.message_metadata("p", i, 0, txn=TxnId(1, 2) if i == txn_at else None)
        command = commands.send(5, i, meta, b"data")
        # round-trip through a Connection so the payload is what a broker receives
        client, server = Connection(Role.CLIENT), Connection(Role.SERVER)
        server.receive_data(client.send(commands.connect()))
        next(server.events())
        client.receive_data(server.send(commands.connected()))
        list(client.events())
        server.receive_data(client.send(command))
        out.append(next(server.events()))
    return out


def test_receipts_follow_send_order_even_when_appends_complete_out_of_order() -> None:
    async def scenario() -> None:
        topic, cnx = Topic(), Cnx()
        producer = Producer(topic, cnx, 5, "p", user_provided_name=False, access_mode=0, epoch=0,  # type: ignore[arg-type]
                            metadata={})
        for event in sends(3, txn_at=1):
            producer.publish(event.body, event.payload)
        await asyncio.sleep(0)   # the transactional send's task starts and appends
        assert topic.txn_calls == [TxnId(1, 2)] and len(topic.futures) == 3
        first, third, second = topic.futures   # the transactional send appended last
        third.set_result(Position(1, 2))
        await asyncio.sleep(0)
        assert cnx.sent == []   # the head is not done: nothing may be answered yet
        first.set_result(Position(1, 0))
        await asyncio.sleep(0)
        assert [c.body.sequence_id for c in cnx.sent] == [0]
        second.set_result(Position(1, 1))
        for _ in range(3):
            await asyncio.sleep(0)
        assert [c.body.sequence_id for c in cnx.sent] == [0, 1, 2]
        assert all(c.type is CommandType.SEND_RECEIPT for c in cnx.sent)
        assert (cnx.sent[2].body.message_id.ledgerId, cnx.sent[2].body.message_id.entryId) == (1, 2)
    asyncio.run(scenario())


def test_errors_become_send_errors_with_pulsars_codes() -> None:
    async def scenario() -> None:
        topic, cnx = Topic(), Cnx()
        producer = Producer(topic, cnx, 5, "p", user_provided_name=False, access_mode=0, epoch=0,  # type: ignore[arg-type]
                            metadata={})
        for event in sends(2):
            producer.publish(event.body, event.payload)
        topic.futures[0].set_exception(ManagedLedgerTerminated("terminated"))
        topic.futures[1].set_exception(ManagedLedgerError("ledger store down"))
        await asyncio.sleep(0)
        assert [(c.type, ServerError(c.body.error)) for c in cnx.sent] == [
            (CommandType.SEND_ERROR, ServerError.TopicTerminatedError),
            (CommandType.SEND_ERROR, ServerError.PersistenceError)]
    asyncio.run(scenario())


def test_a_checksum_mismatch_is_refused_at_once() -> None:
    async def scenario() -> None:
        topic, cnx = Topic(), Cnx()
        producer = Producer(topic, cnx, 5, "p", user_provided_name=False, access_mode=0, epoch=0,  # type: ignore[arg-type]
                            metadata={})
        event = sends(1)[0]
        corrupt = bytearray(bytes(event.payload.entry))
        corrupt[-1] ^= 0xFF
        from harness.wire import Payload

        producer.publish(event.body, Payload.parse(bytes(corrupt)))
        assert topic.futures == []
        assert cnx.sent[0].type is CommandType.SEND_ERROR
        assert ServerError(cnx.sent[0].body.error) is ServerError.ChecksumError
    asyncio.run(scenario())
