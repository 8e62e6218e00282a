"""Real Locust runners (a master and its workers, in this one process) through the two ways a
chaos run lost users; run by tests/cluster/test_locust_users.py as
`python -m tests.cluster.locust_drill DRILL [--fixed]`, it prints one JSON line.

* `ramp-during-stop`: one worker runs 6 users whose task takes `TASK_S` (as a transaction
  does). The master then dispatches them again from zero at 3 users a second, as Locust does
  after dropping a dead worker: its first message makes the worker stop 3 users gracefully
  (they finish their task), the second (a second later) kills that stop midway and counts the
  stopping users as running. With `--fixed` the worker runs the load process's users guard
  (workloads.runner.repair_users, every GUARD_INTERVAL_S).
* `killed-worker`: two workers; one is killed (its greenlets and socket gone, no goodbye) and
  marked missing the way workloads.runner's `_forget_locust_worker` does; a replacement
  connects. Locust's own removal of the dead worker (shortened here from 60 s to a few) then
  dispatches every user again from zero, and the workers (no guard here) lose users as above.
  With `--fixed` the master drops the missing worker at once
  (workloads.runner.drop_missing_worker), as the load process does before it starts the
  replacement. The JSON counts the master's dispatches from the replacement's on.

It monkey-patches the interpreter with gevent (and imports Locust): never import this
module in the test process.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()   # first, as in workloads.runner

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import gevent  # noqa: E402
import locust.runners as locust_runners  # noqa: E402
from locust import User, constant, task  # noqa: E402
from locust.env import Environment  # noqa: E402
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner  # noqa: E402
from locust.user.task import LOCUST_STATE_STOPPING  # noqa: E402

import workloads.runner as load_runner  # noqa: E402
from workloads.user_guard import GUARD_INTERVAL_S, UserGuard, live_users  # noqa: E402

TASK_S = 2.5
STOP_TIMEOUT_S = 30.0


class TxnUser(User):
    """A user whose every task takes a while: a graceful stop waits for it."""

    wait_time = constant(0)

    @task
    def work(self) -> None:
        gevent.sleep(TASK_S)


class HelperUser(User):
    fixed_count = 2
    wait_time = constant(0)

    @task
    def work(self) -> None:
        gevent.sleep(TASK_S)


CLASSES: list[type[User]] = [TxnUser, HelperUser]


def wait_for(what: Callable[[], bool], timeout_s: float, message: str) -> None:
    with gevent.Timeout(timeout_s, AssertionError(f"timed out: {message}")):
        while not what():
            gevent.sleep(0.05)


def master() -> MasterRunner:
    runner = Environment(user_classes=CLASSES, stop_timeout=STOP_TIMEOUT_S).create_master_runner("127.0.0.1", 0)
    assert isinstance(runner, MasterRunner)
    return runner


def worker(port: int) -> WorkerRunner:
    runner = Environment(user_classes=CLASSES, stop_timeout=STOP_TIMEOUT_S).create_worker_runner("127.0.0.1", port)
    assert isinstance(runner, WorkerRunner)
    return runner


def live(runner: WorkerRunner) -> dict[str, int]:
    return dict(live_users(runner.user_greenlets, LOCUST_STATE_STOPPING))


def guard_loop(runner: WorkerRunner, respawned: list[int]) -> None:
    guard = UserGuard()
    while True:
        gevent.sleep(GUARD_INTERVAL_S)
        missing = load_runner.repair_users(runner, guard)
        respawned.append(sum(missing.values()))


def ramp_during_stop(fixed: bool) -> dict[str, Any]:
    boss = master()
    one = worker(boss.server.port)
    wait_for(lambda: boss.worker_count == 1, 20, "the worker connects")
    respawned: list[int] = []
    if fixed:
        gevent.spawn(guard_loop, one, respawned)
    boss.start(6, 100)
    wait_for(lambda: boss.spawning_completed and one.user_count == 6, 20, "6 users run")
    gevent.sleep(0.3)                        # every user is inside its task
    boss._users_dispatcher = None            # what Locust does after dropping a dead worker
    boss.start(6, 3)                         # a fresh ramp: 3 users, a second later 6
    wait_for(lambda: boss.spawning_completed, 20, "the ramp ends")
    gevent.sleep(TASK_S + 2 * GUARD_INTERVAL_S + 2.0)   # the stopped users ended; two checks after
    return {"target": dict(one.target_user_classes_count), "live": live(one), "respawned": sum(respawned)}


def killed_worker(fixed: bool) -> dict[str, Any]:
    locust_runners.HEARTBEAT_DEAD_INTERNAL = -3     # Locust drops a missing worker after 3 s, not 60
    boss = master()
    first, second = worker(boss.server.port), worker(boss.server.port)
    wait_for(lambda: boss.worker_count == 2, 20, "two workers connect")
    boss.start(6, 3)                                # 3 users a second, as the run's 8 of 14
    wait_for(lambda: boss.spawning_completed and first.user_count + second.user_count == 6, 20, "6 users run")
    # kill `first`: no goodbye, nothing more from it
    first.greenlet.kill(block=True)
    first.user_greenlets.kill(block=True)
    first.client.close()
    boss.clients[first.client_id].heartbeat = -1    # workloads.runner._forget_locust_worker
    wait_for(lambda: boss.clients[first.client_id].state == STATE_MISSING, 10, "the dead worker is missing")
    dropped = load_runner.drop_missing_worker(boss, first.client_id) if fixed else False
    dispatches: list[int] = []
    original_start = boss.start

    def counted_start(*args: Any, **kwargs: Any) -> None:
        dispatches.append(len(boss.clients))
        original_start(*args, **kwargs)

    boss.start = counted_start  # type: ignore[method-assign]
    third = worker(boss.server.port)                # the replacement; its arrival dispatches once
    wait_for(lambda: third.user_count > 0 and boss.spawning_completed, 20, "the replacement runs users")
    # Locust's removal of the dead worker (unless dropped), its ramp, the users it stops ending
    gevent.sleep(-locust_runners.HEARTBEAT_DEAD_INTERNAL + 2.0 + TASK_S + 2.0)
    running = [live(second), live(third)]
    return {"dropped": dropped, "dispatches": len(dispatches), "clients": len(boss.clients),
            "live": sum(sum(counts.values()) for counts in running)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("drill", choices=["ramp-during-stop", "killed-worker"])
    parser.add_argument("--fixed", action="store_true")
    args = parser.parse_args(argv)
    drill = ramp_during_stop if args.drill == "ramp-during-stop" else killed_worker
    print(json.dumps(drill(args.fixed)), flush=True)
    sys.stdout.flush()
    os._exit(0)      # no orderly Locust shutdown: the result is out


if __name__ == "__main__":
    sys.exit(main())
