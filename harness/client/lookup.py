"""Binary-protocol discovery: partitioned metadata and topic lookup with redirects.

Follows Java's `BinaryProtoLookupService`:

* PARTITIONED_METADATA goes to any service-URL broker; 0 partitions means a plain topic.
* LOOKUP goes to a service-URL broker first. `Redirect` means "ask that broker", with
  the response's `authoritative` flag copied into the next LOOKUP; `Connect` names the
  owner. At most `max_lookup_redirects` redirects are followed.
* With `proxy_through_service_url` the owner is reached through the service URL
  (logical = owner, physical = the service host we asked), so CONNECT carries
  `proxy_to_broker_url`.
* A failed lookup whose error is retriable (ServiceNotReady, TooManyRequests,
  MetadataError ...) is retried from the service URL with backoff until the deadline.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from harness.client.config import ClientConfig
from harness.client.connection import ClientConnection, ConnectionPool, next_request_id
from harness.client.errors import (
    ConnectionLostError,
    NotReadyError,
    NotSentError,
    OperationTimeoutError,
    SetupError,
    setup_error,
)
from harness.client.timers import Backoff, Deadline
from harness.wire import (
    Command,
    CommandType,
    LookupType,
    PartitionedMetadataResult,
    ServerError,
    commands,
)

log = logging.getLogger(__name__)

R = TypeVar("R")


@dataclass(frozen=True)
class BrokerAddress:
    """Where a topic lives: the owner (logical) and where to open the socket (physical)."""

    logical: str
    physical: str


class LookupService:
    """Partitioned metadata and owner lookups over the binary protocol."""

    def __init__(self, config: ClientConfig, pool: ConnectionPool) -> None:
        self._config = config
        self._pool = pool

    def _ask(self, conn: ClientConnection, command: Command, request_id: int,
             deadline: Deadline, what: str) -> Command:
        try:
            return conn.request(command, request_id, max(0.001, deadline.remaining()))
        except (ConnectionLostError, OperationTimeoutError, NotSentError, NotReadyError) as exc:
            raise SetupError(f"{what}: {exc}", retriable=True) from None

    def _retrying(self, what: str, deadline: Deadline, attempt_fn: Callable[[], R]) -> R:
        backoff = Backoff(self._config.initial_backoff_s, self._config.max_backoff_s)
        stop = threading.Event()
        while True:
            try:
                return attempt_fn()
            except (SetupError, NotReadyError) as exc:
                retriable = isinstance(exc, NotReadyError) or exc.retriable
                delay = backoff.next()
                if not retriable or deadline.remaining() <= delay:
                    raise
                log.debug("%s failed (%s); retrying in %.3gs", what, exc, delay)
                stop.wait(delay)

    def partitioned_metadata(self, topic: str, deadline: Deadline) -> int:
        """How many partitions `topic` has (0: not partitioned).

        Raises:
            SetupError: the broker answered an error, or no broker answered in time.
        """
        what = f"partitioned metadata of {topic}"

        def attempt() -> int:
            conn = self._pool.service_connection(deadline)
            request_id = next_request_id()
            answer = self._ask(conn, commands.partitioned_metadata(topic, request_id),
                               request_id, deadline, what)
            error = commands.error_of(answer)
            if error is None and answer.type is CommandType.PARTITIONED_METADATA_RESPONSE \
                    and answer.body.response == PartitionedMetadataResult.Failed:
                error = (ServerError.UnknownError, answer.body.message)
            if error is not None:
                raise setup_error(what, error[0], error[1])
            return int(answer.body.partitions)

        return self._retrying(what, deadline, attempt)

    def lookup(self, topic: str, deadline: Deadline) -> BrokerAddress:
        """The broker that owns `topic`, following redirects.

        Raises:
            SetupError: lookup failed, or more than `max_lookup_redirects` redirects.
        """
        what = f"lookup of {topic}"
        return self._retrying(what, deadline, lambda: self._lookup_once(topic, deadline, what))

    def _lookup_once(self, topic: str, deadline: Deadline, what: str) -> BrokerAddress:
        conn = self._pool.service_connection(deadline)
        service_url = conn.physical_url
        authoritative = False
        for _ in range(self._config.max_lookup_redirects + 1):
            request_id = next_request_id()
            answer = self._ask(conn, commands.lookup(topic, request_id, authoritative=authoritative,
                                                     advertised_listener_name=self._config.listener_name),
                               request_id, deadline, what)
            error = commands.error_of(answer)
            if error is not None:
                raise setup_error(what, error[0], error[1])
            body = answer.body
            url = body.brokerServiceUrl
            if not url:
                raise SetupError(f"{what}: the broker answered without a brokerServiceUrl "
                                 "(only TLS listeners?); give the cluster a pulsar:// listener")
            if body.response == LookupType.Redirect:
                authoritative = body.authoritative
                conn = self._pool.get(url, None, deadline)
                continue
            if body.proxy_through_service_url:
                return BrokerAddress(url, service_url)
            return BrokerAddress(url, url)
        raise SetupError(f"{what}: more than {self._config.max_lookup_redirects} redirects; "
                         "the cluster's ownership is flapping or misconfigured")
