"""ComposeAdmin: Pulsar's admin paths, and 307 redirects followed to published ports only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.client.rest import AdminRequestFailed, TopicName
from targets.compose.admin import ComposeAdmin
from targets.compose.links import HOST
from tests.unit.compose.fakes import FakeEndpoint


class Brokers:
    """Two fake brokers; broker-0 redirects topic-level calls to broker-1 as an owner would."""

    def __init__(self) -> None:
        self.redirect = True
        self.status = 204
        self.b1 = FakeEndpoint(0, "broker-1", admin=self._owner)
        self.b0 = FakeEndpoint(0, "broker-0", admin=self._front)

    def _front(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if self.redirect:
            return 307, {"Location": f"http://broker-1:8081{path}"}, b""
        return self.status, {}, b""

    def _owner(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if self.status >= 400:
            return self.status, {"Content-Type": "application/json"}, b'{"reason":"Topic not found"}'
        return self.status, {}, b""

    def admin(self) -> ComposeAdmin:
        return ComposeAdmin(self.b0.url, {"broker-0:8080": self.b0.url, "broker-1:8081": self.b1.url},
                            timeout_s=5)

    def close(self) -> None:
        self.b0.close()
        self.b1.close()


@pytest.fixture
def brokers() -> Iterator[Brokers]:
    fake = Brokers()
    yield fake
    fake.close()


def test_split_follows_the_owner_redirect_to_its_published_port(brokers: Brokers) -> None:
    admin = brokers.admin()
    admin.split_segment("topic://public/txnbench/orders", 3)
    path = "/admin/v2/scalable/public/txnbench/orders/split/3"
    assert brokers.b0.requests == [("POST", path)]
    assert brokers.b1.requests == [("POST", path)]
    admin.close()


def test_merge_and_terminate_use_pulsars_paths(brokers: Brokers) -> None:
    brokers.redirect = False
    admin = brokers.admin()
    admin.merge_segments("topic://public/txnbench/orders", 4, 5)
    admin.terminate("segment://public/txnbench/orders/0000-7fff-4")
    admin.terminate("persistent://public/txnbench/t-1")
    admin.terminate("persistent://public/txnbench/t-2", partitioned=True)
    assert [p for _, p in brokers.b0.requests] == [
        "/admin/v2/scalable/public/txnbench/orders/merge/4/5",
        "/admin/v2/segments/public/txnbench/orders/0000-7fff-4/terminate",
        "/admin/v2/persistent/public/txnbench/t-1/terminate",
        "/admin/v2/persistent/public/txnbench/t-2/terminate/partitions",
    ]
    admin.close()


def test_a_refusal_names_the_status_and_pulsars_reason(brokers: Brokers) -> None:
    brokers.status = 404
    admin = brokers.admin()
    with pytest.raises(AdminRequestFailed, match=r"404 .*Topic not found") as err:
        admin.split_segment("topic://public/txnbench/none", 0)
    assert err.value.status == 404
    admin.close()


def test_a_redirect_outside_the_cluster_is_not_followed(brokers: Brokers) -> None:
    admin = ComposeAdmin(brokers.b0.url, {"broker-0:8080": brokers.b0.url}, timeout_s=5)
    with pytest.raises(AdminRequestFailed, match=r"redirected to http://broker-1:8081/.*not one of this cluster"):
        admin.terminate("persistent://public/txnbench/t")
    assert brokers.b1.requests == []
    admin.close()


def test_an_unreachable_broker_is_reported() -> None:
    closed = FakeEndpoint(0, "gone")
    url = closed.url
    closed.close()
    admin = ComposeAdmin(url, {}, timeout_s=2)
    with pytest.raises(AdminRequestFailed, match=r"no answer .*is the broker up"):
        admin.terminate("persistent://public/txnbench/t")
    admin.close()


@pytest.mark.parametrize(("text", "scheme", "descriptor"), [
    ("topic://public/ns/t", "topic", None),
    ("segment://public/ns/t/0000-ffff-1", "segment", "0000-ffff-1"),
    ("persistent://public/ns/t-partition-0", "persistent", None),
])
def test_topic_names_parse(text: str, scheme: str, descriptor: str | None) -> None:
    name = TopicName.parse(text)
    assert (name.scheme, name.tenant, name.namespace, name.descriptor) == (scheme, "public", "ns", descriptor)


@pytest.mark.parametrize("text", ["orders", "topic://public/orders", "segment://public/ns/t",
                                  "non-persistent://public/ns/t", "persistent://a/b/c/d"])
def test_bad_topic_names_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        TopicName.parse(text)


def test_actions_refuse_the_wrong_kind_of_topic(brokers: Brokers) -> None:
    admin = brokers.admin()
    with pytest.raises(ValueError, match="scalable topic"):
        admin.split_segment("persistent://public/ns/t", 1)
    with pytest.raises(ValueError, match="seal one segment"):
        admin.terminate("topic://public/ns/t")
    assert brokers.b0.requests == []
    admin.close()


def test_names_are_quoted_in_paths(brokers: Brokers) -> None:
    brokers.redirect = False
    admin = brokers.admin()
    admin.terminate("persistent://public/txnbench/a b")
    assert brokers.b0.requests == [("POST", "/admin/v2/persistent/public/txnbench/a%20b/terminate")]
    assert HOST in brokers.b0.url
    admin.close()
