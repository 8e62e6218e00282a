"""Leader election on one ephemeral key (topic ownership, `/txn/tc/leader/<partition>`).

Theory of operation. Every candidate runs the same reconcile step whenever something
may have changed (start, a watch event on the key, a resync after reconnect, the
loss of its session, a periodic safety check):

* try to create the key with `expected_version=-1` as an ephemeral record of its
  session, holding its value: success means it leads;
* on BadVersion, read the key: when the record belongs to its own session (its
  earlier create was applied but the answer was lost) it leads, otherwise it
  follows whoever's value is there; if the key vanished meanwhile it tries again.

Leadership ends when the session is lost (the client reports that no later than the
store can expire it, so a leader steps down before anybody else can be elected) or
when the key is deleted or taken over. `on_change(Leadership)` is called on every
change of role or of the leader's value; `stop()` resigns by deleting the key with a
CAS on its version. This is Pulsar's `LeaderElection` on an Oxia ephemeral key.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from embedded.metadata.backend import MetadataBackend, WatchHandle
from embedded.metadata.client import Backoff, MetadataClient
from embedded.metadata.model import (
    MUST_NOT_EXIST,
    BadVersion,
    KeyNotFound,
    MetadataError,
    MetadataUnavailable,
    Notification,
    SessionExpired,
)

log = logging.getLogger("embedded.metadata.election")


class Role(enum.Enum):
    UNKNOWN = "unknown"     # not yet decided, or the store is unreachable
    LEADER = "leader"
    FOLLOWER = "follower"
    STOPPED = "stopped"


@dataclass(frozen=True)
class Leadership:
    """What this candidate knows: its role and the current leader's value (None: no leader)."""

    key: str
    role: Role
    leader_value: str | None
    version_id: int | None = None
    session_id: int | None = None


class LeaderElection:
    def __init__(self, client: MetadataBackend, key: str, value: str, *,
                 on_change: Callable[[Leadership], Any] | None = None,
                 recheck_s: float = 30.0, backoff: Backoff | None = None) -> None:
        self.client = client
        self.key = key
        self.value = value
        self.on_change = on_change
        self.recheck_s = recheck_s
        self.backoff = backoff or Backoff()
        self.current = Leadership(key, Role.UNKNOWN, None)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watch: WatchHandle | None = None
        self._changed = asyncio.Condition()
        self._stopping = False

    @property
    def is_leader(self) -> bool:
        return self.current.role is Role.LEADER

    async def start(self) -> None:
        self.client.add_session_listener(self._on_session_lost)
        self._watch = await self.client.watch(self.key, self._on_events, on_resync=self._wake.set)
        self._task = asyncio.create_task(self._run())

    async def stop(self, *, resign: bool = True) -> None:
        """Stop contending; when leading and `resign`, delete the key so another can lead now."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            # The flag ends the loop even when a cancel is swallowed by a wait_for deep in an RPC.
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.client.remove_session_listener(self._on_session_lost)
        if self._watch is not None:
            with contextlib.suppress(Exception):
                await self._watch.cancel()
        held = self.current
        if resign and held.role is Role.LEADER and held.version_id is not None:
            with contextlib.suppress(MetadataError, MetadataUnavailable):
                await self.client.delete(self.key, expected_version=held.version_id)
        await self._set(Leadership(self.key, Role.STOPPED, None))

    async def wait_for(self, predicate: Callable[[Leadership], bool], timeout: float) -> Leadership:
        """Wait (bounded) until `predicate(self.current)` holds; for tools and tests."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: predicate(self.current))
        return self.current

    # ---- internals ----------------------------------------------------------------------------

    def _on_events(self, events: list[Notification]) -> None:
        if any(e.key == self.key for e in events):
            self._wake.set()

    def _on_session_lost(self, session_id: int) -> None:
        if self.current.session_id == session_id and self.current.role is Role.LEADER:
            log.warning("%s: lost leadership with session %d", self.key, session_id)
            task = asyncio.ensure_future(self._set(Leadership(self.key, Role.UNKNOWN, None)))
            task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)
        self._wake.set()

    async def _run(self) -> None:
        failures = 0
        while not self._stopping:   # bounded by the election's life
            self._wake.clear()
            try:
                await self._reconcile()
                failures = 0
                timeout = self.recheck_s
            except (MetadataUnavailable, SessionExpired) as err:
                log.info("%s: cannot contend now (%s); retrying", self.key, err)
                if self.current.role is Role.LEADER and self.client.current_session != self.current.session_id:
                    await self._set(Leadership(self.key, Role.UNKNOWN, None))
                timeout = self.backoff.delay(failures)
                failures += 1
            if self._stopping:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):   # unlike wait_for, never swallows a cancel
                    await self._wake.wait()

    async def _reconcile(self) -> None:
        for _ in range(10):   # bounded: each round either decides or saw the key vanish
            try:
                result = await self.client.put(self.key, self.value, expected_version=MUST_NOT_EXIST,
                                               ephemeral=True)
            except BadVersion:
                pass
            else:
                await self._set(Leadership(self.key, Role.LEADER, self.value, result.version.version_id,
                                           result.version.session_id))
                return
            try:
                record = await self.client.get(self.key)
            except KeyNotFound:
                continue   # the leader just went away: contend again
            mine = self.client.current_session   # the put may have opened a new session
            owner = record.version.session_id if record.version.ephemeral else None
            role = Role.LEADER if owner is not None and owner == mine else Role.FOLLOWER
            await self._set(Leadership(self.key, role, record.value, record.version.version_id, mine))
            return
        raise MetadataUnavailable(f"{self.key}: leadership kept changing during 10 attempts")

    async def _set(self, new: Leadership) -> None:
        old = self.current
        self.current = new
        async with self._changed:
            self._changed.notify_all()
        if (old.role, old.leader_value) == (new.role, new.leader_value):
            return
        log.info("%s: %s (leader %s) at %.3f", self.key, new.role.value, new.leader_value, time.time())
        if self.on_change is not None:
            try:
                result = self.on_change(new)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("%s: leadership callback failed", self.key)


async def _campaign(address: str, key: str, value: str, session_timeout_ms: int, max_seconds: float) -> None:
    import json
    import signal
    import sys

    def report(change: Leadership) -> None:
        print(json.dumps({"role": change.role.value, "leader": change.leader_value}), flush=True)
        sys.stdout.flush()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with MetadataClient(address, session_timeout_ms=session_timeout_ms, client_name=value) as client:
        election = LeaderElection(client, key, value, on_change=report)
        await election.start()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max_seconds):
                await stop.wait()
        await election.stop()


def main(argv: list[str] | None = None) -> None:
    """`python -m embedded.metadata.election --address H:P --path KEY --value V`: one candidate.

    Prints one JSON line per leadership change; runs until SIGTERM or `--max-seconds`.
    """
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--address", required=True)
    parser.add_argument("--path", required=True, dest="key", metavar="KEY")
    parser.add_argument("--value", required=True)
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(_campaign(args.address, args.key, args.value, args.session_timeout_ms, args.max_seconds))


if __name__ == "__main__":
    main()
