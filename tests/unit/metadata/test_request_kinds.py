"""What the cost ledger counts each metadata operation as (the old CAS metric counted creates and versioned deletes)."""

from __future__ import annotations

from embedded.metadata.server import key_family, request_kind


def test_writes_are_told_apart_by_what_they_are() -> None:
    assert request_kind("put", {"key": "/txn/id/0_1", "expected_version": -1}) == "create"
    assert request_kind("put", {"key": "/txn/op/0_1", "sequence_keys_deltas": [1]}) == "create"
    assert request_kind("put", {"key": "/txn/id/0_1", "expected_version": 7}) == "cas"
    assert request_kind("put", {"key": "/txn/segment-state/aborted/x:0_1"}) == "put"
    assert request_kind("delete", {"key": "/txn/id/0_1", "expected_version": 9}) == "cas"
    assert request_kind("delete", {"key": "/txn/op/0_1-00000000000000000001"}) == "delete"
    assert request_kind("delete_range", {"min": "/txn/op/0_1-", "max": "/txn/op/0_1."}) == "delete"
    assert request_kind("get", {"key": "/txn/id/0_1"}) == "read"
    assert request_kind("range_scan", {"min": "a", "max": "b"}) == "read"


def test_families_come_from_the_key_and_index_queries_are_their_own() -> None:
    assert key_family({"key": "/txn/id/0_1"}) == "txn-header"
    assert key_family({"key": "/txn/op/0_1"}) == "txn-op"
    assert key_family({"key": "/txn/segment-events/seg-00000000000000000001"}) == "txn-event"
    assert key_family({"key": "/txn/subscription-events/seg:sub"}) == "txn-event"
    assert key_family({"key": "/txn/segment-state/watermark/seg"}) == "txn-watermark"
    assert key_family({"key": "/txn/segment-state/aborted/seg:0_1"}) == "txn-aborted"
    assert key_family({"key": "/txn/tc-seq/0"}) == "txn-id-counter"
    assert key_family({"key": "/txn/tc/leader/0"}) == "txn-leader"
    assert key_family({"min": "/txn/op/0_1-", "max": "/txn/op/0_1."}) == "txn-op"
    assert key_family({"min": "", "max": "~", "use_index": "idx:ops-by-txn"}) == "index"
    assert key_family({"key": "/managed-ledgers/x"}) == "other"
