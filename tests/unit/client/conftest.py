"""Fixtures: a fake cluster on 127.0.0.1 and clients that are always closed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.client import PulsarClient
from tests.unit.client.fake_broker import FakeCluster


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., FakeCluster]]:
    clusters: list[FakeCluster] = []

    def make(brokers: int = 1, **kwargs: Any) -> FakeCluster:
        cluster = FakeCluster(brokers, **kwargs)
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()


@pytest.fixture
def cluster(make_cluster: Callable[..., FakeCluster]) -> FakeCluster:
    return make_cluster(1, tc_count=2)


@pytest.fixture
def make_client() -> Iterator[Callable[..., PulsarClient]]:
    clients: list[PulsarClient] = []

    def make(url: str, **kwargs: Any) -> PulsarClient:
        settings: dict[str, Any] = {"operation_timeout_s": 5.0, "initial_backoff_s": 0.01,
                                    "max_backoff_s": 0.05, "reconnect_timeout_s": 5.0}
        settings.update(kwargs)
        client = PulsarClient(url, **settings)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close(timeout_s=1.0)


@pytest.fixture
def client(cluster: FakeCluster, make_client: Callable[..., PulsarClient]) -> PulsarClient:
    return make_client(cluster.url)
