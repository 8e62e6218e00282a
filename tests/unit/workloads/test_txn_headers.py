"""The v5 transaction headers the drain reads from the metadata store (orchestrator.load.txn_headers).

Without sockets: the store client is a fake in place of `open_metadata_client`; the real
stores are read in tests/cluster/test_txn_headers.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from embedded.metadata.model import GetResult, MetadataUnavailable, Version
from harness.txn_paths import TxnPath
from orchestrator.load.txn_headers import (
    HeaderStates,
    header_key,
    header_state,
    store_address_url,
    txn_bits,
    v5_header_states,
)


def test_the_header_key_is_pulsars() -> None:
    """`TxnPaths.header(TxnIds.toKey(txnId))` in Pulsar 5.0.1: `/txn/id/<most>_<least>`."""
    assert header_key(3, 1047) == "/txn/id/3_1047"


@pytest.mark.parametrize(("txn", "bits"), [("3:1047", (3, 1047)), ("0:0", (0, 0)), ("3", None), ("a:1", None),
                                            ("", None)])
def test_a_history_txn_id_is_two_numbers(txn: str, bits: tuple[int, int] | None) -> None:
    assert txn_bits(txn) == bits


def test_a_header_gives_its_state_and_the_record() -> None:
    record = {"state": "OPEN", "timeout": 30.0, "createdAt": 1733280000.1, "owner": "broker-1"}
    found = header_state(json.dumps(record).encode())
    assert found == {"status": "OPEN", "header": record, "source": "metadata-store"}


@pytest.mark.parametrize("value", ["not json", '{"state": "PREPARING"}', "[1, 2]", '{"owner": "b"}'])
def test_a_record_that_is_no_header_is_refused_by_name(value: str) -> None:
    """Damage is never read as a state: the drain records UNKNOWN with this reason."""
    with pytest.raises(ValueError, match="header"):
        header_state(value)


@pytest.mark.parametrize(("url", "expected"), [
    ("zk:127.0.0.1:2181", "zk:127.0.0.1:2181"),
    ("oxia://127.0.0.1:6648/default", "oxia://127.0.0.1:6648/default"),
    ("zk", None), ("zk:", None), ("oxia", None), ("oxia://", None), ("txnbench", None), ("", None),
    ("127.0.0.1:7000", None),
])
def test_only_a_store_named_with_its_address_is_read(url: str, expected: str | None) -> None:
    assert store_address_url({"metadataStoreUrl": url}) == expected
    assert store_address_url({}) is None


def test_only_a_v5_run_reads_the_headers() -> None:
    settings = {"metadataStoreUrl": "oxia://127.0.0.1:6648/default"}
    reader = v5_header_states(TxnPath.V5, settings)
    assert isinstance(reader, HeaderStates) and reader.url == settings["metadataStoreUrl"]
    assert v5_header_states(TxnPath.V4, settings) is None
    assert v5_header_states(TxnPath.V4_BATCHED, settings) is None
    assert v5_header_states(TxnPath.V5, {"metadataStoreUrl": "txnbench"}) is None


class FakeStore:
    """`open_metadata_client`'s client: `records` by key, every call noted."""

    def __init__(self, records: dict[str, str], *, unreachable: bool = False, failing: set[str] | None = None) -> None:
        self.records = records
        self.unreachable = unreachable
        self.failing = failing or set()
        self.calls: list[str] = []

    async def connect(self) -> None:
        self.calls.append("connect")
        if self.unreachable:
            raise MetadataUnavailable("cannot reach Oxia at 127.0.0.1:1 after 6 attempts")

    async def get_or_none(self, key: str) -> GetResult | None:
        self.calls.append(f"get {key}")
        if key in self.failing:
            raise MetadataUnavailable(f"get {key!r}: no answer")
        value = self.records.get(key)
        return None if value is None else GetResult(key, value, Version(1, 0, 0, 0, False, None))

    async def close(self) -> None:
        self.calls.append("close")


class Stores:
    """What `open_metadata_client` gives: `next`, and each URL it was opened with."""

    def __init__(self) -> None:
        self.next: FakeStore | None = None
        self.opened: list[str] = []

    def open_client(self, url: str, **_: Any) -> FakeStore:
        assert self.next is not None
        self.opened.append(url)
        return self.next


@pytest.fixture
def stores(monkeypatch: pytest.MonkeyPatch) -> Stores:
    import embedded.metadata.backend as backend

    fake = Stores()
    monkeypatch.setattr(backend, "open_metadata_client", fake.open_client)
    return fake


def test_the_headers_are_read_in_one_session_and_a_missing_one_is_gone(stores: Stores) -> None:
    store = FakeStore({header_key(1, 7): '{"state": "ABORTED"}', header_key(0, 9): '{"state": "OPEN"}'})
    stores.next = store
    reader = HeaderStates("zk:127.0.0.1:2181")
    reader.read_all([(1, 7), (0, 9), (2, 2)])
    assert reader.transaction_metadata(1, 7)["status"] == "ABORTED"   # type: ignore[index]
    assert reader.transaction_metadata(0, 9)["status"] == "OPEN"      # type: ignore[index]
    assert reader.transaction_metadata(2, 2) is None                  # garbage-collected, or never written
    assert stores.opened == ["zk:127.0.0.1:2181"]
    assert store.calls == ["connect", "get /txn/id/1_7", "get /txn/id/0_9", "get /txn/id/2_2", "close"]


def test_an_unreachable_store_leaves_every_state_unknown_with_the_reason(stores: Stores) -> None:
    stores.next = FakeStore({}, unreachable=True)
    reader = HeaderStates("oxia://127.0.0.1:1/default")
    reader.read_all([(1, 7), (0, 9)])
    for txn in [(1, 7), (0, 9)]:
        with pytest.raises(MetadataUnavailable, match="cannot reach Oxia"):
            reader.transaction_metadata(*txn)


def test_one_unreadable_or_damaged_header_is_unknown_alone(stores: Stores) -> None:
    store = FakeStore({header_key(1, 7): "garbage", header_key(0, 9): '{"state": "COMMITTED"}'},
                      failing={header_key(3, 3)})
    stores.next = store
    reader = HeaderStates("zk:127.0.0.1:2181")
    reader.read_all([(1, 7), (3, 3), (0, 9)])
    with pytest.raises(ValueError, match="not JSON"):
        reader.transaction_metadata(1, 7)
    with pytest.raises(MetadataUnavailable):
        reader.transaction_metadata(3, 3)
    assert reader.transaction_metadata(0, 9)["status"] == "COMMITTED"   # type: ignore[index]
    assert store.calls[-1] == "close"


def test_a_store_that_does_not_answer_in_time_is_unknown_not_a_hang(stores: Stores) -> None:
    class Silent(FakeStore):
        async def get_or_none(self, key: str) -> GetResult | None:
            import asyncio
            await asyncio.sleep(30)
            return None

    stores.next = Silent({})
    reader = HeaderStates("zk:127.0.0.1:2181", timeout_s=0.2)
    reader.read_all([(1, 7)])
    with pytest.raises(TimeoutError, match=r"no answer from zk:127\.0\.0\.1:2181 within 0\.2 s"):
        reader.transaction_metadata(1, 7)


def test_a_header_not_read_before_is_read_when_asked(stores: Stores) -> None:
    stores.next = FakeStore({header_key(4, 4): '{"state": "OPEN"}'})
    assert HeaderStates("zk:127.0.0.1:2181").transaction_metadata(4, 4)["status"] == "OPEN"   # type: ignore[index]
