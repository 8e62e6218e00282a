"""The metadata store checked from the outside by the real Oxia client (PyPI `oxia`), and the
same checks on the real Oxia server.

Every test drives a server process only through `oxia.Client`, over Oxia's gRPC
protocol, as the real `pulsar-client` checks our broker. The server is our store's Oxia
frontend (`ours`, the default) or the real Oxia (`real`: `oxia standalone` as the `pulsar`
target runs it, built by targets/gobuild.py on first use): `TXNBENCH_OXIA_UNDER_TEST=ours,real`
(`make test-oxia-real`) runs every test on both. Where the two differ on purpose, the test
says what each does and embedded/metadata/README.md ("Our store against the real Oxia")
tables it; a test of what only our store has (its second protocol) is marked
`ours_only(reason)`. One server per implementation serves the module; each test works
under its own key prefix. What the client cannot observe through its public API (a
session's end after its process dies) is provoked from the outside (a client in a child
process killed with -9), never by reaching into the server; what the client sends only
when a stream breaks (a resume offset) is sent with its own stub.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import oxia
import pytest
from oxia.defs import NotificationType

from embedded.metadata.blocking import BlockingMetadataClient
from embedded.metadata.oxia_client import new_oxia_client
from embedded.metadata.oxia_proto import pb
from tests.cluster.conftest import running
from tests.prerequisites import under_test
from tests.waiting import wait_until
from tools.launch import RealOxiaProcess, StoreProcess

# The client heartbeats every max(timeout/10, 2 s), capped just under the timeout: at Oxia's
# minimum of 2 s it would heartbeat every 1.999 s and lose its session to any delay (on a real
# Oxia too, whose expiry is the same `last heartbeat + timeout`). 4 s leaves 2 s of slack.
SESSION_MS = 4_000

OURS, REAL = "ours", "real"
#: Which servers the suite runs against: `ours` (default), `real` (the real Oxia) or both.
UNDER_TEST_ENV = "TXNBENCH_OXIA_UNDER_TEST"

OxiaServer = StoreProcess | RealOxiaProcess


def new_server(impl: str, directory: Path) -> OxiaServer:
    """Our store with its Oxia frontend, or the real Oxia; not started."""
    return StoreProcess(directory, oxia=True) if impl == OURS else RealOxiaProcess(directory)


@pytest.fixture(scope="module", params=under_test(UNDER_TEST_ENV, OURS, REAL))
def impl(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _only_where_it_applies(request: pytest.FixtureRequest, impl: str) -> None:
    marker = request.node.get_closest_marker("ours_only")
    if impl == REAL and marker is not None:
        pytest.skip(f"only our store: {marker.args[0]}")


@pytest.fixture(scope="module")
def store(impl: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OxiaServer]:
    yield from running(new_server(impl, tmp_path_factory.mktemp(f"oxia-{impl}")))


@pytest.fixture
def client(store: OxiaServer) -> Iterator[oxia.Client]:
    c = new_oxia_client(store.oxia_address, session_timeout_ms=SESSION_MS)
    try:
        yield c
    finally:
        c.close()


def missing(client: oxia.Client, key: str) -> bool:
    try:
        client.get(key)
    except oxia.ex.KeyNotFound:
        return True
    return False


class Collector:
    """Drains a blocking client iterator (notifications, sequence updates) on a thread."""

    def __init__(self, iterator: Any) -> None:
        self.iterator = iterator
        self.items: queue.Queue[Any] = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for item in self.iterator:   # ends when the iterator is closed
            self.items.put(item)

    def take(self, n: int, timeout: float = 10.0, where: Callable[[Any], bool] = lambda _: True) -> list[Any]:
        """The next `n` items that satisfy `where` (others, e.g. other tests' changes, are skipped)."""
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"got {len(out)} of {n} items within {timeout}s: {[str(x) for x in out]}")
            try:
                item = self.items.get(timeout=remaining)
            except queue.Empty:
                continue
            if where(item):
                out.append(item)
        return out

    def close(self) -> None:
        self.iterator.close()
        self.thread.join(timeout=10)


