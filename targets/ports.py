"""A local cluster's ports: planned by name, and moved when another process takes one first.

Theory of operation. A port is free only until something binds it, and a server binds
the port it was given seconds after it was chosen (a JVM starting up): another process
on the machine (another cluster's broker, a test's socket) can take it in between. Seen:
a real Pulsar 4.0.8 broker exited with `Failed to bind Pulsar broker on /127.0.0.1:46295
... Address already in use`, and the whole bench run failed. Three parts make a
start-up survive that:

* `PortPlan`: every port of a cluster under a name owned by one service (`broker-0`,
  `binary_port`); the proxy owns its API port and every link's listening port. A target
  derives every config file, link, advertised listener, URL and state record from the
  plan, so moving one service's ports and planning again changes exactly what names them.
* Readiness includes holding its own ports (`ServiceProcess.ports`,
  `targets.processes.listening_ports`): a server of someone else's answering on a taken
  port is not taken for ours.
* `start_services`: starts services and waits until every one is ready. One that exits
  during start-up, or is not ready while its log says its address was in use, is killed,
  given new ports (`move`: the target's plan moves that service's ports, it plans again
  and points the running proxy's links at the new upstreams) and started again: at most
  `BIND_TRIES` starts of one service, all within the caller's deadline.

Why the proxy alone is updated live: the services start proxy first, then the stores,
then the brokers, and a running service names no other's port but through a link
(the proxy's listening address, which moves only while nothing else runs); only the
proxy dials services directly, and its API moves a link's upstream (Toxiproxy and ours
alike). A target refuses to move the proxy once anything else runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import requests

from harness.toxiproxy.client import ToxiproxyClient
from targets.processes import (
    ProcessState,
    ServiceExited,
    ServiceNotReady,
    ServiceProcess,
    free_ports,
)

#: Starts of one service before a start-up gives up on taken ports (the first one included).
BIND_TRIES = 3

PortKey = tuple[str, str]
"""(owner service, port name): `("broker-0", "binary_port")`, `("proxy", "link:client-broker-0")`."""


class PortsTaken(ServiceExited):
    """A service found its ports taken on every one of its `BIND_TRIES` starts."""


@dataclass
class PortMove:
    """One service moved to new ports: what it had, what it has now, on which start."""

    service: str
    old: dict[str, int]
    new: dict[str, int]
    start: int            # the start that failed (1 = the first)

    def describe(self) -> str:
        pairs = ", ".join(f"{name} {self.old[name]} -> {self.new[name]}" for name in self.new)
        return (f"{self.service}: a port was taken by another process before it bound it "
                f"(start {self.start} of at most {BIND_TRIES}); moved {pairs}")

    def to_json(self) -> dict[str, object]:
        return {"service": self.service, "old": dict(self.old), "new": dict(self.new), "start": self.start}


@dataclass
class PortPlan:
    """Every port of a cluster by (owner, name); `move` gives one owner new free ports."""

    ports: dict[PortKey, int]
    chooser: Callable[[int], list[int]] = free_ports
    moves: list[PortMove] = field(default_factory=list)

    @classmethod
    def choose(cls, keys: Iterable[PortKey], chooser: Callable[[int], list[int]] = free_ports) -> PortPlan:
        keys = list(keys)
        if len(set(keys)) != len(keys):
            raise ValueError(f"a port planned twice: {sorted(k for k in keys if keys.count(k) > 1)}")
        return cls(dict(zip(keys, chooser(len(keys)), strict=True)), chooser)

    def __getitem__(self, key: PortKey) -> int:
        return self.ports[key]

    def of(self, owner: str) -> dict[str, int]:
        """The owner's ports by name, in plan order."""
        return {name: port for (who, name), port in self.ports.items() if who == owner}

    def move(self, owner: str, start: int = 1) -> PortMove:
        """New free ports for every port of `owner` (which one was taken is not always said)."""
        old = self.of(owner)
        if not old:
            raise KeyError(f"no ports planned for {owner!r}")
        fresh = iter(self.chooser(len(old)))
        new = {name: next(fresh) for name in old}
        for name, port in new.items():
            self.ports[(owner, name)] = port
        move = PortMove(owner, old, new, start)
        self.moves.append(move)
        return move


def changed_upstreams(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str]:
    """link name -> its new upstream, for the links whose upstream a move changed."""
    return {name: upstream for name, upstream in after.items() if before.get(name) not in (None, upstream)}


def follow_links(api_url: str | None, proxy: ServiceProcess | None, before: Mapping[str, str],
                 after: Mapping[str, str]) -> dict[str, str]:
    """Point the running proxy's links whose upstream moved at the new upstream, through its API
    (Toxiproxy's `POST /proxies/<name>`, which ours serves too); the links that changed."""
    changed = changed_upstreams(before, after)
    if changed and api_url is not None and proxy is not None and proxy.state != ProcessState.STOPPED:
        with ToxiproxyClient(api_url) as client:
            for name, upstream in changed.items():
                client.update_proxy(name, upstream=upstream)
    return changed


def start_services(names: Sequence[str], deadline: float, *, process: Callable[[str], ServiceProcess],
                   start: Callable[[str], None], move: Callable[[str, int], PortMove],
                   say: Callable[[str], None] | None = None, poll_s: float = 0.1,
                   tries: int = BIND_TRIES) -> list[PortMove]:
    """Start `names` and wait until each is ready; one whose port was taken is moved and started again.

    `process(name)` is the service's current process (a new one after a move), `start(name)`
    starts it without waiting, `move(name, start)` gives it new ports and plans again.
    Raises ServiceExited when one exits for another reason, PortsTaken after `tries` starts
    lost their ports, ServiceNotReady naming those still pending at `deadline`.
    """
    starts = dict.fromkeys(names, 0)
    moves: list[PortMove] = []

    def launch(name: str) -> None:
        starts[name] += 1
        start(name)

    for name in names:
        launch(name)
    pending = list(names)
    with requests.Session() as session:
        while pending:
            for name in list(pending):
                proc = process(name)
                stopped = proc.state == ProcessState.STOPPED
                if not stopped and proc.healthy(session):
                    pending.remove(name)
                    continue
                if not (stopped or proc.said_address_in_use()):
                    continue
                if not proc.said_address_in_use():
                    raise ServiceExited(f"{name} exited during start-up (code {proc.exit_code()}); "
                                        f"see {proc.log_path}", [proc])
                if not stopped:
                    proc.kill()   # running without its port (Toxiproxy without the links it could not bind)
                if starts[name] >= tries:
                    raise PortsTaken(f"{name} found a port taken by another process on each of its {starts[name]} "
                                     f"starts; see {proc.log_path}", [proc])
                moved = move(name, starts[name])
                moves.append(moved)
                if say is not None:
                    say(moved.describe())
                launch(name)
            if not pending:
                break
            if time.monotonic() > deadline:
                raise ServiceNotReady(f"{', '.join(pending)} not ready in time; see {process(pending[0]).log_path}",
                                      [process(n) for n in pending])
            time.sleep(poll_s)
    return moves
