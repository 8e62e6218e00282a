"""Keeps a load process at the users it was told to run: finds the users Locust lost.

Why. A Locust worker turns each spawn message of the master into counts to start and to
stop (`WorkerRunner.start_worker`), computed from `user_classes_count`, which counts every
user greenlet still alive, users already asked to stop gracefully included. When a second
spawn message comes while the first is still stopping users (a fresh ramp-up: the master
re-dispatches from zero at the spawn rate, one message a second, after it dropped a dead
worker), the first spawning greenlet is killed mid-stop and the second counts the stopping
users as running: it starts none, the stopping users then end, and nobody replaces them.
A chaos run (client-kill of a worker) ran its last five minutes with 8 of its 14 users so.

What. Every `GUARD_INTERVAL_S` the load process (workloads.runner) compares the runner's
target per user class (`target_user_classes_count`, set by every spawn job) with the users
that are alive and not stopping (`live_users`). A class short for `STRIKES` checks in a row
while no spawn was in progress is topped up: the runner spawns the missing users, the load
process logs a warning and counts them (`users_respawned` in locust/status.json). A surplus
is left alone (users asked to stop end by themselves). The pure logic is here, without
Locust, so the unit tests can import it; the Locust side is `workloads.runner.repair_users`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

GUARD_INTERVAL_S = 1.0
"""How often the users are counted."""
STRIKES = 2
"""Consecutive checks a class must be short (with no spawn in progress) before it is topped up:
a spawn job that is about to start its users is never raced."""


def live_users(greenlets: Iterable[Any], stopping_state: str) -> Counter[str]:
    """Users per class name among Locust user greenlets: alive and not asked to stop.

    `stopping_state` is Locust's `LOCUST_STATE_STOPPING` (a user that finishes its task and
    then ends). A greenlet whose arguments are gone (it ended) is not counted."""
    counts: Counter[str] = Counter()
    for greenlet in greenlets:
        if getattr(greenlet, "dead", False):
            continue
        args = getattr(greenlet, "args", ())
        if not args:
            continue
        user = args[0]
        if getattr(user, "_state", None) == stopping_state:
            continue
        counts[type(user).__name__] += 1
    return counts


class UserGuard:
    """Decides, check by check, which users a runner is missing (see the module docstring)."""

    def __init__(self, strikes: int = STRIKES) -> None:
        if strikes < 1:
            raise ValueError(f"strikes must be at least 1, got {strikes}")
        self.strikes = strikes
        self._target: dict[str, int] | None = None
        self._short: dict[str, int] = {}     # what was missing at every check of the current run
        self._count = 0                       # consecutive checks it was missing

    def check(self, target: Mapping[str, int], live: Mapping[str, int], *, busy: bool) -> dict[str, int]:
        """The users to start now per class (empty: none).

        Args:
            target: the users the runner should run per class (its latest spawn job).
            live: the users alive and not stopping per class (`live_users`).
            busy: a spawn is in progress, or the runner is not running (starting, stopping):
                the check counts nothing against it.
        """
        wanted = dict(target)
        short = {name: n - live.get(name, 0) for name, n in wanted.items() if n > live.get(name, 0)}
        if busy or wanted != self._target:
            self._target = wanted
            short = {} if busy else short
            self._short, self._count = short, 1 if short else 0
        else:
            # short again, for the same target: what was missing every time
            both = {name: min(n, self._short[name]) for name, n in short.items() if name in self._short}
            self._short, self._count = (both, self._count + 1) if both else (short, 1 if short else 0)
        if self._count < self.strikes:
            return {}
        missing = self._short
        self._short, self._count = {}, 0
        return missing