# ---- records, versions, CAS ------------------------------------------------------------------------

def test_put_get_delete_and_versions(client: oxia.Client) -> None:
    key, v1 = client.put("/basic/a", "one")
    assert key == "/basic/a"
    assert v1.modifications_count() == 0 and not v1.is_ephemeral() and v1.session_id() is None
    got_key, value, version = client.get("/basic/a")
    assert (got_key, value, version.version_id()) == ("/basic/a", b"one", v1.version_id())

    _, v2 = client.put("/basic/a", b"two")
    assert v2.version_id() > v1.version_id()
    assert v2.modifications_count() == 1
    assert v2.created_timestamp() == v1.created_timestamp()
    assert v2.modified_timestamp() >= v1.modified_timestamp()
    assert client.get("/basic/a")[1] == b"two"
    _, _, meta_only = client.get("/basic/a", include_value=False)
    assert meta_only.version_id() == v2.version_id()

    assert client.delete("/basic/a") is True
    assert client.delete("/basic/a") is False   # KEY_NOT_FOUND is False, not an error
    with pytest.raises(oxia.ex.KeyNotFound):
        client.get("/basic/a")
    _, v3 = client.put("/basic/a", "again")   # recreated: the count restarts
    assert v3.modifications_count() == 0 and v3.version_id() > v2.version_id()


def test_expected_versions_are_compare_and_set(client: oxia.Client) -> None:
    _, v1 = client.put("/cas/k", "a", expected_version_id=oxia.EXPECTED_RECORD_DOES_NOT_EXIST)
    with pytest.raises(oxia.ex.UnexpectedVersionId):
        client.put("/cas/k", "b", expected_version_id=oxia.EXPECTED_RECORD_DOES_NOT_EXIST)
    with pytest.raises(oxia.ex.UnexpectedVersionId):
        client.put("/cas/k", "b", expected_version_id=v1.version_id() + 1000)
    assert client.get("/cas/k")[1] == b"a"   # a failed CAS changes nothing
    _, v2 = client.put("/cas/k", "b", expected_version_id=v1.version_id())
    with pytest.raises(oxia.ex.UnexpectedVersionId):
        client.put("/cas/missing", "x", expected_version_id=v1.version_id())
    with pytest.raises(oxia.ex.UnexpectedVersionId):
        client.delete("/cas/k", expected_version_id=v1.version_id())
    assert client.delete("/cas/k", expected_version_id=v2.version_id()) is True
    assert missing(client, "/cas/k")


def test_list_range_scan_and_comparisons(client: oxia.Client) -> None:
    for name in ("a", "b", "c", "d"):
        client.put(f"/range/{name}", name.upper())
    client.put("/rangf", "outside")
    assert client.list("/range/", "/range/d") == ["/range/a", "/range/b", "/range/c"]
    assert client.list("/range/b", "/range/c") == ["/range/b"]
    assert client.list("/range/x", "/range/z") == []
    scanned = list(client.range_scan("/range/", "/range/~"))
    assert [(k, v) for k, v, _ in scanned] == [("/range/a", b"A"), ("/range/b", b"B"), ("/range/c", b"C"),
                                               ("/range/d", b"D")]
    assert all(ver.version_id() > 0 for _, _, ver in scanned)

    cmp = oxia.ComparisonType
    assert client.get("/range/bb", comparison_type=cmp.FLOOR)[0] == "/range/b"
    assert client.get("/range/b", comparison_type=cmp.FLOOR)[0] == "/range/b"
    assert client.get("/range/b", comparison_type=cmp.LOWER)[0] == "/range/a"
    assert client.get("/range/bb", comparison_type=cmp.CEILING)[0] == "/range/c"
    assert client.get("/range/b", comparison_type=cmp.HIGHER)[0] == "/range/c"
    assert client.get("/range/b", comparison_type=cmp.HIGHER)[1] == b"C"

    client.delete_range("/range/b", "/range/d")
    assert client.list("/range/", "/range/~") == ["/range/a", "/range/d"]


