"""What the users of one load process share: producers, input supply, conflict groups.

Theory of operation.

*Producers.* One producer per topic per process, created on first use and shared by
every user (a producer is thread-safe; each user's sends are still sequential, so
each process's order per key is kept).

*Input supply.* Consume-transform-produce and ack-only users need messages to
consume; feeder users send them. `FeedCredit` keeps the backlog small and bounded:
each consuming user registers a demand on its topic, feeders send to the topic
furthest below its demand, and a send counts as outstanding until a consumer's
transaction that consumed it commits. The accounting is per process and may drift
(an `info` send that never landed, a conflicting ack that consumed a sibling's
message), so a consumer that finds its topic empty reports it starved and the count
for that topic restarts from zero. The backlog per topic therefore stays within the
demand plus what drifted since the last starvation report.

*Conflict groups.* Ack-only users on the same subscription in one process form an
`AckGroup`: each publishes the messages it currently holds, and a user may also ack
one a sibling holds, so two transactions ack the same message and the broker must
refuse one of them (TransactionConflict) or, if the first already ended, the
message is already settled.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Callable
from typing import Any

from workloads.api import ClientApi, ProducerApi


class ProducerCache:
    """topic -> producer, created lazily; creation errors propagate to the caller.

    `batching` applies to every producer; `batched_topics` get `topic_batching` (a feeder's
    batches, workload.feed_batch) when `batching` is off.
    """

    def __init__(self, client: ClientApi, *, batching: bool, timeout_s: float,
                 batched_topics: frozenset[str] = frozenset(), topic_batching: Any = None) -> None:
        self.client = client
        self.batching = batching
        self.batched_topics = batched_topics
        self.topic_batching = topic_batching
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._creating: dict[str, threading.Lock] = {}
        self._producers: dict[str, ProducerApi] = {}

    def get(self, topic: str) -> ProducerApi:
        producer = self._producers.get(topic)
        if producer is not None:
            return producer
        with self._lock:
            gate = self._creating.setdefault(topic, threading.Lock())
        with gate:  # one creation per topic; others wait for it
            producer = self._producers.get(topic)
            if producer is None:
                producer = self.client.create_producer(topic, batching=self._batching_of(topic),
                                                       timeout_s=self.timeout_s)
                self._producers[topic] = producer
        return producer

    def _batching_of(self, topic: str) -> Any:
        if self.batching:
            return True
        return self.topic_batching if topic in self.batched_topics else None

    def close(self, timeout_s: float) -> None:
        producers, self._producers = list(self._producers.values()), {}
        for producer in producers:
            with contextlib.suppress(Exception):  # best effort; the history is already written
                producer.close(timeout_s)


class FeedCredit:
    """Demand-driven supply of input messages per topic (see the module docstring)."""

    def __init__(self, per_consumer: int) -> None:
        if per_consumer < 1:
            raise ValueError(f"per_consumer must be >= 1, got {per_consumer}")
        self.per_consumer = per_consumer
        self._cond = threading.Condition()
        self._consumers: dict[str, int] = {}
        self._outstanding: dict[str, int] = {}

    def add_consumer(self, topic: str) -> None:
        with self._cond:
            self._consumers[topic] = self._consumers.get(topic, 0) + 1
            self._outstanding.setdefault(topic, 0)
            self._cond.notify_all()

    def remove_consumer(self, topic: str) -> None:
        with self._cond:
            left = self._consumers.get(topic, 0) - 1
            if left > 0:
                self._consumers[topic] = left
            else:
                self._consumers.pop(topic, None)

    def _deficit_locked(self, topic: str) -> int:
        return self._consumers.get(topic, 0) * self.per_consumer - self._outstanding.get(topic, 0)

    def take(self, timeout_s: float, choose: Callable[[list[str]], str] | None = None) -> str | None:
        """Reserve one message to send: the topic furthest below its demand, or None."""
        with self._cond:
            for _ in range(2):  # check, wait once (bounded), check again
                short = [(self._deficit_locked(t), t) for t in sorted(self._consumers)]
                short = [(d, t) for d, t in short if d > 0]
                if short:
                    most = max(d for d, _ in short)
                    candidates = [t for d, t in short if d == most]
                    topic = choose(candidates) if choose is not None else candidates[0]
                    self._outstanding[topic] = self._outstanding.get(topic, 0) + 1
                    return topic
                if timeout_s <= 0:
                    return None
                self._cond.wait(timeout_s)
            return None

    def take_more(self, topic: str, most: int) -> int:
        """Reserve up to `most` more messages for `topic` without waiting: as many as its demand
        still lacks (a feeder's batch, after `take` chose the topic)."""
        with self._cond:
            more = max(0, min(most, self._deficit_locked(topic)))
            self._outstanding[topic] = self._outstanding.get(topic, 0) + more
            return more

    def unreserve(self, topic: str) -> None:
        """A reserved send certainly did not happen."""
        self.consumed(topic, 1)

    def consumed(self, topic: str, count: int) -> None:
        with self._cond:
            self._outstanding[topic] = max(0, self._outstanding.get(topic, 0) - count)
            self._cond.notify_all()

    def starved(self, topic: str) -> None:
        """A consumer found `topic` empty: restart its count (see the module docstring)."""
        with self._cond:
            self._outstanding[topic] = 0
            self._cond.notify_all()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def outstanding(self, topic: str) -> int:
        with self._cond:
            return self._outstanding.get(topic, 0)


class AckGroup:
    """The ack-only users of one subscription in this process, and what each holds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, list[Any]] = {}

    def hold(self, process: str, messages: list[Any]) -> None:
        with self._lock:
            self._held[process] = list(messages)

    def release(self, process: str) -> None:
        with self._lock:
            self._held.pop(process, None)

    def steal(self, process: str, rng: random.Random) -> tuple[str, Any] | None:
        """A message another member holds now (its owner and the message), or None."""
        with self._lock:
            owners = sorted(p for p, held in self._held.items() if p != process and held)
            if not owners:
                return None
            owner = rng.choice(owners)
            return owner, rng.choice(self._held[owner])


class AckGroups:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: dict[tuple[str, str], AckGroup] = {}

    def get(self, topic: str, subscription: str) -> AckGroup:
        with self._lock:
            return self._groups.setdefault((topic, subscription), AckGroup())
