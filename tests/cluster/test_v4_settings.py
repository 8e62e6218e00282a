"""A broker with invalid PIP-160 settings refuses to start, and says which setting and how to fix it."""

from __future__ import annotations

import pytest

from harness.errors import EnvironmentProblem
from tests.cluster.conftest import ClusterFactory


def test_broker_refuses_to_start_with_a_too_small_batched_write_setting(cluster_factory: ClusterFactory) -> None:
    with pytest.raises(EnvironmentProblem) as err:
        cluster_factory(path="v4-batched", brokers=1, settings={"transactionPendingAckBatchedWriteMaxSize": 1024})
    message = str(err.value)
    assert "broker-0 exited during start-up" in message
    assert "transactionPendingAckBatchedWriteMaxSize" in message and "at least 131072" in message