def test_partition_keys_route_and_scope_requests(client: oxia.Client) -> None:
    key, _ = client.put("/part/x", "1", partition_key="tenant-a")
    client.put("/part/y", "2", partition_key="tenant-a")
    assert key == "/part/x"
    assert client.get("/part/x", partition_key="tenant-a")[1] == b"1"
    assert client.list("/part/", "/part/~", partition_key="tenant-a") == ["/part/x", "/part/y"]
    assert [k for k, _, _ in client.range_scan("/part/", "/part/~", partition_key="tenant-a")] == ["/part/x",
                                                                                                  "/part/y"]
    assert client.delete("/part/x", partition_key="tenant-a") is True


def test_values_are_bytes_on_oxia_and_text_here(impl: str, client: oxia.Client) -> None:
    """Oxia keeps any bytes and any key, the empty one too; our store keeps UTF-8 text under
    non-empty keys (brokers store JSON) and refuses the rest as INVALID_ARGUMENT (README table)."""
    if impl == REAL:
        client.put("/bin/k", b"\xff\xfe")
        assert client.get("/bin/k")[1] == b"\xff\xfe"
        assert client.put("", "empty key")[0] == ""
        return
    for key, value in (("/bin/k", b"\xff\xfe"), ("", b"empty key")):
        with pytest.raises(grpc.RpcError) as err:
            client.put(key, value)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert missing(client, "/bin/k")


def test_keys_sort_hierarchically_on_oxia_and_naturally_here(impl: str, client: oxia.Client) -> None:
    """Oxia orders keys by their number of `/` first, so a range within one level holds only
    that level; our store orders them naturally (README table: why, and what it changes)."""
    for key in ("/h/a", "/h/a/x", "/h/b", "/h/a/x/y"):
        client.put(key, "1")
    if impl == REAL:
        assert client.list("/h/", "/h//") == ["/h/a", "/h/b"]
        assert client.list("/h/", "/h/~") == ["/h/a", "/h/b"]
        assert client.list("/h/a/", "/h/a//") == ["/h/a/x"]
        assert client.list("/h/a", "/h/b") == ["/h/a"]
    else:   # every key in the natural range; the client sorts what it merges hierarchically
        assert client.list("/h/", "/h//") == []
        assert client.list("/h/", "/h/~") == ["/h/a", "/h/b", "/h/a/x", "/h/a/x/y"]
        assert client.list("/h/a", "/h/b") == ["/h/a", "/h/a/x", "/h/a/x/y"]


# ---- sessions and ephemeral records ------------------------------------------------------------------

def test_ephemeral_record_vanishes_when_its_session_closes(store: OxiaServer, client: oxia.Client) -> None:
    owner = new_oxia_client(store.oxia_address, session_timeout_ms=SESSION_MS)
    try:
        _, version = owner.put("/eph/closed", "mine", ephemeral=True)
        assert version.is_ephemeral() and version.session_id() is not None
        seen = client.get("/eph/closed")[2]
        assert seen.is_ephemeral() and seen.session_id() == version.session_id()
        client.put("/eph/persistent", "stays")
    finally:
        owner.close()   # closes the session: its ephemeral records go at once
    assert missing(client, "/eph/closed")
    assert client.get("/eph/persistent")[1] == b"stays"


def test_ephemeral_record_vanishes_when_its_client_dies(store: OxiaServer, client: oxia.Client,
                                                        tmp_path: Path) -> None:
    """kill -9 stops the heartbeats; the store expires the session after its timeout."""
    script = (
        "import sys, time, oxia\n"
        f"c = oxia.Client({store.oxia_address!r}, session_timeout_ms={SESSION_MS})\n"
        "c.put('/eph/killed', 'gone soon', ephemeral=True)\n"
        "print('ready', flush=True)\n"
        "time.sleep(120)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert client.get("/eph/killed")[2].is_ephemeral()
        kept_alive_until = time.monotonic() + SESSION_MS / 1000 * 1.25
        while time.monotonic() < kept_alive_until:   # heartbeats keep it past its timeout
            assert not missing(client, "/eph/killed")
            time.sleep(0.2)
        child.kill()
        child.wait(timeout=10)
        killed_at = time.monotonic()
        wait_until(lambda: missing(client, "/eph/killed"), timeout_s=SESSION_MS / 1000 + 5,
                   message="the dead client's ephemeral record to expire")
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 * 0.5   # expired, not deleted at once
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)


