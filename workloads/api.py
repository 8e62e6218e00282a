"""What the workloads need from a Pulsar client, as Protocols.

The workloads, the users and the load process are written against these, never
against `harness.client` classes, so a test can hand them a fake client and the real
`harness.client.PulsarClient` fits without an adapter. The signatures are the subset
of `harness.client`'s public API the workloads call.

Errors: every call that the history records raises a `harness.errors.DefiniteError`
(the operation certainly had no effect) or `harness.errors.IndeterminateError`
(outcome unknown); anything else is a bug and is recorded as `info`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol


class TransactionApi(Protocol):
    """An open transaction; `str(id)` is the history's `"<most>:<least>"`."""

    id: Any

    def commit(self, timeout_s: float | None = None) -> None: ...

    def abort(self, timeout_s: float | None = None) -> None: ...

    # A transaction may also say how many END_TXN requests it sent again after a connection was
    # lost with one in flight (`end_txn_resends`, harness.client.Transaction); the workloads read it
    # with getattr, so a transaction without it counts none.


class ReceiptApi(Protocol):
    """Where a sent message was stored."""

    @property
    def msg_id(self) -> str: ...

    @property
    def segment(self) -> str | None: ...


class MessageApi(Protocol):
    """A received message."""

    @property
    def data(self) -> bytes: ...

    @property
    def key(self) -> str | None: ...

    @property
    def redelivery_count(self) -> int: ...

    @property
    def topic(self) -> str: ...

    @property
    def segment(self) -> str | None: ...

    @property
    def publish_time_ms(self) -> int: ...

    @property
    def msg_id(self) -> str: ...

    @property
    def arrived_ns(self) -> int:
        """`time.monotonic_ns()` when the broker's frame arrived (0 when unknown)."""


def delivery_extra(message: MessageApi, clock_base_ns: int) -> dict[str, int]:
    """The `extra` of a `receive` event: the redelivery count and, when the client knows it,
    `delivered_ns`, the run-clock time the broker's frame arrived. A message can wait in the
    receiver queue; checks that ask "was it delivered after X?" need this time, not the time
    the application took it (which is the event's `time_ns`)."""
    extra = {"redelivery": int(message.redelivery_count)}
    arrived = int(getattr(message, "arrived_ns", 0) or 0)
    if arrived > 0:
        extra["delivered_ns"] = arrived - clock_base_ns
    return extra


class SendFuture(Protocol):
    """The outcome of `ProducerApi.send_async`: a receipt, or the error `send` would raise."""

    def done(self) -> bool: ...

    def exception(self) -> BaseException | None: ...

    def result(self, timeout_s: float | None = None) -> Any: ...

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """`callback(future)` on completion, in the completing thread (at once if done)."""


class ProducerApi(Protocol):
    def send(self, data: bytes | str, *, key: str | None = None,
             properties: Mapping[str, str] | None = None, txn: Any = None,
             event_time_ms: int | None = None, timeout_s: float | None = None) -> ReceiptApi: ...

    def send_async(self, data: bytes | str, *, key: str | None = None,
                   properties: Mapping[str, str] | None = None, txn: Any = None,
                   event_time_ms: int | None = None, timeout_s: float | None = None) -> SendFuture:
        """Send without waiting for the receipt; failures come in the future, never raised."""

    def give_up(self, future: Any) -> None:
        """Stop waiting for a `send_async` at its deadline: the future fails as `send` would."""

    def close(self, timeout_s: float | None = None) -> None: ...


class ConsumerApi(Protocol):
    def receive(self, timeout_s: float | None = None) -> Any: ...

    def acknowledge(self, message: Any, *, txn: Any = None, timeout_s: float | None = None) -> None: ...

    def acknowledge_cumulative(self, message: Any, *, txn: Any = None,
                               timeout_s: float | None = None) -> None: ...

    def negative_acknowledge(self, message: Any) -> None: ...

    def redeliver_unacknowledged(self) -> None:
        """Everything unacknowledged again (Exclusive and Failover: a new consumer epoch)."""

    def close(self, timeout_s: float | None = None) -> None: ...


class ReaderApi(Protocol):
    def read_to_end(self, timeout_s: float | None = None) -> list[Any]: ...

    def close(self, timeout_s: float | None = None) -> None: ...


class ClientApi(Protocol):
    """The client object a load process (or the drainer) holds."""

    def create_producer(self, topic: str, *, batching: Any = None,
                        timeout_s: float | None = None) -> ProducerApi: ...

    def subscribe(self, topic: str, subscription: str, *, sub_type: Any = ...,
                  consumer_name: str | None = None, receiver_queue_size: int = 1000,
                  timeout_s: float | None = None) -> ConsumerApi: ...

    def create_reader(self, topic: str, *, timeout_s: float | None = None) -> ReaderApi: ...

    def new_transaction(self, timeout_s: float = 60.0, *,
                        request_timeout_s: float | None = None) -> TransactionApi: ...

    def abort_transaction(self, txn_id: str, timeout_s: float | None = None) -> None:
        """END_TXN ABORT of a transaction another client opened, by its id (workloads.foreign)."""

    def close(self, timeout_s: float = 5.0) -> None: ...
