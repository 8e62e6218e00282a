"""Pure translations between Oxia's protocol and the store: requests, versions, batches, errors, URLs."""

from __future__ import annotations

import grpc
import oxia.ex
import pytest

from embedded.metadata.backend import UnsupportedStoreUrl, is_oxia_url, parse_oxia_url
from embedded.metadata.model import (
    BadVersion,
    EventType,
    InvalidOptions,
    KeyNotFound,
    MetadataUnavailable,
    Notification,
    SessionExpired,
    Version,
)
from embedded.metadata.oxia_client import translate
from embedded.metadata.oxia_frontend import (
    OxiaListener,
    _Invalid,
    batch_to_pb,
    parse_listeners,
    put_from_pb,
    version_to_pb,
)
from embedded.metadata.oxia_proto import pb


def test_put_request_becomes_a_put_command() -> None:
    cmd = put_from_pb(pb.PutRequest(key="/k", value=b"v", expected_version_id=-1, session_id=7, partition_key="p",
                                    sequence_key_delta=[1, 2],
                                    secondary_indexes=[pb.SecondaryIndex("b", "2"), pb.SecondaryIndex("a", "1")]))
    assert (cmd.key, cmd.value, cmd.expected_version, cmd.ephemeral, cmd.session_id) == ("/k", "v", -1, True, 7)
    assert cmd.partition_key == "p" and cmd.sequence_keys_deltas == (1, 2)
    assert cmd.secondary_indexes == (("a", "1"), ("b", "2"))
    plain = put_from_pb(pb.PutRequest(key="/k", value=b""))
    assert not plain.ephemeral and plain.session_id is None and plain.sequence_keys_deltas is None
    assert plain.expected_version is None


@pytest.mark.parametrize("request_", [
    pb.PutRequest(key="", value=b"x"),
    pb.PutRequest(key="/k", value=b"\xff"),
    pb.PutRequest(key="/k", value=b"x", secondary_indexes=[pb.SecondaryIndex("i", "1"), pb.SecondaryIndex("i", "2")]),
])
def test_requests_the_store_cannot_keep_are_invalid(request_: pb.PutRequest) -> None:
    with pytest.raises(_Invalid):
        put_from_pb(request_)


def test_versions_name_a_session_only_when_ephemeral() -> None:
    persistent = version_to_pb(Version(5, 1000, 2000, 3, False, None))
    assert (persistent.version_id, persistent.created_timestamp, persistent.modified_timestamp,
            persistent.modifications_count, persistent.session_id) == (5, 1000, 2000, 3, None)
    assert version_to_pb(Version(6, 1, 1, 0, True, 9)).session_id == 9


def test_a_batch_has_one_entry_per_key_and_deletes_carry_no_version() -> None:
    batch = batch_to_pb(12, 345, [Notification(EventType.CREATED, "/a", 1), Notification(EventType.MODIFIED, "/a", 2),
                                  Notification(EventType.DELETED, "/b", 3)])
    assert (batch.shard, batch.offset, batch.timestamp) == (0, 12, 345)
    assert batch.notifications["/a"].type == pb.NotificationType.KEY_MODIFIED
    assert batch.notifications["/a"].version_id == 2
    assert batch.notifications["/b"].type == pb.NotificationType.KEY_DELETED
    assert batch.notifications["/b"].version_id is None


def test_listeners_from_the_store_config() -> None:
    assert parse_listeners(None, None) == []
    assert parse_listeners([{"port": 2, "advertised": "127.0.0.1:9"}], 1) == [
        OxiaListener(1), OxiaListener(2, "127.0.0.1:9")]
    for bad in ([{"port": "x"}], [{"port": 1, "advertised": "nohost"}], {"port": 1}):
        with pytest.raises(ValueError, match="oxia_"):
            parse_listeners(bad, None)


def test_oxia_errors_become_the_stores_typed_errors() -> None:
    assert isinstance(translate(oxia.ex.KeyNotFound(), "get"), KeyNotFound)
    assert isinstance(translate(oxia.ex.UnexpectedVersionId(), "put"), BadVersion)
    assert isinstance(translate(oxia.ex.SessionNotFound(), "put"), SessionExpired)
    assert isinstance(translate(oxia.ex.InvalidOptions("x"), "put"), InvalidOptions)
    assert isinstance(translate(RuntimeError("No shard found"), "put"), MetadataUnavailable)


class _RpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


@pytest.mark.parametrize(("code", "details", "typed"), [
    # what a real Oxia v0.14.0 answered (tests/cluster/test_oxia_client.py on `real`)
    (grpc.StatusCode.UNKNOWN, "oxia: session not found", SessionExpired),
    (grpc.StatusCode.UNKNOWN, "timeoutMs=360000: oxia: invalid session timeout", InvalidOptions),
    (grpc.StatusCode.UNKNOWN, "oxia db: failed to apply batch: oxia: sequential key operation requires first "
                              "delta do be > 0", InvalidOptions),
    (grpc.StatusCode.UNKNOWN, "oxia db: failed to apply batch: oxia: sequential key operation missing some "
                              "sequence deltas", InvalidOptions),
    # an unknown outcome stays one
    (grpc.StatusCode.UNKNOWN, "oxia: failed to append to wal: 65 can not immediately follow 63", MetadataUnavailable),
    (grpc.StatusCode.UNKNOWN, "node is not leader for shard 3", MetadataUnavailable),
    (grpc.StatusCode.UNAVAILABLE, "failed to connect", MetadataUnavailable),
    (grpc.StatusCode.INVALID_ARGUMENT, "oxia: a put needs a non-empty key", InvalidOptions),
])
def test_oxias_status_answers_become_typed_errors(code: grpc.StatusCode, details: str, typed: type) -> None:
    """A session the real Oxia no longer knows must reach the brokers as SessionExpired (they
    drop what they own), not as an outage; before, only our frontend's NOT_FOUND did."""
    assert isinstance(translate(_RpcError(code, details), "put /k"), typed)


def test_a_range_delete_is_one_key_range_deleted_entry() -> None:
    batch = batch_to_pb(7, 1, [Notification(EventType.DELETED, "/r/a", 3), Notification(EventType.DELETED, "/r/b", 4),
                               Notification(EventType.CREATED, "/s", 5)], deleted_range=("/r/", "/r/~"))
    assert set(batch.notifications) == {"/r/", "/s"}
    entry = batch.notifications["/r/"]
    assert entry.type == pb.NotificationType.KEY_RANGE_DELETED and entry.key_range_last == "/r/~"
    assert batch.notifications["/s"].type == pb.NotificationType.KEY_CREATED


def test_oxia_urls_as_pulsar_writes_them() -> None:
    assert parse_oxia_url("oxia://127.0.0.1:6648") == ("127.0.0.1:6648", "default")
    assert parse_oxia_url("oxia://127.0.0.1:6648/broker") == ("127.0.0.1:6648", "broker")
    assert is_oxia_url("oxia://h:1") and not is_oxia_url("127.0.0.1:5")
    with pytest.raises(UnsupportedStoreUrl):
        parse_oxia_url("oxia://127.0.0.1")