def test_session_timeout_outside_oxia_bounds_is_invalid(store: OxiaServer) -> None:
    c = new_oxia_client(store.oxia_address, session_timeout_ms=6 * 60 * 1000)   # Oxia's maximum is 5 min
    try:
        with pytest.raises(grpc.RpcError) as err:
            c.put("/eph/too-long", "x", ephemeral=True)
        # Oxia wraps its code 109 in UNKNOWN; a Python client sees UNKNOWN and the message.
        assert err.value.code() == grpc.StatusCode.UNKNOWN
        assert "oxia: invalid session timeout" in (err.value.details() or "")
    finally:
        c.close()


def test_unknown_sessions_as_oxia_answers_them(store: OxiaServer) -> None:
    """A heartbeat for a session the server does not know is UNKNOWN "oxia: session not found"
    (Oxia's code 108 as a Python client sees it: what tells a broker its session is gone);
    closing one is OK; an ephemeral put on one is SESSION_DOES_NOT_EXIST."""
    channel = grpc.insecure_channel(store.oxia_address)
    try:
        stub = pb.OxiaClientStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            stub.keep_alive(pb.SessionHeartbeat(shard=0, session_id=987_654))
        assert (err.value.code(), err.value.details()) == (grpc.StatusCode.UNKNOWN, "oxia: session not found")
        assert stub.close_session(pb.CloseSessionRequest(shard=0, session_id=987_654)) == pb.CloseSessionResponse()
        put = pb.PutRequest(key="/eph/unknown-session", value=b"x", session_id=987_654)
        answer = stub.write(pb.WriteRequest(shard=0, puts=[put]))
        assert [p.status for p in answer.puts] == [pb.Status.SESSION_DOES_NOT_EXIST]
        with pytest.raises(grpc.RpcError) as err:
            next(stub.get_shard_assignments(pb.ShardAssignmentsRequest(namespace="other")))
        assert (err.value.code(), err.value.details()) == (grpc.StatusCode.UNKNOWN, "oxia: namespace not found")
    finally:
        channel.close()


# ---- notifications -----------------------------------------------------------------------------------

def test_notifications_report_creates_modifies_and_deletes(client: oxia.Client) -> None:
    stream = Collector(client.get_notifications())
    try:
        _, v1 = client.put("/notify/k", "1")
        _, v2 = client.put("/notify/k", "2")
        client.delete("/notify/k")
        events = stream.take(3, where=lambda n: n.key().startswith("/notify/"))
    finally:
        stream.close()
    assert [(n.key(), n.notification_type()) for n in events] == [
        ("/notify/k", NotificationType.KEY_CREATED), ("/notify/k", NotificationType.KEY_MODIFIED),
        ("/notify/k", NotificationType.KEY_DELETED)]
    assert [n.version_id() for n in events] == [v1.version_id(), v2.version_id(), 0]


def test_a_range_delete_is_one_key_range_deleted_notification(client: oxia.Client) -> None:
    """Oxia notifies a `delete_range` once, at its start key, with the range's end (it does not
    name the keys); KEY_DELETED per key would hide that a whole range went."""
    stream = Collector(client.get_notifications())
    try:
        for name in ("a", "b", "c"):
            client.put(f"/notify-range/{name}", name)
        client.delete_range("/notify-range/", "/notify-range/~")
        client.put("/notify-range-after", "x")   # a later batch: nothing else came from the range
        events = stream.take(5, where=lambda n: n.key().startswith("/notify-range"))
    finally:
        stream.close()
    assert [(n.key(), n.notification_type()) for n in events] == [
        ("/notify-range/a", NotificationType.KEY_CREATED), ("/notify-range/b", NotificationType.KEY_CREATED),
        ("/notify-range/c", NotificationType.KEY_CREATED), ("/notify-range/", NotificationType.KEY_RANGE_DELETED),
        ("/notify-range-after", NotificationType.KEY_CREATED)]
    assert events[3].key_range_end() == "/notify-range/~"


