"""The metadata state machine, operation by operation (no I/O)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from embedded.metadata.model import (
    BadVersion,
    Comparison,
    EventType,
    InvalidOptions,
    KeyNotFound,
    Notification,
    SessionExpired,
)
from embedded.metadata.state import (
    KEY_SPACE_END,
    Command,
    Delete,
    DeleteRange,
    MetadataState,
    Put,
    SessionClose,
    SessionExpire,
    SessionOpen,
    command_from_wire,
    command_to_wire,
    prefix_end,
)

T0 = 1_700_000_000_000


def put(state: MetadataState, key: str, value: str = "v", now: int = T0, **kw: Any):
    return state.apply(Put(key, value, **kw), now)


def keys_of(events: tuple[Notification, ...]) -> list[tuple[str, str]]:
    return [(e.type.value, e.key) for e in events]


# ---- put / get / versions ------------------------------------------------------------------------

def test_put_creates_then_modifies_with_store_wide_versions() -> None:
    s = MetadataState()
    a1 = put(s, "/a", "1", now=T0)
    b1 = put(s, "/b", "1", now=T0 + 1)
    a2 = put(s, "/a", "2", now=T0 + 5)
    assert [a1.result.version.version_id, b1.result.version.version_id, a2.result.version.version_id] == [1, 2, 3]
    v = a2.result.version
    assert (v.created_ms, v.modified_ms, v.modifications_count, v.ephemeral, v.session_id) == (T0, T0 + 5, 1, False, None)
    assert keys_of(a1.notifications) == [("created", "/a")]
    assert keys_of(a2.notifications) == [("modified", "/a")]
    assert a2.notifications[0].version_id == 3
    got = s.get("/a")
    assert (got.key, got.value, got.version) == ("/a", "2", v)
    assert s.get("/a", include_value=False).value is None
    assert s.record_count == 2


def test_recreated_record_restarts_its_counts() -> None:
    s = MetadataState()
    put(s, "/a", now=T0)
    put(s, "/a", now=T0 + 1)
    s.apply(Delete("/a"), T0 + 2)
    again = put(s, "/a", now=T0 + 3).result.version
    assert (again.version_id, again.created_ms, again.modifications_count) == (3, T0 + 3, 0)  # deletes take no id


def test_cas_on_version_id() -> None:
    s = MetadataState()
    v1 = put(s, "/k", "1", expected_version=-1).result.version.version_id
    with pytest.raises(BadVersion, match="exists at version 1"):
        put(s, "/k", "x", expected_version=-1)
    with pytest.raises(BadVersion, match="is at version 1, expected 7"):
        put(s, "/k", "x", expected_version=7)
    with pytest.raises(BadVersion, match="does not exist"):
        put(s, "/missing", "x", expected_version=1)
    with pytest.raises(InvalidOptions, match="expected_version"):
        put(s, "/k", "x", expected_version=-2)
    v2 = put(s, "/k", "2", expected_version=v1).result.version
    assert v2.version_id == 2 and s.get("/k").value == "2"
    assert s.last_version_id == 2   # failed CAS took no version id


def test_failed_operations_change_nothing() -> None:
    s = MetadataState()
    put(s, "/k", "1", secondary_indexes=(("idx", "a"),))
    before = s.export()
    for bad in (Put("/k", "2", expected_version=9), Put("/e", "x", ephemeral=True, session_id=5),
                Delete("/k", expected_version=9), SessionClose(3)):
        with pytest.raises((BadVersion, SessionExpired)):
            s.apply(bad, T0 + 1)
    assert s.export() == before
    assert s.list("a", "b", use_index="idx") == ["/k"]


def test_get_missing_is_key_not_found() -> None:
    with pytest.raises(KeyNotFound):
        MetadataState().get("/nope")


@pytest.mark.parametrize(("comparison", "key", "expected"), [
    (Comparison.EQUAL, "/b", "/b"),
    (Comparison.FLOOR, "/b", "/b"),
    (Comparison.FLOOR, "/c", "/b"),
    (Comparison.LOWER, "/b", "/a"),
    (Comparison.CEILING, "/b", "/b"),
    (Comparison.CEILING, "/c", "/d"),
    (Comparison.HIGHER, "/b", "/d"),
    (Comparison.FLOOR, "/0", None),
    (Comparison.LOWER, "/a", None),
    (Comparison.HIGHER, "/d", None),
    (Comparison.CEILING, "/e", None),
    (Comparison.EQUAL, "/c", None),
])
def test_get_comparisons(comparison: Comparison, key: str, expected: str | None) -> None:
    s = MetadataState()
    for k in ("/a", "/b", "/d"):
        put(s, k, k.upper())
    if expected is None:
        with pytest.raises(KeyNotFound):
            s.get(key, comparison)
    else:
        got = s.get(key, comparison)
        assert (got.key, got.value) == (expected, expected.upper())


# ---- delete / delete_range -----------------------------------------------------------------------

def test_delete_and_its_cas() -> None:
    s = MetadataState()
    v = put(s, "/k").result.version.version_id
    missing = s.apply(Delete("/nope"), T0)
    assert (missing.result, missing.mutated, missing.notifications) == (False, False, ())
    assert s.apply(Delete("/nope", expected_version=-1), T0).result is False
    with pytest.raises(BadVersion):
        s.apply(Delete("/nope", expected_version=3), T0)
    with pytest.raises(BadVersion):
        s.apply(Delete("/k", expected_version=v + 1), T0)
    with pytest.raises(BadVersion):
        s.apply(Delete("/k", expected_version=-1), T0)
    done = s.apply(Delete("/k", expected_version=v), T0)
    assert done.result is True
    assert done.notifications == (Notification(EventType.DELETED, "/k", v),)
    with pytest.raises(KeyNotFound):
        s.get("/k")


def test_delete_range_is_min_inclusive_max_exclusive() -> None:
    s = MetadataState()
    for k in ("/a", "/b/1", "/b/2", "/c", "/d"):
        put(s, k)
    out = s.apply(DeleteRange("/b", "/d"), T0)
    assert out.result == 3
    assert keys_of(out.notifications) == [("deleted", "/b/1"), ("deleted", "/b/2"), ("deleted", "/c")]
    assert s.list("", KEY_SPACE_END) == ["/a", "/d"]
    empty = s.apply(DeleteRange("/x", "/a"), T0)
    assert (empty.result, empty.mutated) == (0, False)


# ---- list / range_scan ---------------------------------------------------------------------------

def test_list_uses_natural_byte_order() -> None:
    s = MetadataState()
    keys = ["/a/b", "/a-b", "/a/", "/a", "/a/b/c", "/aé", "/a~", "/a\U0001f600"]
    for k in keys:
        put(s, k)
    listed = s.list("/a", prefix_end("/a"))
    assert listed == sorted(keys, key=lambda k: k.encode())
    assert listed == ["/a", "/a-b", "/a/", "/a/b", "/a/b/c", "/a~", "/aé", "/a\U0001f600"]
    assert s.list("/a/", "/a/c") == ["/a/", "/a/b", "/a/b/c"]
    assert s.list("/a/b", "/a/b") == []
    assert s.list("/b", "/a") == []


def test_range_scan_returns_records_and_honours_limit() -> None:
    s = MetadataState()
    for i in range(5):
        put(s, f"/r/{i}", f"v{i}")
    recs = s.range_scan("/r/1", "/r/4")
    assert [(r.key, r.value) for r in recs] == [("/r/1", "v1"), ("/r/2", "v2"), ("/r/3", "v3")]
    assert [r.key for r in s.range_scan("/r/", "/r0", limit=2)] == ["/r/0", "/r/1"]
    assert all(r.value is None for r in s.range_scan("/r/", "/r0", include_value=False))
    with pytest.raises(InvalidOptions):
        s.range_scan("/r/", "/r0", limit=-1)


def test_prefix_end() -> None:
    assert prefix_end("/a/") == "/a0"
    assert prefix_end("/a\U0010ffff") == "/b"
    assert prefix_end("") == KEY_SPACE_END
    assert prefix_end("\ud7ff") == "\ue000"


# ---- sequence keys -------------------------------------------------------------------------------

def test_sequence_keys_are_prefix_dash_20_digits() -> None:
    s = MetadataState()
    k1 = put(s, "/txn/op/7", "a", partition_key="7", sequence_keys_deltas=(1,)).result.key
    k2 = put(s, "/txn/op/7", "b", partition_key="7", sequence_keys_deltas=(1,)).result.key
    k3 = put(s, "/txn/op/7", "c", partition_key="7", sequence_keys_deltas=(5,)).result.key
    assert [k1, k2, k3] == ["/txn/op/7-00000000000000000001", "/txn/op/7-00000000000000000002",
                            "/txn/op/7-00000000000000000007"]
    assert s.get(k2).value == "b"
    # other keys near the prefix do not disturb the sequence
    put(s, "/txn/op/7-zzz")
    put(s, "/txn/op/70-00000000000000000009", partition_key="70")
    assert put(s, "/txn/op/7", "d", partition_key="7", sequence_keys_deltas=(1,)).result.key.endswith("-00000000000000000008")
    assert [r.key for r in s.range_scan("/txn/op/7-", "/txn/op/7-:")][-1] == "/txn/op/7-00000000000000000008"


def test_multi_part_sequence_keys_follow_oxia() -> None:
    s = MetadataState()
    first = put(s, "/s", partition_key="p", sequence_keys_deltas=(1, 2)).result.key
    second = put(s, "/s", partition_key="p", sequence_keys_deltas=(1, 0)).result.key
    third = put(s, "/s", partition_key="p", sequence_keys_deltas=(2, 3)).result.key
    assert first == "/s-00000000000000000001-00000000000000000002"
    assert second == "/s-00000000000000000002-00000000000000000002"
    assert third == "/s-00000000000000000004-00000000000000000005"
    with pytest.raises(InvalidOptions, match="2 parts but the put gives 1"):
        put(s, "/s", partition_key="p", sequence_keys_deltas=(1,))


@pytest.mark.parametrize(("kw", "message"), [
    ({"sequence_keys_deltas": (1,)}, "need a partition_key"),
    ({"sequence_keys_deltas": (0,), "partition_key": "p"}, "first delta must be > 0"),
    ({"sequence_keys_deltas": (1, -1), "partition_key": "p"}, "the rest >= 0"),
    ({"sequence_keys_deltas": (), "partition_key": "p"}, "must not be empty"),
])
def test_sequence_key_errors(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidOptions, match=message):
        put(MetadataState(), "/s", **kw)


def test_a_sequence_key_put_with_an_expected_version_is_a_version_conflict() -> None:
    """As a real Oxia answers it (UNEXPECTED_VERSION_ID, `generateUniqueKeyFromSequences`), not
    a malformed request: tests/cluster/test_oxia_client.py holds both stores to it."""
    s = MetadataState()
    with pytest.raises(BadVersion, match="cannot be combined"):
        put(s, "/s", partition_key="p", sequence_keys_deltas=(1,), expected_version=-1)
    assert s.list("/s", "/s~") == []


def test_sequence_continues_from_the_highest_existing_key() -> None:
    """Oxia derives the next key from the last existing one; an emptied sequence restarts."""
    s = MetadataState()
    keys = [put(s, "/q", partition_key="q", sequence_keys_deltas=(1,)).result.key for _ in range(3)]
    s.apply(Delete(keys[0]), T0)
    assert put(s, "/q", partition_key="q", sequence_keys_deltas=(1,)).result.key.endswith("04")
    s.apply(DeleteRange("/q-", "/q-:"), T0)
    assert put(s, "/q", partition_key="q", sequence_keys_deltas=(1,)).result.key.endswith("01")


def test_non_sequence_key_in_the_sequence_range_is_reported() -> None:
    s = MetadataState()
    put(s, "/q-12")
    with pytest.raises(InvalidOptions, match="is not a sequence key"):
        put(s, "/q", partition_key="q", sequence_keys_deltas=(1,))


# ---- secondary indexes ---------------------------------------------------------------------------

def index_fixture() -> MetadataState:
    s = MetadataState()
    put(s, "/txn/id/1", "h1", secondary_indexes=(("idx:txn-by-deadline", "00000000000000000300"),))
    put(s, "/txn/id/2", "h2", secondary_indexes=(("idx:txn-by-deadline", "00000000000000000100"),))
    put(s, "/txn/id/3", "h3", secondary_indexes=(("idx:txn-by-deadline", "00000000000000000200"),
                                                 ("idx:other", "x")))
    put(s, "/txn/id/4", "h4", secondary_indexes=(("idx:txn-by-deadline", "00000000000000000200"),))
    return s


def test_index_range_queries_return_primary_keys_in_secondary_order() -> None:
    s = index_fixture()
    idx = "idx:txn-by-deadline"
    assert s.list("00000000000000000000", "00000000000000000250", use_index=idx) == \
        ["/txn/id/2", "/txn/id/3", "/txn/id/4"]
    assert s.list("00000000000000000200", "00000000000000000300", use_index=idx) == ["/txn/id/3", "/txn/id/4"]
    recs = s.range_scan("0", "9", use_index=idx, limit=2)
    assert [(r.key, r.value, r.secondary_key) for r in recs] == [
        ("/txn/id/2", "h2", "00000000000000000100"), ("/txn/id/3", "h3", "00000000000000000200")]
    assert s.list("x", "y", use_index="idx:other") == ["/txn/id/3"]
    assert s.list("0", "9", use_index="idx:none") == []
    assert s.index_names() == ["idx:other", "idx:txn-by-deadline"]


def test_index_entries_follow_their_record() -> None:
    s = index_fixture()
    idx = "idx:txn-by-deadline"
    # an update replaces the record's entries (here: moves 1 and drops the index for 3)
    put(s, "/txn/id/1", "h1b", secondary_indexes=(("idx:txn-by-final-state", "COMMITTED:00000000000000000005"),))
    put(s, "/txn/id/3", "h3b")
    assert s.list("0", "9", use_index=idx) == ["/txn/id/2", "/txn/id/4"]
    assert s.list("x", "y", use_index="idx:other") == []
    assert s.list("COMMITTED:", "COMMITTED;", use_index="idx:txn-by-final-state") == ["/txn/id/1"]
    s.apply(Delete("/txn/id/2"), T0)
    assert s.list("0", "9", use_index=idx) == ["/txn/id/4"]
    s.apply(DeleteRange("/txn/", "/txn0"), T0)
    assert s.list("0", "9", use_index=idx) == []
    assert s.list("C", "D", use_index="idx:txn-by-final-state") == []
    assert s.index_names() == []


@pytest.mark.parametrize(("comparison", "key", "expected"), [
    (Comparison.EQUAL, "00000000000000000200", "/txn/id/3"),
    (Comparison.EQUAL, "00000000000000000150", None),
    (Comparison.CEILING, "00000000000000000150", "/txn/id/3"),
    (Comparison.CEILING, "00000000000000000200", "/txn/id/3"),
    (Comparison.HIGHER, "00000000000000000200", "/txn/id/1"),
    (Comparison.FLOOR, "00000000000000000200", "/txn/id/3"),
    (Comparison.FLOOR, "00000000000000000250", "/txn/id/4"),
    (Comparison.LOWER, "00000000000000000200", "/txn/id/2"),
    (Comparison.LOWER, "00000000000000000100", None),
    (Comparison.HIGHER, "00000000000000000300", None),
])
def test_get_by_index(comparison: Comparison, key: str, expected: str | None) -> None:
    s = index_fixture()
    if expected is None:
        with pytest.raises(KeyNotFound):
            s.get(key, comparison, use_index="idx:txn-by-deadline")
        return
    got = s.get(key, comparison, use_index="idx:txn-by-deadline")
    assert got.key == expected
    assert got.value == "h" + expected[-1]
    assert got.secondary_key is not None


# ---- sessions and ephemeral records --------------------------------------------------------------

def test_session_ids_and_timeout_bounds() -> None:
    s = MetadataState()
    assert s.apply(SessionOpen(1000, "b1"), T0).result == 1
    assert s.apply(SessionOpen(1000, "b2"), T0).result == 2
    for bad in (10, 10**9):
        with pytest.raises(InvalidOptions, match="timeout_ms"):
            s.apply(SessionOpen(bad), T0)


def test_ephemeral_records_die_with_their_session() -> None:
    s = MetadataState()
    sid = s.apply(SessionOpen(1000), T0).result
    other = s.apply(SessionOpen(1000), T0).result
    v = put(s, "/own/t1", "b1", ephemeral=True, session_id=sid).result.version
    assert (v.ephemeral, v.session_id) == (True, sid)
    put(s, "/own/t2", "b1", ephemeral=True, session_id=sid, secondary_indexes=(("by-broker", "b1"),))
    put(s, "/own/t3", "b1", ephemeral=True, session_id=sid)
    put(s, "/own/t3", "now persistent")           # detaches from the session
    put(s, "/own/t4", "b2", ephemeral=True, session_id=other)
    put(s, "/own/t4", "b1", ephemeral=True, session_id=sid)   # moves to sid
    assert s.session_keys(sid) == {"/own/t1", "/own/t2", "/own/t4"}
    closed = s.apply(SessionClose(sid), T0 + 1)
    assert closed.result == 3
    assert keys_of(closed.notifications) == [("deleted", "/own/t1"), ("deleted", "/own/t2"), ("deleted", "/own/t4")]
    assert s.list("/own/", "/own0") == ["/own/t3"]
    assert s.list("a", "z", use_index="by-broker") == []
    with pytest.raises(SessionExpired):
        s.apply(SessionClose(sid), T0 + 2)
    with pytest.raises(SessionExpired):
        put(s, "/own/t5", ephemeral=True, session_id=sid)
    with pytest.raises(InvalidOptions, match="needs a session_id"):
        put(s, "/own/t5", ephemeral=True)
    assert s.session_ids() == [other]


def test_session_deadlines_keepalive_and_expiry() -> None:
    s = MetadataState()
    a = s.apply(SessionOpen(1000), T0).result
    b = s.apply(SessionOpen(5000), T0).result
    put(s, "/e/a", ephemeral=True, session_id=a)
    assert s.due_sessions(T0 + 999) == []
    assert s.due_sessions(T0 + 1000) == [a]
    s.keepalive(a, T0 + 900)
    assert s.due_sessions(T0 + 1500) == []
    assert s.session_deadline(a) == T0 + 1900
    assert s.due_sessions(T0 + 6000) == [a, b]
    expired = s.apply(SessionExpire(a), T0 + 6000)
    assert keys_of(expired.notifications) == [("deleted", "/e/a")]
    with pytest.raises(SessionExpired):
        s.keepalive(a, T0 + 6001)
    s.reset_session_deadlines(T0 + 10_000)
    assert s.session_deadline(b) == T0 + 15_000


# ---- wire forms, snapshots and deterministic replay ----------------------------------------------

@pytest.mark.parametrize("bad", [
    {"op": "put", "key": "", "value": "v"},
    {"op": "put", "key": "/k", "value": 5},
    {"op": "put", "key": "/k", "value": "v", "expected_version": "1"},
    {"op": "put", "key": "/k", "value": "v", "ephemeral": "yes"},
    {"op": "put", "key": "/k", "value": "v", "sequence_keys_deltas": [1.5]},
    {"op": "put", "key": "/k", "value": "v", "secondary_indexes": {"": "x"}},
    {"op": "put", "key": "/k", "value": "v", "secondary_indexes": {"i": 3}},
    {"op": "delete"},
    {"op": "session_open"},
    {"op": "session_close"},
    {"op": "get", "key": "/k"},
])
def test_bad_commands_are_invalid_options(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidOptions):
        command_from_wire(bad)


def test_command_wire_round_trip() -> None:
    commands: list[Command] = [
        Put("/k", "v", expected_version=3, ephemeral=True, session_id=2, partition_key="p",
            sequence_keys_deltas=(1, 0), secondary_indexes=(("a", "1"), ("b", "2"))),
        Put("/k", ""), Delete("/k", -1), Delete("/k"), DeleteRange("", "/z"), SessionOpen(500, "x"),
        SessionClose(4), SessionExpire(5),
    ]
    for cmd in commands:
        assert command_from_wire(command_to_wire(cmd)) == cmd


def random_commands(rng: random.Random, n: int) -> list[Any]:
    keys = [f"/k/{i}" for i in range(8)]
    out: list[Any] = []
    for _ in range(n):
        r = rng.random()
        if r < 0.45:
            out.append(Put(rng.choice(keys), str(rng.random()),
                           expected_version=rng.choice([None, None, -1, rng.randint(1, 30)]),
                           ephemeral=(eph := rng.random() < 0.3), session_id=rng.randint(1, 4) if eph else None,
                           secondary_indexes=(("ix", str(rng.randint(0, 3))),) if rng.random() < 0.5 else ()))
        elif r < 0.55:
            out.append(Put("/seq", "s", partition_key="p", sequence_keys_deltas=(rng.randint(1, 3),)))
        elif r < 0.7:
            out.append(Delete(rng.choice(keys), rng.choice([None, rng.randint(1, 30)])))
        elif r < 0.75:
            a, b = sorted(rng.sample(keys, 2))
            out.append(DeleteRange(a, b))
        elif r < 0.88:
            out.append(SessionOpen(rng.choice([200, 1000])))
        elif r < 0.94:
            out.append(SessionClose(rng.randint(1, 4)))
        else:
            out.append(SessionExpire(rng.randint(1, 4)))
    return out


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 120))
def test_replaying_the_logged_commands_rebuilds_the_same_state(seed: int, n: int) -> None:
    rng = random.Random(seed)
    live = MetadataState()
    logged: list[tuple[dict[str, Any], int]] = []
    for i, cmd in enumerate(random_commands(rng, n)):
        now = T0 + i
        try:
            applied = live.apply(cmd, now)
        except (BadVersion, SessionExpired, KeyNotFound, InvalidOptions):
            continue
        if applied.mutated:
            logged.append((command_to_wire(cmd), now))
    replayed = MetadataState()
    for wire, now in logged:
        replayed.apply(command_from_wire(wire), now)
    assert sorted(replayed.export().records, key=lambda r: r.key) == sorted(live.export().records, key=lambda r: r.key)
    assert replayed.export().sessions == live.export().sessions
    assert replayed.last_version_id == live.last_version_id
    restored = MetadataState.from_image(live.export(), T0)
    assert restored.list("", KEY_SPACE_END) == live.list("", KEY_SPACE_END)
    assert restored.list("0", "9", use_index="ix") == live.list("0", "9", use_index="ix")
    for sid in live.session_ids():
        assert restored.session_keys(sid) == live.session_keys(sid)
