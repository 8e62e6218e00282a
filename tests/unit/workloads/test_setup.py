"""Setup over a fake admin and the fake client: what is created, retries, readiness, clear errors."""

from __future__ import annotations

from typing import Any

import pytest

from harness.client.admin import AdminError
from harness.client.errors import CoordinatorNotFoundError, NotReadyError, Op
from harness.errors import EnvironmentProblem
from harness.target import ClusterInfo
from harness.txn_paths import TxnPath
from harness.wire import ServerError
from orchestrator.load import setup as workload_setup
from orchestrator.load.setup import prepare, wait_transactions_ready
from tests.unit.workloads.conftest import scenario
from tests.unit.workloads.fakes import FakeClient
from workloads.topology import plan


class FakeAdmin:
    def __init__(self, tenants: tuple[str, ...] = ("public", "pulsar")) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self._tenants = list(tenants)
        self.failures: list[AdminError] = []

    def _maybe_fail(self) -> None:
        if self.failures:
            raise self.failures.pop(0)

    def tenants(self) -> list[str]:
        self._maybe_fail()
        return list(self._tenants)

    def create_tenant(self, tenant: str) -> None:
        self.calls.append(("tenant", tenant))

    def create_namespace(self, tenant: str, namespace: str) -> None:
        self._maybe_fail()
        self.calls.append(("namespace", tenant, namespace))

    def create_topic(self, topic: str) -> None:
        self._maybe_fail()
        self.calls.append(("topic", topic))

    def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        self.calls.append(("partitioned", topic, partitions))

    def create_scalable_topic(self, topic: str, segments: int) -> None:
        self.calls.append(("scalable", topic, segments))


@pytest.fixture(autouse=True)
def no_real_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(workload_setup, "_sleep", slept.append)
    monkeypatch.setattr(workload_setup, "_set_infinite_retention", lambda *a: None)
    return slept


def cluster(path: TxnPath = TxnPath.V4, admin_url: str = "http://127.0.0.1:1") -> ClusterInfo:
    return ClusterInfo(target="embedded", txn_path=path, service_url="pulsar://127.0.0.1:2", admin_url=admin_url)


def test_v4_topics_namespace_and_subscriptions_are_created() -> None:
    config = scenario("workload: {kind: consume-transform-produce, topics: 2, topics_per_txn: 1, participants: 1}")
    topology = plan(config, "r")
    admin, client = FakeAdmin(), FakeClient()
    prepare(cluster(), config, topology, admin=admin, client=client)
    assert admin.calls[0] == ("namespace", "public", "txnbench")
    assert [c[1] for c in admin.calls if c[0] == "topic"] == topology.topics
    assert sorted(client.subs) == sorted(topology.subscriptions)
    assert all(not sub.consumers for sub in client.subs.values())        # closed again
    assert {sub.sub_type for sub in client.subs.values()} == {"Shared", "Failover"}


def test_partitioned_and_scalable_topics_and_a_new_tenant() -> None:
    admin = FakeAdmin()
    config = scenario("workload: {kind: atomic-produce, partitions: 3, namespace: acme/bench}")
    prepare(cluster(), config, plan(config, "r"), admin=admin, client=FakeClient())
    assert ("tenant", "acme") in admin.calls
    assert {c[2] for c in admin.calls if c[0] == "partitioned"} == {3}
    v5 = scenario("path: v5\nworkload: {kind: atomic-produce, segments: 4}")
    admin = FakeAdmin()
    prepare(cluster(TxnPath.V5), v5, plan(v5, "r"), admin=admin, client=FakeClient())
    assert next(c for c in admin.calls if c[0] == "scalable")[2] == 4


def test_one_participants_shape_serves_both_paths() -> None:
    """v4 partitions = v5 initial segments unless a scenario sets one apart; one participant is unpartitioned."""
    for participants in (1, 3):
        text = f"workload: {{kind: atomic-produce, participants: {participants}}}"
        v4, v5 = scenario(text), scenario("path: v5\n" + text)
        assert v4.workload.shape(False) == v5.workload.shape(True)
        assert v4.workload.shape(False)["per_topic"] == participants
        admin = FakeAdmin()
        prepare(cluster(), v4, plan(v4, "r"), admin=admin, client=FakeClient())
        assert {c[2] for c in admin.calls if c[0] == "partitioned"} == ({participants} if participants > 1 else set())
        admin = FakeAdmin()
        prepare(cluster(TxnPath.V5), v5, plan(v5, "r"), admin=admin, client=FakeClient())
        assert {c[2] for c in admin.calls if c[0] == "scalable"} == {participants}


def test_transient_admin_errors_are_retried_and_others_name_the_step(no_real_waits: list[float]) -> None:
    config = scenario("workload: {kind: atomic-produce, topics: 1, topics_per_txn: 1, verifiers: 0, participants: 1}")
    admin = FakeAdmin()
    admin.failures = [AdminError("busy", status=503), AdminError("no answer")]
    prepare(cluster(), config, plan(config, "r"), admin=admin, client=FakeClient())
    assert len(no_real_waits) == 2 and ("topic", plan(config, "r").topics[0]) in admin.calls
    admin = FakeAdmin()
    admin.failures = [AdminError("HTTP 403 not allowed", status=403)]
    with pytest.raises(EnvironmentProblem, match="setup: listing tenants failed: HTTP 403"):
        prepare(cluster(), config, plan(config, "r"), admin=admin, client=FakeClient())


def test_without_an_admin_url_partitioned_topics_cannot_be_made() -> None:
    config = scenario("workload: {kind: atomic-produce, partitions: 2}")
    with pytest.raises(EnvironmentProblem, match="pass --admin-url"):
        prepare(cluster(admin_url=""), config, plan(config, "r"), client=FakeClient())
    plain = scenario("workload: {kind: atomic-produce, verifiers: 0, participants: 1}")
    prepare(cluster(admin_url=""), plain, plan(plain, "r"), client=FakeClient())   # auto-created on use


def test_subscription_creation_failure_is_clear() -> None:
    config = scenario("workload: {kind: atomic-produce, topics: 1, topics_per_txn: 1}")
    client = FakeClient()
    client.fail_next("subscribe", NotReadyError("no broker"), times=5)
    with pytest.raises(EnvironmentProblem, match=r"creating subscription 'verify' on .* failed: no broker"):
        prepare(cluster(), config, plan(config, "r"), admin=FakeAdmin(), client=client)


def test_transactions_ready_after_a_few_refusals(no_real_waits: list[float]) -> None:
    config = scenario("workload: {kind: atomic-produce}")
    client = FakeClient()
    client.fail_next("new-txn", CoordinatorNotFoundError(Op.NEW_TXN, ServerError.TransactionCoordinatorNotFound,
                                                         "not loaded"), times=2)
    wait_transactions_ready(cluster(), config, timeout_s=60, client=client)
    assert no_real_waits == [0.2, 0.4]
    assert client.ended == [("1:1", "committed")]


def test_transactions_never_ready_is_an_environment_problem() -> None:
    config = scenario("workload: {kind: atomic-produce}")
    client = FakeClient()
    client.fail_next("new-txn", NotReadyError("coordinator down"), times=1000)
    with pytest.raises(EnvironmentProblem, match=r"not ready on the v4 path after 0s .*NotReadyError: coordinator down"):
        wait_transactions_ready(cluster(), config, timeout_s=0.3, client=client)