def test_notifications_include_ephemeral_deletions_at_session_end(store: OxiaServer,
                                                                  client: oxia.Client) -> None:
    stream = Collector(client.get_notifications())
    owner = new_oxia_client(store.oxia_address, session_timeout_ms=SESSION_MS)
    try:
        owner.put("/notify-eph/k", "x", ephemeral=True)
        owner.close()
        events = stream.take(2, where=lambda n: n.key().startswith("/notify-eph/"))
    finally:
        stream.close()
    assert [(n.key(), n.notification_type()) for n in events] == [
        ("/notify-eph/k", NotificationType.KEY_CREATED), ("/notify-eph/k", NotificationType.KEY_DELETED)]


# ---- sequence keys -----------------------------------------------------------------------------------

def test_sequence_keys_and_their_updates(client: oxia.Client) -> None:
    updates = Collector(client.get_sequence_updates("/seq/a", partition_key="p"))
    try:
        k1, _ = client.put("/seq/a", "1", partition_key="p", sequence_keys_deltas=[1])
        assert k1 == "/seq/a-00000000000000000001"
        assert updates.take(1) == [k1]
        k2, _ = client.put("/seq/a", "2", partition_key="p", sequence_keys_deltas=[5])
        assert k2 == "/seq/a-00000000000000000006"
        assert updates.take(1) == [k2]
    finally:
        updates.close()
    assert client.get(k2)[1] == b"2"
    # A new subscriber first hears the sequence's highest key.
    late = Collector(client.get_sequence_updates("/seq/a", partition_key="p"))
    try:
        assert late.take(1) == [k2]
    finally:
        late.close()

    k3, _ = client.put("/seq/multi", "x", partition_key="p", sequence_keys_deltas=[1, 2])
    k4, _ = client.put("/seq/multi", "y", partition_key="p", sequence_keys_deltas=[1, 3])
    assert (k3, k4) == ("/seq/multi-00000000000000000001-00000000000000000002",
                        "/seq/multi-00000000000000000002-00000000000000000005")
    with pytest.raises(oxia.ex.InvalidOptions):   # the client refuses before sending
        client.put("/seq/a", "x", sequence_keys_deltas=[1])
    for deltas in ([0], [1]):   # the store refuses a first delta of 0, and fewer deltas than the key has parts
        with pytest.raises(grpc.RpcError) as err:
            client.put("/seq/multi" if deltas == [1] else "/seq/a", "x", partition_key="p", sequence_keys_deltas=deltas)
        assert err.value.code() == grpc.StatusCode.UNKNOWN
        assert "oxia db: failed to apply batch: oxia: " in (err.value.details() or "")


def test_a_sequence_key_put_with_an_expected_version_is_a_version_conflict(store: OxiaServer,
                                                                          client: oxia.Client) -> None:
    """The client refuses it before sending; sent anyway (its own stub), Oxia answers the
    operation UNEXPECTED_VERSION_ID and writes nothing."""
    channel = grpc.insecure_channel(store.oxia_address)
    try:
        put = pb.PutRequest(key="/seq/cas", value=b"x", partition_key="p", sequence_key_delta=[1],
                            expected_version_id=-1)
        answer = pb.OxiaClientStub(channel).write(pb.WriteRequest(shard=0, puts=[put]))
    finally:
        channel.close()
    assert [p.status for p in answer.puts] == [pb.Status.UNEXPECTED_VERSION_ID]
    assert client.list("/seq/cas", "/seq/cas~", partition_key="p") == []


# ---- secondary indexes -------------------------------------------------------------------------------

