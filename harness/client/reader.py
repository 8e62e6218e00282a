"""Readers: a non-durable, exclusive subscription from a start position, for final reads.

`read_to_end` is what the drainer uses to read a topic "to the end, in log order":

1. For each partition/segment, GET_LAST_MESSAGE_ID gives the last message the broker
   will dispatch (entry id < 0: empty). On a transactional topic that is the last
   readable position, so open transactions cannot make the read wait forever.
2. Messages are received until every partition/segment has delivered its last id
   (or reported REACHED_END_OF_TOPIC), then whatever already arrived is drained too.
   A partition/segment is at its end already when the last message the reader handed
   out, or before any its start position, is at or past that id (Pulsar's
   `hasMessageAvailable` compares the same two): so a second call, as the drainer makes
   when a round ended before another partition's end, does not wait for a message that
   an earlier call delivered, and a reader started at the last message has nothing to
   read. (The broker's last id steps back over transaction markers and aborted
   messages, so those are never waited for either.)
3. The result is grouped per partition (index order) or per segment (parents before
   children), each group in the order the broker delivered it, which for an
   exclusive non-durable subscription is log order.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from harness.client.consumer import Consumer, Message, TopicConsumer
from harness.client.errors import ConnectionLostError, OperationTimeoutError
from harness.client.timers import Deadline
from harness.errors import OperationError
from harness.wire import MessageId

#: without the last message ids, a read acks what it has whenever no message came for this long
ACK_PAUSE_S = 0.5


class ReadIncompleteError(OperationTimeoutError):
    """`read_to_end` hit its deadline before every partition/segment reached its end.

    Attributes:
        messages: what was read so far, in the order `read_to_end` would return it.
        missing: the partitions/segments that had not reached their last message.
    """

    def __init__(self, message: str, messages: list[Message], missing: list[str]) -> None:
        super().__init__(message)
        self.messages = messages
        self.missing = missing


class LastMessageIdLostError(ConnectionLostError):
    """The connection dropped while GET_LAST_MESSAGE_ID for `part` was outstanding.

    Told apart from any lost connection because a broker can close the connection *because of*
    the request: Pulsar 2.10-4.0.3 on a terminated topic it loaded again throws a
    NullPointerException there and closes the whole connection (apache/pulsar#24063;
    docs/findings/historical/terminated-topic-unreadable-after-reload.md), every time it is asked.
    """

    def __init__(self, part: str, cause: ConnectionLostError) -> None:
        super().__init__(f"connection lost while asking the last message id of {part}: {cause}")
        self.part = part


class LastMessageIdUnansweredError(OperationTimeoutError):
    """GET_LAST_MESSAGE_ID for `part` got no answer in time.

    Told apart for the same reason as `LastMessageIdLostError`: Pulsar 3.2 on a terminated topic
    it loaded again throws the same NullPointerException inside a future and never answers.
    """

    def __init__(self, part: str, cause: OperationTimeoutError) -> None:
        super().__init__(f"no answer to the last message id of {part}: {cause}")
        self.part = part


class LastMessageIdFailedError(OperationError):
    """GET_LAST_MESSAGE_ID for `part` was answered with an error (`cause`).

    Told apart for the same reason as `LastMessageIdLostError`: Pulsar 3.3 on a terminated topic it
    loaded again, when the topic has a transaction buffer, answers `UnknownError: Failed to recover
    Transaction Buffer.` every time (ServerCnx gives that text to any failure of the request; the
    release matrix of 2026-12-03, 3.3.2), where other releases close the connection or stay silent.
    """

    def __init__(self, part: str, cause: OperationError) -> None:
        super().__init__(str(cause))
        self.part = part
        self.cause = cause
        self.definite = cause.definite


def reader_subscription_name() -> str:
    """A fresh subscription name for a reader (Java uses `reader-<random>` too)."""
    return f"reader-{uuid.uuid4().hex[:10]}"


def _reached(message_id: MessageId, last: MessageId) -> bool:
    mine = (message_id.ledger_id, message_id.entry_id)
    theirs = (last.ledger_id, last.entry_id)
    if mine != theirs:
        return mine > theirs
    return last.batch_index < 0 or message_id.batch_index >= last.batch_index


def _at_end(consumer: TopicConsumer, last: MessageId) -> bool:
    """Whether `consumer` has handed out everything up to the broker's `last` message id.

    As Pulsar's `ConsumerImpl.hasMessageAvailable`: compared with the last message
    dequeued, or, before any, with the start position. A start without a batch index
    names a whole entry, which the broker starts after (a reader's start is exclusive).
    """
    dequeued = consumer.last_dequeued
    if dequeued is not None:
        return _reached(dequeued, last)
    start = consumer.options.start_message_id
    if start is None:        # from the subscription's initial position: nothing read yet
        return False
    if start.batch_index < 0:
        return (start.ledger_id, start.entry_id) >= (last.ledger_id, last.entry_id)
    return _reached(start, last)


@dataclass
class _Progress:
    last: MessageId | None
    done: bool
    messages: list[Message]


class Reader:
    """Reads a topic (plain, partitioned or scalable) from a start position."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer
        self.topic = consumer.topic

    def read_next(self, timeout_s: float | None = None) -> Message | None:
        """The next message, or None when none arrives within the timeout. Acknowledged at
        once, as Java's `ReaderImpl.readNext` does (see `_ack_through`)."""
        message = self._consumer.receive(timeout_s)
        if message is not None:
            self._ack_through([message])
        return message

    @staticmethod
    def _ack_through(messages: list[Message]) -> None:
        """Cumulatively ack, per partition/segment, the last of `messages`, without waiting.

        Why a reader acks at all: its subscription is non-durable, so an ack keeps nothing, but a
        broker tells a subscription that a terminated topic reached its end only once the
        subscription's backlog is empty (Pulsar's `PersistentSubscription.acknowledgeMessage`),
        and Java's `ReaderImpl` acks every message it hands out for that. Without it a read of a
        terminated topic to REACHED_END_OF_TOPIC waits forever on a real broker."""
        last: dict[TopicConsumer, Message] = {}
        for message in messages:
            last[message.source] = message
        for source, message in last.items():
            source.acknowledge_cumulative_unconfirmed(message)

    @property
    def consumer(self) -> Consumer:
        """The underlying non-durable consumer."""
        return self._consumer

    @property
    def subscription(self) -> str:
        """The reader's subscription (`reader-<random>`): the name of its cursor in the broker's stats."""
        return self._consumer.subscription

    def read_to_end(self, timeout_s: float | None = None, *, ask_last: bool = True) -> list[Message]:
        """Every message from the current position to the end, grouped as the module says.

        `ask_last=False` sends no GET_LAST_MESSAGE_ID: the end is then only REACHED_END_OF_TOPIC,
        which a terminated topic's partitions report once everything is acknowledged: the read
        acks what arrived whenever the stream pauses (for a topic whose broker fails that request:
        `LastMessageIdLostError`, `LastMessageIdUnansweredError`, `LastMessageIdFailedError`).

        Raises:
            ReadIncompleteError: the deadline passed first (carries the partial read).
            LastMessageIdLostError: the connection dropped while GET_LAST_MESSAGE_ID was asked.
            LastMessageIdUnansweredError: GET_LAST_MESSAGE_ID got no answer before the deadline.
            LastMessageIdFailedError: GET_LAST_MESSAGE_ID was answered with an error.
        """
        deadline = Deadline.after(timeout_s if timeout_s is not None
                                  else self._consumer._ctx.config.operation_timeout_s)
        progress: dict[TopicConsumer, _Progress] = {}
        for child in self._consumer.consumers:
            if not ask_last:
                progress[child] = _Progress(None, False, [])
                continue
            try:
                last = child.last_message_id(deadline)
            except ConnectionLostError as err:
                raise LastMessageIdLostError(child.topic, err) from err
            except OperationTimeoutError as err:
                raise LastMessageIdUnansweredError(child.topic, err) from err
            except OperationError as err:
                raise LastMessageIdFailedError(child.topic, err) from err
            empty = last.entry_id < 0
            progress[child] = _Progress(None if empty else last, empty or _at_end(child, last), [])

        def finished() -> bool:
            return all(p.done or child.reached_end for child, p in progress.items())

        queue = self._consumer._queue
        acked: dict[TopicConsumer, int] = {}
        while not finished():
            # without the last ids, the end is the broker's REACHED_END_OF_TOPIC, which needs the
            # backlog acked: ack what arrived whenever the stream pauses
            wait = deadline if ask_last else Deadline.after(min(ACK_PAUSE_S, max(0.0, deadline.remaining())))
            message = queue.get(wait, stop=finished)
            if message is None:
                if finished():
                    break
                if not ask_last and deadline.remaining() > 0:
                    self._ack_new(progress, acked)
                    continue
                missing = [c.topic for c, p in progress.items() if not (p.done or c.reached_end)]
                raise ReadIncompleteError(
                    f"read of {self.topic} did not reach the end of {', '.join(missing)} before "
                    "the deadline", self._ordered(progress), missing)
            self._record(progress, message)
        while True:  # what already arrived belongs to the read too
            message = queue.get(Deadline.after(0))
            if message is None:
                break
            self._record(progress, message)
        self._ack_new(progress, acked)
        return self._ordered(progress)

    def _ack_new(self, progress: dict[TopicConsumer, _Progress], acked: dict[TopicConsumer, int]) -> None:
        """Ack each partition's last message read, once per new message (`_ack_through`)."""
        fresh = [entry.messages[-1] for child, entry in progress.items()
                 if entry.messages and acked.get(child) != len(entry.messages)]
        for child, entry in progress.items():
            acked[child] = len(entry.messages)
        self._ack_through(fresh)

    @staticmethod
    def _record(progress: dict[TopicConsumer, _Progress], message: Message) -> None:
        entry = progress.setdefault(message.source, _Progress(None, True, []))
        entry.messages.append(message)
        if entry.last is not None and _reached(message.message_id, entry.last):
            entry.done = True

    def _ordered(self, progress: dict[TopicConsumer, _Progress]) -> list[Message]:
        out: list[Message] = []
        order = self._consumer.consumers
        seen = set()
        for child in order:
            if child in progress:
                out.extend(progress[child].messages)
                seen.add(child)
        for child, entry in progress.items():
            if child not in seen:
                out.extend(entry.messages)
        return out

    def close(self, timeout_s: float | None = None) -> None:
        """Close the reader's subscription."""
        self._consumer.close(timeout_s)

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
