"""The transaction commands a broker answers: one table, one handler.

Theory of operation. Nine commands reach the broker core about transactions: the
coordinator's (TC_CLIENT_CONNECT_REQUEST, NEW_TXN, ADD_PARTITION_TO_TXN,
ADD_SUBSCRIPTION_TO_TXN, END_TXN), the per-topic ends a coordinator sends to the owners of
the topics and subscriptions a transaction touched (END_TXN_ON_PARTITION,
END_TXN_ON_SUBSCRIPTION), and the v5 coordinator-assignment watch (WATCH_TC_ASSIGNMENTS,
WATCH_TC_ASSIGNMENTS_CLOSE). Each is one row of `TXN_COMMANDS`, and `handle` runs any row
the same way: await the row's `call`, then send what its `answer` builds.

* `call` does the work. The coordinator commands go to the coordinator the registry
  routes them to (`scalable` set and `transactionCoordinatorScalableTopicsEnabled` on:
  the v5 one, else the v4 one; facts file C.3); the watch always asks the v5 one. The
  per-topic ones load the owned topic first and end the transaction on its buffer or on
  the subscription's pending acks. NEW_TXN's call returns the new transaction's id.
* `answer` builds the one command the client gets, success and failure alike, so each
  request keeps its own response type: a definite failure (`TxnError`) is that response
  with `error`/`message` set. NEW_TXN's failure carries no id, the rows that name a
  transaction (`names_txn`) answer with it; the watch answers only a failure (the
  coordinator sends the snapshots itself) and its close answers nothing.
* `unavailable_on`: errors answered as ServiceNotReady. The per-topic rows list a bad
  topic name and a storage error (the coordinator retries the end). Any other error is
  not answered: the task fails, the connection logs it, and the client's outcome stays
  unknown (a coordinator whose log append failed must not claim a definite abort).
* `traced`: the six commands that change a transaction run in a span named after the
  command (`embedded.tracing`); the connection opens it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from embedded.broker.managed_ledger.api import ManagedLedgerError
from embedded.broker.topic_name import InvalidTopicName, TopicName
from embedded.broker.txn_api import (
    ClientChannel,
    TransactionCoordinatorService,
    TxnError,
)
from harness.wire import Command, CommandType, ServerError, TxnAction, TxnId, commands

if TYPE_CHECKING:
    from embedded.broker.topic import PersistentTopic
    from embedded.broker.views import ConnectionView

log = logging.getLogger("embedded.broker.server_cnx")   # the connection's log, where these lines always went

T = CommandType


@dataclass(frozen=True)
class TxnRequest:
    """One transaction command received on a connection, with what its call may use."""

    broker: ConnectionView
    channel: ClientChannel
    body: Any

    @property
    def txn(self) -> TxnId:
        """The transaction the command names (every row with `names_txn`)."""
        return TxnId(self.body.txnid_most_bits, self.body.txnid_least_bits)

    def coordinator(self, *, scalable: bool | None = None) -> TransactionCoordinatorService:
        """The coordinator the registry routes this command to (by its `scalable` flag unless given)."""
        return self.broker.txn_registry.coordinator(scalable=self.body.scalable if scalable is None else scalable)

    async def owned_topic(self, name: str) -> PersistentTopic:
        """The topic `name`, loaded here (its owner); never created."""
        return await self.broker.get_topic(TopicName.parse(name), create=False)

    @property
    def low_watermark(self) -> int | None:
        body = self.body
        return body.txnid_least_bits_of_low_watermark if body.HasField("txnid_least_bits_of_low_watermark") else None


Call = Callable[[TxnRequest], Awaitable[TxnId | None]]
"""The work of one command; returns NEW_TXN's new id (None for the others); raises TxnError."""

Answer = Callable[[Any, TxnId | None, TxnError | None], Command | None]
"""(request body, the transaction to answer with, the failure or None) -> the command to send, if any."""


@dataclass(frozen=True)
class TxnCommand:
    """One row of the table: what a command does and how it is answered."""

    call: Call
    answer: Answer
    names_txn: bool = True                              # the request carries txnid_most/least_bits
    traced: bool = True                                 # runs in a span named after the command
    unavailable_on: tuple[type[Exception], ...] = ()    # answered as ServiceNotReady


# ---- the calls --------------------------------------------------------------------------------


async def _tc_client_connect(r: TxnRequest) -> None:
    await r.coordinator().tc_client_connect(r.body.tc_id)


async def _new_txn(r: TxnRequest) -> TxnId:
    return await r.coordinator().new_txn(r.body.tc_id, r.body.txn_ttl_millis)


async def _add_partitions(r: TxnRequest) -> None:
    await r.coordinator().add_partitions(r.txn, list(r.body.partitions))


async def _add_subscriptions(r: TxnRequest) -> None:
    await r.coordinator().add_subscriptions(r.txn, [(s.topic, s.subscription) for s in r.body.subscription])


