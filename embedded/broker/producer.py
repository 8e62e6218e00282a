"""A producer on a topic: turns SENDs into appends and answers them in order.

Receipts go out strictly in the order the SENDs came in (the C++ client closes the
connection on an out-of-order receipt), even when a transactional SEND takes a
different path than a plain one: each SEND gets a slot in `_pending`, and slots are
answered from the head as soon as the head is done.

Errors as Pulsar answers them: a checksum mismatch is SEND_ERROR ChecksumError (the
client drops that one message); a terminated topic is TopicTerminatedError; a
managed-ledger failure is PersistenceError, on which the client closes the
connection, reconnects and resends what is unacknowledged.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from embedded import tracing
from embedded.broker.entry import EntryInfo
from embedded.broker.managed_ledger.api import (
    ManagedLedgerError,
    ManagedLedgerFenced,
    ManagedLedgerTerminated,
)
from embedded.broker.position import Position
from embedded.broker.txn_api import TxnError
from harness.wire import ChecksumStatus, Command, CommandType, Payload, ServerError, TxnId, proto

if TYPE_CHECKING:
    from embedded.broker.server_cnx import ServerCnx
    from embedded.broker.topic import PersistentTopic

log = logging.getLogger(__name__)


class _Slot:
    __slots__ = ("done", "error", "highest_sequence_id", "messages", "position", "sequence_id", "size")

    def __init__(self, sequence_id: int, highest_sequence_id: int | None, messages: int, size: int) -> None:
        self.sequence_id = sequence_id
        self.highest_sequence_id = highest_sequence_id
        self.messages = messages
        self.size = size
        self.done = False
        self.position: Position | None = None
        self.error: tuple[ServerError, str] | None = None


def _send_error_of(err: BaseException) -> tuple[ServerError, str]:
    if isinstance(err, TxnError):
        return err.error, err.message
    if isinstance(err, ManagedLedgerTerminated):
        return ServerError.TopicTerminatedError, str(err)
    if isinstance(err, (ManagedLedgerFenced, ManagedLedgerError)):
        return ServerError.PersistenceError, str(err)
    return ServerError.UnknownError, repr(err)


class Producer:
    def __init__(self, topic: PersistentTopic, cnx: ServerCnx, producer_id: int, name: str, *,
                 user_provided_name: bool, access_mode: int, epoch: int, metadata: dict[str, str]) -> None:
        self.topic = topic
        self.cnx = cnx
        self.producer_id = producer_id
        self.name = name
        self.user_provided_name = user_provided_name
        self.access_mode = access_mode
        self.epoch = epoch
        self.metadata = metadata
        self.connected_since = time.time()
        self.closed = False
        self._pending: deque[_Slot] = deque()
        self.msgs_in = 0
        self.bytes_in = 0

    def publish(self, body: Any, payload: Payload) -> None:
        """Handle one SEND (already matched to this producer)."""
        sequence_id = body.sequence_id
        highest = body.highest_sequence_id if body.HasField("highest_sequence_id") else None
        if payload.checksum is ChecksumStatus.MISMATCH:
            log.warning("%s: checksum mismatch on sequence %d from %s", self.topic.name, sequence_id, self.name)
            self.cnx.send(Command(CommandType.SEND_ERROR, proto.CommandSendError(
                producer_id=self.producer_id, sequence_id=sequence_id, error=int(ServerError.ChecksumError),
                message="the message's checksum does not match its content")))
            return
        messages = body.num_messages or 1
        data = bytes(payload.entry)
        slot = _Slot(sequence_id, highest, messages, len(data))
        self._pending.append(slot)
        if body.HasField("txnid_most_bits") or body.HasField("txnid_least_bits"):
            txn = TxnId(body.txnid_most_bits, body.txnid_least_bits)
            future: asyncio.Future[Position] = asyncio.ensure_future(
                tracing.run("SEND", self.topic.publish_txn(txn, data, EntryInfo(messages, txn, False))))
        else:
            future = self.topic.publish(data, EntryInfo(messages, None, False))
        future.add_done_callback(functools.partial(self._completed, slot))

    def _completed(self, slot: _Slot, future: asyncio.Future[Position]) -> None:
        slot.done = True
        if future.cancelled():
            slot.error = (ServerError.PersistenceError, "the write was cancelled (topic closing)")
        elif future.exception() is not None:
            slot.error = _send_error_of(future.exception())   # type: ignore[arg-type]
        else:
            slot.position = future.result()
        if self._pending and self._pending[0] is slot:
            self._answer()

    def _answer(self) -> None:
        pending = self._pending
        cnx = self.cnx
        counters = self.topic.counters
        while pending and pending[0].done:
            slot = pending.popleft()
            if self.closed:
                continue
            if slot.error is None and slot.position is not None:
                self.msgs_in += slot.messages
                self.bytes_in += slot.size
                counters.published(slot.messages, slot.size)
                body = proto.CommandSendReceipt(producer_id=self.producer_id, sequence_id=slot.sequence_id)
                message_id = body.message_id
                message_id.ledgerId = slot.position.ledger_id
                message_id.entryId = slot.position.entry_id
                if slot.highest_sequence_id is not None:
                    body.highest_sequence_id = slot.highest_sequence_id
                cnx.send(Command(CommandType.SEND_RECEIPT, body))
            else:
                error, message = slot.error or (ServerError.UnknownError, "no position")
                cnx.send(Command(CommandType.SEND_ERROR, proto.CommandSendError(
                    producer_id=self.producer_id, sequence_id=slot.sequence_id, error=int(error), message=message)))

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def stats(self) -> dict[str, Any]:
        return {"producerId": self.producer_id, "producerName": self.name, "msgInCounter": self.msgs_in,
                "bytesInCounter": self.bytes_in, "address": self.cnx.remote,
                "connectedSince": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.connected_since)),
                "accessMode": {0: "Shared", 1: "Exclusive", 2: "WaitForExclusive", 3: "ExclusiveWithFencing"}.get(
                    self.access_mode, str(self.access_mode)),
                "pendingPublishes": len(self._pending), "metadata": self.metadata}
