"""Shared fixtures: an embedded cluster (proxy, metadata, ledger, brokers) that is always stopped.

`embedded_cluster` starts the default cluster (v4 path, 2 brokers, fast timeouts).
`cluster_factory(path=..., brokers=..., settings=...)` starts others; every cluster
started through it is brought down at teardown, also when the test fails, so no
process outlives a test. Clusters live under the test's tmp_path and their services
exit if the test process dies (`parent_pid`).

`FAST_SETTINGS` shortens what would make failover tests slow: the metadata session
timeout (how long a dead broker's topics stay assigned to it) and keep-alives.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from harness.targets.embedded import EmbeddedCluster, EmbeddedSpec
from harness.txn_paths import TxnPath

FAST_SETTINGS: dict[str, Any] = {
    "metadataStoreSessionTimeoutMillis": 3000,
    "keepAliveIntervalSeconds": 10,
    "managedLedgerAddEntryTimeoutSeconds": 5,
    "brokerClientOperationTimeoutSeconds": 5,
}

ClusterFactory = Callable[..., EmbeddedCluster]


@contextmanager
def started_clusters(base: Path) -> Iterator[ClusterFactory]:
    """A factory of clusters under `base`; all of them are brought down on exit."""
    started: list[EmbeddedCluster] = []

    def start(*, path: TxnPath | str = TxnPath.V4, brokers: int = 2, settings: Mapping[str, Any] | None = None,
              name: str | None = None) -> EmbeddedCluster:
        directory = base / (name or f"cluster-{len(started)}")
        spec = EmbeddedSpec(path=TxnPath(path), brokers=brokers, settings={**FAST_SETTINGS, **dict(settings or {})},
                            directory=directory, parent_pid=os.getpid(), ready_timeout_s=90.0)
        cluster = EmbeddedCluster(spec)
        started.append(cluster)
        cluster.up()
        return cluster

    try:
        yield start
    finally:
        errors = []
        for cluster in reversed(started):
            try:
                cluster.down()
            except Exception as err:   # keep stopping the others
                errors.append(err)
        if errors:
            raise errors[0]


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[ClusterFactory]:
    with started_clusters(tmp_path) as start:
        yield start


@pytest.fixture
def embedded_cluster(cluster_factory: ClusterFactory) -> EmbeddedCluster:
    return cluster_factory()