async def _end_txn(r: TxnRequest) -> None:
    await r.coordinator().end_txn(r.txn, TxnAction(r.body.txn_action))


async def _end_txn_on_partition(r: TxnRequest) -> None:
    topic = await r.owned_topic(r.body.topic)
    await topic.transaction_buffer.end_txn(r.txn, TxnAction(r.body.txn_action), r.low_watermark)


async def _end_txn_on_subscription(r: TxnRequest) -> None:
    topic = await r.owned_topic(r.body.subscription.topic)
    subscription = topic.subscription(r.body.subscription.subscription)
    if subscription is None:
        log.info("END_TXN_ON_SUBSCRIPTION for %s on %s: no such subscription (nothing pending)",
                 r.txn, r.body.subscription.subscription)
        return
    await subscription.pending_ack.end_txn(r.txn, TxnAction(r.body.txn_action), r.low_watermark)


async def _watch_tc_assignments(r: TxnRequest) -> None:
    await r.coordinator(scalable=True).watch_assignments(r.body.watch_id, r.channel)


async def _watch_tc_assignments_close(r: TxnRequest) -> None:
    await r.coordinator(scalable=True).unwatch_assignments(r.body.watch_id, r.channel)


# ---- the answers ------------------------------------------------------------------------------


def _error_fields(error: TxnError | None) -> dict[str, Any]:
    return {} if error is None else {"error": error.error, "message": error.message}


def _txn_response(kind: CommandType) -> Answer:
    """A transaction response (`commands.TXN_RESPONSES`): request id, txn id, error if any."""
    def answer(body: Any, txn: TxnId | None, error: TxnError | None) -> Command:
        return commands.txn_response(kind, body.request_id, txn, **_error_fields(error))
    return answer


def _tc_client_connect_response(body: Any, txn: TxnId | None, error: TxnError | None) -> Command:
    return commands.tc_client_connect_response(body.request_id, **_error_fields(error))


def _watch_failure(body: Any, txn: TxnId | None, error: TxnError | None) -> Command | None:
    if error is None:
        return None   # the coordinator has sent the snapshot itself
    return commands.watch_tc_assignments_update(body.watch_id, **_error_fields(error))


def _unanswered(body: Any, txn: TxnId | None, error: TxnError | None) -> None:
    return None


_TOPIC_ERRORS: tuple[type[Exception], ...] = (InvalidTopicName, ManagedLedgerError)

TXN_COMMANDS: Mapping[CommandType, TxnCommand] = {
    T.TC_CLIENT_CONNECT_REQUEST: TxnCommand(_tc_client_connect, _tc_client_connect_response,
                                            names_txn=False, traced=False),
    T.NEW_TXN: TxnCommand(_new_txn, _txn_response(T.NEW_TXN_RESPONSE), names_txn=False),
    T.ADD_PARTITION_TO_TXN: TxnCommand(_add_partitions, _txn_response(T.ADD_PARTITION_TO_TXN_RESPONSE)),
    T.ADD_SUBSCRIPTION_TO_TXN: TxnCommand(_add_subscriptions, _txn_response(T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE)),
    T.END_TXN: TxnCommand(_end_txn, _txn_response(T.END_TXN_RESPONSE)),
    T.END_TXN_ON_PARTITION: TxnCommand(_end_txn_on_partition, _txn_response(T.END_TXN_ON_PARTITION_RESPONSE),
                                       unavailable_on=_TOPIC_ERRORS),
    T.END_TXN_ON_SUBSCRIPTION: TxnCommand(_end_txn_on_subscription,
                                          _txn_response(T.END_TXN_ON_SUBSCRIPTION_RESPONSE),
                                          unavailable_on=_TOPIC_ERRORS),
    T.WATCH_TC_ASSIGNMENTS: TxnCommand(_watch_tc_assignments, _watch_failure, names_txn=False, traced=False),
    T.WATCH_TC_ASSIGNMENTS_CLOSE: TxnCommand(_watch_tc_assignments_close, _unanswered,
                                             names_txn=False, traced=False),
}


async def handle(broker: ConnectionView, channel: ClientChannel, command: Command) -> None:
    """Run `command`'s row and send its answer on `channel` (KeyError: not a transaction command)."""
    row = TXN_COMMANDS[command.type]
    request = TxnRequest(broker, channel, command.body)
    named = request.txn if row.names_txn else None
    try:
        created = await row.call(request)
    except TxnError as err:
        answer = row.answer(command.body, named, err)
    except row.unavailable_on as err:
        answer = row.answer(command.body, named, TxnError(ServerError.ServiceNotReady, str(err)))
    else:
        answer = row.answer(command.body, created if created is not None else named, None)
    if answer is not None:
        channel.send(answer)


__all__ = ["TXN_COMMANDS", "Answer", "Call", "TxnCommand", "TxnRequest", "handle"]