def test_secondary_indexes(client: oxia.Client) -> None:
    client.put("/idx/1", "one", secondary_indexes={"by-color": "red"})
    client.put("/idx/2", "two", secondary_indexes={"by-color": "blue"})
    client.put("/idx/3", "three", secondary_indexes={"by-color": "red", "by-size": "L"})
    assert client.list("red", "red~", use_index="by-color") == ["/idx/1", "/idx/3"]
    # One shard answers in secondary-key order; without a partition key the client merges
    # the shards' answers and sorts them by primary key.
    assert client.list("a", "z", use_index="by-color", partition_key="any") == ["/idx/2", "/idx/1", "/idx/3"]
    assert client.list("a", "z", use_index="by-color") == ["/idx/1", "/idx/2", "/idx/3"]
    assert [(k, v) for k, v, _ in client.range_scan("blue", "c", use_index="by-color")] == [("/idx/2", b"two")]
    assert client.get("L", use_index="by-size")[:2] == ("/idx/3", b"three")
    client.put("/idx/3", "three", secondary_indexes={"by-color": "green"})   # entries replaced with the record
    assert client.list("red", "red~", use_index="by-color") == ["/idx/1"]
    assert client.list("A", "Z", use_index="by-size") == []
    client.delete("/idx/1")
    assert client.list("a", "z", use_index="by-color") == ["/idx/2", "/idx/3"]


# ---- one store, two frontends ------------------------------------------------------------------------

@pytest.mark.ours_only("our store's own protocol beside Oxia's")
def test_our_protocol_and_oxias_see_the_same_records(store: OxiaServer, client: oxia.Client) -> None:
    assert isinstance(store, StoreProcess), "ours_only: this test runs on our store alone"
    _, version = client.put("/both/from-oxia", "hello")
    with BlockingMetadataClient(store.address) as ours:
        got = ours.get("/both/from-oxia")
        assert (got.value, got.version.version_id) == ("hello", version.version_id())
        written = ours.put("/both/from-ours", "hi", secondary_indexes={"by-origin": "ours"})
    key, value, seen = client.get("/both/from-ours")
    assert (key, value, seen.version_id()) == ("/both/from-ours", b"hi", written.version.version_id)
    assert client.list("ours", "ours~", use_index="by-origin") == ["/both/from-ours"]


# ---- restarts and resumed streams --------------------------------------------------------------------

def test_acknowledged_writes_and_live_sessions_survive_a_store_kill(impl: str, tmp_path: Path) -> None:
    """kill -9 and restart on the same ports: the client reconnects by itself; what it was
    told is written is there, and a session kept alive through the restart keeps its
    ephemeral record (the session is long enough for the client to ride out the restart:
    the client itself gives a session up once `timeout` passed without an answer)."""
    session_ms = 15_000
    store = new_server(impl, tmp_path / "restart")
    store.start()
    c = new_oxia_client(store.oxia_address, session_timeout_ms=session_ms)
    closed_client = False
    try:
        versions = {f"/restart/{i}": c.put(f"/restart/{i}", f"v{i}")[1].version_id() for i in range(20)}
        # A fresh Oxia's first version id is 0 (its WAL offset), ours 1 (README table).
        assert min(versions.values()) == (0 if impl == REAL else 1)
        _, eph = c.put("/restart/eph", "alive", ephemeral=True)
        store.kill()
        store.start()

        def readable() -> bool:
            try:
                return c.get("/restart/0")[1] == b"v0"
            except grpc.RpcError:
                return False

        wait_until(readable, timeout_s=20, message="the client to reach the restarted store")
        assert {k: c.get(k)[2].version_id() for k in versions} == versions
        later = time.monotonic() + 5.0   # more than two heartbeats (every 2 s) after the restart
        while time.monotonic() < later:
            assert c.get("/restart/eph")[2].session_id() == eph.session_id()
            time.sleep(0.25)
        # oxia 0.2.1: once its assignments stream has broken, the client's discovery thread may
        # wait on its start-up barrier again, and then `close()` never returns (README).
        close_bounded(c)
        closed_client = True
        fresh = new_oxia_client(store.oxia_address)   # the session was closed first: its record went
        try:
            wait_until(lambda: missing(fresh, "/restart/eph"), timeout_s=5,
                       message="the closed session's ephemeral record to go")
        finally:
            close_bounded(fresh)
    finally:
        if not closed_client:
            close_bounded(c)
        store.stop()


