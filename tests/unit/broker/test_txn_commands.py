"""The broker's transaction commands as a client sees them: each request's answer, success and failure.

A connection (`ServerCnx`) routes the nine transaction commands to a coordinator, a
topic's transaction buffer or a subscription's pending-ack handle, and answers each with
its own response type: a definite failure (`TxnError`) keeps the request's response type
with `error`/`message` set, the per-topic commands answer a bad topic name or a storage
error as ServiceNotReady, and an unexpected error gets no answer at all (the client's
outcome stays unknown). These tests drive a connection with fakes and compare the exact
commands it sends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from embedded import tracing
from embedded.broker.managed_ledger.api import ManagedLedgerError
from embedded.broker.server_cnx import ServerCnx
from embedded.broker.topic_name import InvalidTopicName, TopicName
from embedded.broker.txn_api import TxnError
from embedded.broker.txn_commands import TXN_COMMANDS
from embedded.broker.txn_registry import CORE_COMMANDS
from harness.wire import Command, CommandType, ServerError, TxnAction, TxnId, commands

T = CommandType
TXN = TxnId(2, 41)
NEW = TxnId(1, 7)
TOPIC = "persistent://public/default/orders-partition-0"
BAD_TOPIC = "persistent://no-namespace"
REFUSED = TxnError(ServerError.TransactionConflict, "refused by the fake")
TRACED = {"NEW_TXN", "ADD_PARTITION_TO_TXN", "ADD_SUBSCRIPTION_TO_TXN", "END_TXN", "END_TXN_ON_PARTITION",
          "END_TXN_ON_SUBSCRIPTION"}


class Unexpected(Exception):
    """Not a definite failure: the connection must not answer it."""


@dataclass
class Part:
    """A coordinator, transaction buffer or pending-ack handle that records calls and may fail."""

    fail: BaseException | None = None
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    async def _call(self, *call: Any) -> None:
        self.calls.append(call)
        if self.fail is not None:
            raise self.fail

    async def tc_client_connect(self, tc_id: int) -> None:
        await self._call("tc_client_connect", tc_id)

    async def new_txn(self, tc_id: int, timeout_ms: int) -> TxnId:
        await self._call("new_txn", tc_id, timeout_ms)
        return NEW

    async def add_partitions(self, txn: TxnId, partitions: list[str]) -> None:
        await self._call("add_partitions", txn, partitions)

    async def add_subscriptions(self, txn: TxnId, subscriptions: list[tuple[str, str]]) -> None:
        await self._call("add_subscriptions", txn, subscriptions)

    async def end_txn(self, txn: TxnId, action: TxnAction, *low_watermark: int | None) -> None:
        await self._call("end_txn", txn, action, *low_watermark)

    async def watch_assignments(self, watch_id: int, channel: Any) -> None:
        await self._call("watch_assignments", watch_id, channel)

    async def unwatch_assignments(self, watch_id: int, channel: Any) -> None:
        await self._call("unwatch_assignments", watch_id, channel)


@dataclass
class Subscription:
    pending_ack: Part


@dataclass
class Topic:
    transaction_buffer: Part
    subscriptions: dict[str, Subscription]

    def subscription(self, name: str) -> Subscription | None:
        return self.subscriptions.get(name)


class Registry:
    def __init__(self, coordinator: Part) -> None:
        self.coordinator_part = coordinator
        self.routed: list[bool] = []
        self.feature_flags: set[str] = set()

    def coordinator(self, scalable: bool) -> Part:
        self.routed.append(scalable)
        return self.coordinator_part

    def command_handler(self, kind: CommandType) -> None:
        return None

    def domain_handler(self, domain: Any) -> None:
        return None


class Broker:
    """What a connection asks of the broker for transaction commands."""

    def __init__(self, coordinator: Part, topic: Topic, topic_error: BaseException | None) -> None:
        self.txn_registry = Registry(coordinator)
        self.topic = topic
        self.topic_error = topic_error
        self.loaded: list[tuple[TopicName, bool]] = []

    async def get_topic(self, name: TopicName, *, create: bool = True) -> Topic:
        self.loaded.append((name, create))
        if self.topic_error is not None:
            raise self.topic_error
        return self.topic


class Transport:
    remote = "test"
    protocol_version = 21

    def __init__(self) -> None:
        self.sent: list[Command] = []

    def send(self, command: Command) -> None:
        self.sent.append(command)

    def close(self) -> None:
        return None

    def peer_supports(self, feature: str) -> bool:
        return False


@dataclass
class Outcome:
    sent: list[Command]
    calls: list[tuple[Any, ...]]
    routed: list[bool]
    loaded: list[tuple[TopicName, bool]]
    spans: list[str]
    cnx: ServerCnx


@pytest.fixture
def spans() -> Iterator[list[str]]:
    names: list[str] = []
    tracing.set_sink(lambda span: names.append(span.name))
    try:
        yield names
    finally:
        tracing.set_sink(None)


def handle(command: Command, spans: list[str], *, fail: BaseException | None = None,
           topic_error: BaseException | None = None, subscriptions: tuple[str, ...] = ("sub",)) -> Outcome:
    """Hand `command` to a fresh connection and wait until everything it started is done."""
    part = Part(fail=fail)
    topic = Topic(part, {name: Subscription(part) for name in subscriptions})
    broker = Broker(part, topic, topic_error)
    transport = Transport()
    cnx = ServerCnx(broker, transport)   # type: ignore[arg-type]

    async def run() -> None:
        cnx.handle(command)
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        await asyncio.wait_for(asyncio.gather(*others, return_exceptions=True), 10)

    asyncio.run(run())
    return Outcome(transport.sent, part.calls, broker.txn_registry.routed, broker.loaded, list(spans), cnx)


def invalid_topic_message() -> str:
    with pytest.raises(InvalidTopicName) as err:
        TopicName.parse(BAD_TOPIC)
    return str(err.value)


def test_the_table_holds_the_nine_transaction_commands_of_the_core() -> None:
    """No extension can claim them (CORE_COMMANDS), and the six that change a transaction are traced."""
    assert set(TXN_COMMANDS) == {
        T.TC_CLIENT_CONNECT_REQUEST, T.NEW_TXN, T.ADD_PARTITION_TO_TXN, T.ADD_SUBSCRIPTION_TO_TXN, T.END_TXN,
        T.END_TXN_ON_PARTITION, T.END_TXN_ON_SUBSCRIPTION, T.WATCH_TC_ASSIGNMENTS, T.WATCH_TC_ASSIGNMENTS_CLOSE}
    assert set(TXN_COMMANDS) <= CORE_COMMANDS
    assert {kind.name for kind, row in TXN_COMMANDS.items() if row.traced} == TRACED


# ---- the coordinator commands ---------------------------------------------------------------


def test_tc_client_connect_answers_with_its_own_response(spans: list[str]) -> None:
    ok = handle(commands.tc_client_connect_request(1, 3, scalable=True), spans)
    assert ok.calls == [("tc_client_connect", 3)] and ok.routed == [True]
    assert ok.sent == [commands.tc_client_connect_response(1)]
    failed = handle(commands.tc_client_connect_request(1, 3), spans, fail=REFUSED)
    assert failed.routed == [False]
    assert failed.sent == [commands.tc_client_connect_response(1, error=REFUSED.error, message=REFUSED.message)]
    assert spans == []


def test_new_txn_answers_the_new_id_or_an_error_without_one(spans: list[str]) -> None:
    ok = handle(commands.new_txn(2, 1, timeout_ms=5000, scalable=True), spans)
    assert ok.calls == [("new_txn", 1, 5000)] and ok.routed == [True]
    assert ok.sent == [commands.new_txn_response(2, NEW)]
    failed = handle(commands.new_txn(2, 1, timeout_ms=5000), spans, fail=REFUSED)
    assert failed.sent == [commands.txn_response(T.NEW_TXN_RESPONSE, 2, None, error=REFUSED.error,
                                                 message=REFUSED.message)]
    assert spans == ["NEW_TXN", "NEW_TXN"]


def test_add_partition_and_subscription_answer_with_the_txn(spans: list[str]) -> None:
    partition = handle(commands.add_partition_to_txn(3, TXN, [TOPIC, TOPIC + "x"]), spans)
    assert partition.calls == [("add_partitions", TXN, [TOPIC, TOPIC + "x"])] and partition.routed == [False]
    assert partition.sent == [commands.add_partition_to_txn_response(3, TXN)]
    subscription = handle(commands.add_subscription_to_txn(4, TXN, [(TOPIC, "sub")], scalable=True), spans)
    assert subscription.calls == [("add_subscriptions", TXN, [(TOPIC, "sub")])] and subscription.routed == [True]
    assert subscription.sent == [commands.add_subscription_to_txn_response(4, TXN)]
    assert handle(commands.add_partition_to_txn(3, TXN, [TOPIC]), spans, fail=REFUSED).sent == [
        commands.add_partition_to_txn_response(3, TXN, error=REFUSED.error, message=REFUSED.message)]
    assert handle(commands.add_subscription_to_txn(4, TXN, [(TOPIC, "s")]), spans, fail=REFUSED).sent == [
        commands.add_subscription_to_txn_response(4, TXN, error=REFUSED.error, message=REFUSED.message)]
    assert spans == ["ADD_PARTITION_TO_TXN", "ADD_SUBSCRIPTION_TO_TXN", "ADD_PARTITION_TO_TXN",
                     "ADD_SUBSCRIPTION_TO_TXN"]


def test_end_txn_answers_with_the_txn(spans: list[str]) -> None:
    ok = handle(commands.end_txn(5, TXN, TxnAction.COMMIT, scalable=True), spans)
    assert ok.calls == [("end_txn", TXN, TxnAction.COMMIT)] and ok.routed == [True]
    assert ok.sent == [commands.end_txn_response(5, TXN)]
    failed = handle(commands.end_txn(5, TXN, TxnAction.ABORT), spans, fail=REFUSED)
    assert failed.sent == [commands.end_txn_response(5, TXN, error=REFUSED.error, message=REFUSED.message)]
    assert spans == ["END_TXN", "END_TXN"]


def test_a_coordinators_unexpected_error_is_not_answered(spans: list[str]) -> None:
    """Only TxnError is definite; a storage error of the coordinator leaves the outcome unknown."""
    for command in (commands.new_txn(2, 1), commands.end_txn(5, TXN, TxnAction.COMMIT),
                    commands.add_partition_to_txn(3, TXN, [TOPIC]), commands.tc_client_connect_request(1, 3)):
        assert handle(command, spans, fail=ManagedLedgerError("log append failed")).sent == []
        assert handle(command, spans, fail=Unexpected("boom")).sent == []


# ---- the per-topic commands ------------------------------------------------------------------


def test_end_txn_on_partition_goes_to_the_topics_buffer(spans: list[str]) -> None:
    ok = handle(commands.end_txn_on_partition(6, TXN, TOPIC, TxnAction.ABORT, low_watermark_least_bits=4), spans)
    assert ok.loaded == [(TopicName.parse(TOPIC), False)]
    assert ok.calls == [("end_txn", TXN, TxnAction.ABORT, 4)] and ok.routed == []
    assert ok.sent == [commands.end_txn_on_partition_response(6, TXN)]
    no_watermark = handle(commands.end_txn_on_partition(6, TXN, TOPIC, TxnAction.COMMIT), spans)
    assert no_watermark.calls == [("end_txn", TXN, TxnAction.COMMIT, None)]
    assert spans == ["END_TXN_ON_PARTITION", "END_TXN_ON_PARTITION"]


def test_end_txn_on_subscription_goes_to_the_pending_acks(spans: list[str]) -> None:
    ok = handle(commands.end_txn_on_subscription(7, TXN, TOPIC, "sub", TxnAction.COMMIT,
                                                 low_watermark_least_bits=9), spans)
    assert ok.loaded == [(TopicName.parse(TOPIC), False)]
    assert ok.calls == [("end_txn", TXN, TxnAction.COMMIT, 9)]
    assert ok.sent == [commands.end_txn_on_subscription_response(7, TXN)]
    missing = handle(commands.end_txn_on_subscription(7, TXN, TOPIC, "gone", TxnAction.ABORT), spans)
    assert missing.calls == [] and missing.sent == [commands.end_txn_on_subscription_response(7, TXN)]
    assert spans == ["END_TXN_ON_SUBSCRIPTION", "END_TXN_ON_SUBSCRIPTION"]


@pytest.mark.parametrize("kind", ["partition", "subscription"])
def test_per_topic_failures_keep_their_response_type(kind: str, spans: list[str]) -> None:
    def request(topic: str) -> Command:
        if kind == "partition":
            return commands.end_txn_on_partition(8, TXN, topic, TxnAction.COMMIT)
        return commands.end_txn_on_subscription(8, TXN, topic, "sub", TxnAction.COMMIT)

    def failure(error: ServerError, message: str) -> Command:
        response = T.END_TXN_ON_PARTITION_RESPONSE if kind == "partition" else T.END_TXN_ON_SUBSCRIPTION_RESPONSE
        return commands.txn_response(response, 8, TXN, error=error, message=message)

    assert handle(request(TOPIC), spans, fail=REFUSED).sent == [failure(REFUSED.error, REFUSED.message)]
    not_owned = TxnError(ServerError.ServiceNotReady, "not served here")
    assert handle(request(TOPIC), spans, topic_error=not_owned).sent == [
        failure(ServerError.ServiceNotReady, "not served here")]
    bad_name = handle(request(BAD_TOPIC), spans)
    assert bad_name.loaded == [] and bad_name.sent == [failure(ServerError.ServiceNotReady, invalid_topic_message())]
    assert handle(request(TOPIC), spans, fail=ManagedLedgerError("fenced")).sent == [
        failure(ServerError.ServiceNotReady, "fenced")]
    assert handle(request(TOPIC), spans, topic_error=ManagedLedgerError("no ledger")).sent == [
        failure(ServerError.ServiceNotReady, "no ledger")]
    assert handle(request(TOPIC), spans, fail=Unexpected("boom")).sent == []


# ---- the v5 coordinator-assignment watch -----------------------------------------------------


def test_watch_tc_assignments_always_asks_the_scalable_coordinator(spans: list[str]) -> None:
    ok = handle(commands.watch_tc_assignments(9), spans)
    assert ok.calls == [("watch_assignments", 9, ok.cnx)] and ok.routed == [True]
    assert ok.sent == []   # the coordinator sends the snapshot itself
    failed = handle(commands.watch_tc_assignments(9), spans, fail=REFUSED)
    assert failed.sent == [commands.watch_tc_assignments_update(9, error=REFUSED.error, message=REFUSED.message)]
    closed = handle(commands.watch_tc_assignments_close(9), spans)
    assert closed.calls == [("unwatch_assignments", 9, closed.cnx)] and closed.routed == [True]
    assert closed.sent == []
    assert handle(commands.watch_tc_assignments_close(9), spans, fail=REFUSED).sent == []
    assert spans == []
