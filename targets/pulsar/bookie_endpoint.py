"""Old BookKeeper clients dial a bookie's published endpoint, not its id: point them at the link.

Why: the bookie registers the `brokers-ledger` link's address as its bookie id, so that every
broker's ledger traffic crosses the link a fault slows or cuts (conf.py). BookKeeper 4.15 and
later let a client dial the id as a plain `host:port` (`bookieAddressResolverEnabled` off, which
the brokers' configuration sets); 4.14 (Pulsar 2.10) has no such switch and always resolves an id
through the endpoint the bookie publishes in its registration node, which is the port it listens
on. There, every broker reached the bookie directly and every fault on its link to the bookie
was a no-op (seen 2026-12-05: `DefaultBookieAddressResolver - Resolved <link> as <bookie>` in each
2.10.5 broker log, no connection through the link, a slowed ledger that slowed nothing).

The 4.14 client reads a registration node without data as a bookie of the time before endpoints
were published, and derives its address from the id (`ZKRegistrationClient`'s
`deserializeBookieServiceInfo`, `BookieServiceInfoUtils.buildLegacyBookieServiceInfo`). So, on such
a release, once the bookie has registered and before a broker reads the node, the node's data is
emptied: the brokers then dial the id, the link. The bookie writes the node again only when it
registers again (a restart), and the cluster empties it again after every start of the bookie.

Public API:

    ENDPOINT_RESOLVED_BEFORE                 (the first BookKeeper version with the switch)
    resolves_published_endpoint(version) -> bool
    registration_path(bookie_id) -> str
    empty_published_endpoint(zk_address, bookie_id, *, timeout_s) -> None
    dialled_around(log_text, bookie_id) -> str | None   (a broker log's line that shows the link bypassed)
"""

from __future__ import annotations

import time

from harness.errors import EnvironmentProblem

__all__ = ["ENDPOINT_RESOLVED_BEFORE", "dialled_around", "empty_published_endpoint", "registration_path",
           "resolves_published_endpoint"]

#: BookKeeper 4.15 added `bookieAddressResolverEnabled`; before it a client always resolves ids.
ENDPOINT_RESOLVED_BEFORE = (4, 15)
#: The registration root of `zk+hierarchical://HOST:PORT/ledgers` (conf.bookkeeper_metadata_uri).
_AVAILABLE = "/ledgers/available"
_POLL_S = 0.2


def resolves_published_endpoint(bookkeeper_version: str) -> bool:
    """True when a BookKeeper client of this version dials the endpoint a bookie publishes,
    whatever its id says ("4.14.7" -> True, "4.16.1" -> False); an unreadable version is False
    (every release but the 2.10 line ships 4.15 or later)."""
    parts = bookkeeper_version.split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return False
    return (major, minor) < ENDPOINT_RESOLVED_BEFORE


def registration_path(bookie_id: str) -> str:
    """The ZooKeeper node a writable bookie registers under."""
    return f"{_AVAILABLE}/{bookie_id}"


def empty_published_endpoint(zk_address: str, bookie_id: str, *, timeout_s: float = 60.0) -> None:
    """Waits (at most `timeout_s`) for the bookie's registration node on the ZooKeeper at
    `zk_address` and empties its data; raises EnvironmentProblem when ZooKeeper does not answer
    (a bookie restarted while the store is down, say) or the node never appears."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    path = registration_path(bookie_id)
    client = KazooClient(hosts=zk_address, timeout=10.0)
    try:
        client.start(timeout=min(timeout_s, 10.0))
    except KazooTimeoutError as err:
        client.close()
        raise EnvironmentProblem(
            f"ZooKeeper at {zk_address} did not answer, so the bookie's registration could not be emptied and "
            "2.10's brokers would dial the bookie around the ledger link; is the metadata store running?") from err
    try:
        deadline = time.monotonic() + timeout_s
        while client.exists(path) is None:
            if time.monotonic() > deadline:
                raise EnvironmentProblem(
                    f"the bookie never registered at {path} on ZooKeeper {zk_address} within {timeout_s:.0f} s; "
                    "its log (logs/ledger.log in the cluster's folder) says why")
            time.sleep(_POLL_S)
        client.set(path, b"")
    finally:
        client.stop()
        client.close()


def dialled_around(log_text: str, bookie_id: str) -> str | None:
    """The line of a broker's log where its BookKeeper client resolved the bookie id (the link's address)
    to another address, which it then dials directly; None when there is none. Any release: a
    cluster whose brokers bypass the link must not run faults on it as if they reached the bookie."""
    sign = f"DefaultBookieAddressResolver - Resolved {bookie_id} as "
    return next((line.strip() for line in log_text.splitlines() if sign in line), None)
