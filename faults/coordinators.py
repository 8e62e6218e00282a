"""Locating the transaction coordinators, and the owners of topics: which broker hosts each, right now.

A coordinator moves (its broker dies, ownership or leadership changes), so the
nemesis asks at injection time, with a fresh `harness.client.PulsarClient` each
time: a long-lived client could answer from a connection that has not noticed
its broker is gone. v4 coordinators are the owners of the partitions of
`transaction_coordinator_assign`; v5 ones are the leaders WATCH_TC_ASSIGNMENTS
reports. The client is given every broker's URL, so one unreachable broker (say,
partitioned by another fault) does not hide the others.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from harness.target import ClusterInfo, ServiceRole, multi_host_service_url
from harness.txn_paths import TxnPath

CLOSE_WAIT_S = 5.0
T = TypeVar("T")


def _close_in_background(client: Any, wait_s: float) -> None:
    """Close the client without letting a close that hangs hold up the nemesis.

    Closing a client while coordinator handlers still connect in the background can
    deadlock inside the client's connection pool (a connection closed while the pool's
    lock is held calls back into the pool); the answer is already in hand, so the
    close is given `wait_s` and then left to its daemon thread.
    """
    closer = threading.Thread(target=client.close, name="close coordinator locator client", daemon=True)
    closer.start()
    closer.join(wait_s)


class ClientCoordinatorLocator:
    def __init__(self, service_url: str, txn_path: TxnPath, timeout_s: float,
                 listener_name: str | None = None) -> None:
        self.service_url = service_url
        self.txn_path = txn_path
        self.timeout_s = timeout_s
        self.listener_name = listener_name

    def _ask(self, question: Callable[[Any], T]) -> T:
        """`question(client)` on a fresh client (see the module docstring), closed without waiting long."""
        from harness.client import PulsarClient

        client = PulsarClient(self.service_url, txn_path=self.txn_path.value, operation_timeout_s=self.timeout_s,
                              listener_name=self.listener_name)
        try:
            return question(client)
        finally:
            _close_in_background(client, CLOSE_WAIT_S)

    def coordinator_brokers(self) -> dict[int, str]:
        return self._ask(lambda client: dict(client.coordinator_brokers(timeout_s=self.timeout_s)))

    def owner_broker(self, topic: str) -> str:
        return self._ask(lambda client: str(client.owner_of(topic, timeout_s=self.timeout_s)))

    def close(self) -> None:
        return None


def all_brokers_url(cluster: ClusterInfo) -> str:
    """`pulsar://h:p,h:p` of every broker's advertised address, or the cluster's service URL."""
    return multi_host_service_url(s.service_url for s in cluster.by_role(ServiceRole.BROKER)) or cluster.service_url


def make_coordinator_locator(cluster: ClusterInfo, txn_path: TxnPath,
                             *, timeout_s: float = 10.0) -> ClientCoordinatorLocator:
    """The locator for this cluster: asks its brokers, through the client, who hosts each coordinator."""
    return ClientCoordinatorLocator(all_brokers_url(cluster), txn_path, timeout_s, cluster.listener_name)