def close_bounded(client: oxia.Client, timeout: float = 5.0) -> bool:
    """`client.close()` on a daemon thread; whether it returned within `timeout`."""
    thread = threading.Thread(target=client.close, daemon=True)
    thread.start()
    thread.join(timeout)
    return not thread.is_alive()


def test_a_notification_stream_resumes_after_an_offset(store: OxiaServer, client: oxia.Client) -> None:
    """What the client sends when it reconnects a broken stream (`start_offset_exclusive`),
    through the package's own stub: every batch after that offset, then live ones."""
    channel = grpc.insecure_channel(store.oxia_address)
    try:
        stub = pb.OxiaClientStub(channel)
        fresh = stub.get_notifications(pb.NotificationsRequest(shard=0))
        first = next(fresh)   # positioned at the commit offset, with nothing in it
        assert not first.notifications
        fresh.cancel()
        client.put("/resume/a", "1")
        client.put("/resume/b", "2")
        resumed = stub.get_notifications(pb.NotificationsRequest(shard=0, start_offset_exclusive=first.offset))
        batches = [next(resumed), next(resumed)]
        resumed.cancel()
        assert [list(b.notifications) for b in batches] == [["/resume/a"], ["/resume/b"]]
        assert first.offset < batches[0].offset < batches[1].offset
        with pytest.raises(grpc.RpcError) as err:
            next(stub.get_notifications(pb.NotificationsRequest(shard=3)))
        assert (err.value.code(), err.value.details()) == (grpc.StatusCode.UNKNOWN, "node is not leader for shard 3")
    finally:
        channel.close()


def next_within(stream: Any, timeout: float = 10.0) -> Any:
    """The stream's next item, or the stream cancelled and an AssertionError after `timeout`."""
    got: queue.Queue[Any] = queue.Queue()
    threading.Thread(target=lambda: got.put(next(stream, None)), daemon=True).start()
    try:
        item = got.get(timeout=timeout)
    except queue.Empty:
        stream.cancel()
        raise AssertionError(f"nothing on the stream within {timeout}s") from None
    assert item is not None, "the stream ended"
    return item


def test_a_notification_stream_resumes_across_a_server_restart(impl: str, tmp_path: Path) -> None:
    """Oxia keeps notifications in its database, so a stream resumed after a crash and restart
    gets every batch after its offset; our store keeps those of the log records its recovery
    replayed (since the last snapshot). Before, a restarted store had none: a broker's stream
    that broke with the store lost the changes in between."""
    server = new_server(impl, tmp_path / "resume-restart")
    server.start()
    writer = new_oxia_client(server.oxia_address)
    try:
        channel = grpc.insecure_channel(server.oxia_address)
        try:
            fresh = pb.OxiaClientStub(channel).get_notifications(pb.NotificationsRequest(shard=0))
            offset = next(fresh).offset
            fresh.cancel()
        finally:
            channel.close()
        writer.put("/resume-restart/a", "1")
        writer.put("/resume-restart/b", "2")
        server.kill()
        server.start()
        # its own subchannel: gRPC's shared one, which the writer's broke, may still be backing off
        channel = grpc.insecure_channel(server.oxia_address, options=[("grpc.use_local_subchannel_pool", 1)])
        try:
            resumed = pb.OxiaClientStub(channel).get_notifications(
                pb.NotificationsRequest(shard=0, start_offset_exclusive=offset))
            batches = [next_within(resumed), next_within(resumed)]
            resumed.cancel()
        finally:
            channel.close()
        assert [list(b.notifications) for b in batches] == [["/resume-restart/a"], ["/resume-restart/b"]]
        assert [b.notifications["/resume-restart/a"].type for b in batches[:1]] == [pb.NotificationType.KEY_CREATED]
    finally:
        close_bounded(writer)
        server.stop()
