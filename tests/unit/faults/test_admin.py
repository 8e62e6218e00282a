"""Topic and segment actions over admin REST, against a small fake of Pulsar's admin API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from faults.admin import ClientTopicAdmin, active_segment_names, make_topic_admin
from faults.model import NotInjected
from harness.client.admin import AdminError
from tests.fake_http import FakeHttpServer
from tests.unit.faults.fakes import cluster_info

TOPIC = "topic://public/txnbench/orders"

# The shape Pulsar 5.0 answers GET /admin/v2/scalable/{t}/{ns}/{topic} with: segment 0 was
# split into 1 and 2; 2 is active, 1 is active.
METADATA = {
    "epoch": 2,
    "segments": {
        "0": {"segmentId": 0, "hashRange": {"start": 0, "end": 65535}, "state": "SEALED",
              "parentIds": [], "childIds": [1, 2]},
        "1": {"segmentId": 1, "hashRange": {"start": 0, "end": 32767}, "state": "ACTIVE",
              "parentIds": [0], "childIds": []},
        "2": {"segmentId": 2, "hashRange": {"start": 32768, "end": 65535}, "state": "ACTIVE",
              "parentIds": [0], "childIds": []},
    },
}


class FakeAdmin(FakeHttpServer):
    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.refuse: set[str] = set()      # paths answered 412
        super().__init__()

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        self.requests.append((method, path))
        status, answer = self.route(method, path)
        return status, {"Content-Type": "application/json"}, b"" if answer is None else json.dumps(answer).encode()

    def route(self, method: str, path: str) -> tuple[int, Any]:
        if path in self.refuse:
            return 412, {"reason": "Segment is not active"}
        if method == "GET" and path == "/admin/v2/scalable/public/txnbench/orders":
            return 200, METADATA
        if method == "GET" and path.endswith("/partitions"):
            return 200, {"partitions": 3 if "/parted/" in path else 0}
        if method in ("POST", "PUT"):
            return 204, None
        return 404, {"reason": "not found"}



@pytest.fixture
def server() -> Iterator[FakeAdmin]:
    fake = FakeAdmin()
    yield fake
    fake.close()


def test_active_segments_are_the_dag_leaves() -> None:
    assert active_segment_names(TOPIC, METADATA) == [
        "segment://public/txnbench/orders/0000-7fff-1", "segment://public/txnbench/orders/8000-ffff-2"]
    listed = {"segments": [{"id": 4, "hashStart": 0, "hashEnd": 255, "sealed": False},
                           {"id": 5, "hashStart": 256, "hashEnd": 511, "sealed": True}]}
    assert active_segment_names(TOPIC, listed) == ["segment://public/txnbench/orders/0000-00ff-4"]


def test_actions_use_pulsars_paths(server: FakeAdmin) -> None:
    admin = ClientTopicAdmin([server.url])
    try:
        assert admin.active_segments(TOPIC)[1].endswith("8000-ffff-2")
        admin.split_segment(TOPIC, 2)
        admin.merge_segments(TOPIC, 1, 2)
        admin.terminate_segment("segment://public/txnbench/orders/8000-ffff-2")
        admin.terminate_topic("persistent://public/txnbench/plain")
        admin.terminate_topic("persistent://public/txnbench/parted")
        admin.terminate_topic("persistent://public/txnbench/parted-partition-1")
    finally:
        admin.close()
    assert [r for r in server.requests if r[0] == "POST"] == [
        ("POST", "/admin/v2/scalable/public/txnbench/orders/split/2"),
        ("POST", "/admin/v2/scalable/public/txnbench/orders/merge/1/2"),
        ("POST", "/admin/v2/segments/public/txnbench/orders/8000-ffff-2/terminate"),
        ("POST", "/admin/v2/persistent/public/txnbench/plain/terminate"),
        ("POST", "/admin/v2/persistent/public/txnbench/parted/terminate/partitions"),
        ("POST", "/admin/v2/persistent/public/txnbench/parted-partition-1/terminate")]


def test_unload_uses_pulsars_paths_for_topics_partitions_and_segments(server: FakeAdmin) -> None:
    admin = ClientTopicAdmin([server.url])
    try:
        admin.unload_topic("persistent://public/txnbench/plain")
        admin.unload_topic("persistent://public/txnbench/parted")         # every partition
        admin.unload_topic("persistent://public/txnbench/parted-partition-2")
        admin.unload_topic(TOPIC)                                          # every active segment
        admin.unload_segment("segment://public/txnbench/orders/0000-7fff-1")
    finally:
        admin.close()
    assert [r for r in server.requests if r[0] == "PUT"] == [
        ("PUT", "/admin/v2/persistent/public/txnbench/plain/unload"),
        ("PUT", "/admin/v2/persistent/public/txnbench/parted-partition-0/unload"),
        ("PUT", "/admin/v2/persistent/public/txnbench/parted-partition-1/unload"),
        ("PUT", "/admin/v2/persistent/public/txnbench/parted-partition-2/unload"),
        ("PUT", "/admin/v2/persistent/public/txnbench/parted-partition-2/unload"),
        ("PUT", "/admin/v2/segments/public/txnbench/orders/0000-7fff-1/unload"),
        ("PUT", "/admin/v2/segments/public/txnbench/orders/8000-ffff-2/unload"),
        ("PUT", "/admin/v2/segments/public/txnbench/orders/0000-7fff-1/unload")]


def test_on_real_pulsar_a_segment_moves_with_its_namespace(server: FakeAdmin) -> None:
    """Pulsar 5.0.1 answers 404 to a segment unload (the nemesis' v5 unloads were never injected
    on the pulsar target); a namespace unload is the move it offers."""
    admin = ClientTopicAdmin([server.url], segments_move_with_namespace=True)
    try:
        admin.unload_topic(TOPIC)
        admin.unload_segment("segment://public/txnbench/orders/0000-7fff-1")
        admin.unload_topic("persistent://public/txnbench/plain")        # a v4 topic: itself only
    finally:
        admin.close()
    assert [r for r in server.requests if r[0] == "PUT"] == [
        ("PUT", "/admin/v2/namespaces/public/txnbench/unload"),
        ("PUT", "/admin/v2/namespaces/public/txnbench/unload"),
        ("PUT", "/admin/v2/persistent/public/txnbench/plain/unload")]


def test_the_pulsar_target_gets_namespace_moves_and_the_others_do_not() -> None:
    from harness.target import ClusterInfo
    from harness.txn_paths import TxnPath

    for target, expected in (("pulsar", True), ("embedded", False), ("external", False)):
        cluster = ClusterInfo(target=target, txn_path=TxnPath.V5, service_url="pulsar://127.0.0.1:1",
                              admin_url="http://127.0.0.1:2")
        admin, why = make_topic_admin(cluster, None)
        assert why == "" and isinstance(admin, ClientTopicAdmin)
        assert admin._namespace_moves is expected
        admin.close()


def test_a_refusal_is_definite_and_no_answer_is_not(server: FakeAdmin) -> None:
    server.refuse.add("/admin/v2/scalable/public/txnbench/orders/split/1")
    admin = ClientTopicAdmin([server.url])
    with pytest.raises(NotInjected, match="HTTP 412"):
        admin.split_segment(TOPIC, 1)
    admin.close()
    gone = ClientTopicAdmin(["http://127.0.0.1:9"], timeout_s=1)
    with pytest.raises(AdminError, match="cannot reach"):
        gone.split_segment(TOPIC, 1)
    gone.close()


def test_changes_go_to_a_running_broker_and_reads_fail_over(server: FakeAdmin) -> None:
    admin = ClientTopicAdmin(["http://127.0.0.1:9", server.url], is_running=lambda n: n == "broker-1",
                             names=["broker-0", "broker-1"], timeout_s=1)
    admin.split_segment(TOPIC, 1)
    assert server.requests[-1] == ("POST", "/admin/v2/scalable/public/txnbench/orders/split/1")
    admin.close()
    reads = ClientTopicAdmin(["http://127.0.0.1:9", server.url], timeout_s=1)
    assert len(reads.active_segments(TOPIC)) == 2
    reads.close()


def test_make_topic_admin_uses_every_brokers_admin_url() -> None:
    admin, reason = make_topic_admin(cluster_info(2), None)
    assert reason == "" and isinstance(admin, ClientTopicAdmin)
    assert [c.web_url for c in admin._clients] == ["http://127.0.0.1:11000", "http://127.0.0.1:11001"]
    admin.close()


def test_the_compose_transport_behaves_the_same(server: FakeAdmin) -> None:
    from faults.admin import ComposeTopicAdmin
    from targets.compose.admin import ComposeAdmin

    server.refuse.add("/admin/v2/scalable/public/txnbench/orders/merge/1/2")
    admin = ComposeTopicAdmin(ComposeAdmin(server.url, {}))
    try:
        assert len(admin.active_segments(TOPIC)) == 2
        assert admin.partitions("persistent://public/txnbench/parted") == 3
        admin.split_segment(TOPIC, 2)
        admin.terminate_topic("persistent://public/txnbench/parted")
        admin.terminate_segment("segment://public/txnbench/orders/8000-ffff-2")
        with pytest.raises(NotInjected, match="412"):
            admin.merge_segments(TOPIC, 1, 2)
    finally:
        admin.close()
    assert [r for r in server.requests if r[0] == "POST"][:3] == [
        ("POST", "/admin/v2/scalable/public/txnbench/orders/split/2"),
        ("POST", "/admin/v2/persistent/public/txnbench/parted/terminate/partitions"),
        ("POST", "/admin/v2/segments/public/txnbench/orders/8000-ffff-2/terminate")]
