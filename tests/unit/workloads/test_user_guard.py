"""The users guard's logic (workloads.user_guard), without Locust: which users a runner lost.

The run it comes from (results/20261129-024544-chaos-chaos, v4): 14 users on two workers; a
client-kill of w0 at ~20 s; 60 s later Locust dropped the dead worker and dispatched every
user again from zero at the spawn rate (8/s: first 8 users, a second later 14). Each worker
stopped the users the first message did not want (gracefully: they finish their transaction),
the second message killed that stop midway and counted the stopping users as running, so it
started none; they ended, and the run went on with 8 users for its last five minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from workloads.user_guard import STRIKES, UserGuard, live_users

STOPPING = "stopping"     # stands for locust.user.task.LOCUST_STATE_STOPPING


def user_class(name: str) -> type:
    return type(name, (), {})


AtomicProduceUser, CtpUser, FeederUser, VerifierUser = (user_class(n) for n in (
    "AtomicProduceUser", "ConsumeTransformProduceUser", "FeederUser", "VerifierUser"))


@dataclass
class FakeGreenlet:
    """What live_users reads of a Locust user greenlet: `dead`, and the user as `args[0]`."""

    user: Any
    dead: bool = False
    args: tuple[Any, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.args = (self.user,) if self.user is not None else ()


def user(cls: type, state: str | None = "running") -> Any:
    made = cls()
    made._state = state
    return made


def test_live_users_leaves_out_the_stopping_the_dead_and_the_ended() -> None:
    greenlets = [FakeGreenlet(user(AtomicProduceUser)), FakeGreenlet(user(AtomicProduceUser, STOPPING)),
                 FakeGreenlet(user(AtomicProduceUser), dead=True), FakeGreenlet(None),
                 FakeGreenlet(user(FeederUser, None)), FakeGreenlet(user(FeederUser, "waiting"))]
    assert live_users(greenlets, STOPPING) == {"AtomicProduceUser": 1, "FeederUser": 2}


def test_the_incident_a_dispatch_during_a_graceful_stop_is_topped_up_on_the_second_check() -> None:
    """Worker w1 of the run: 7 users, the fresh ramp's first message wants 4, the second 7 again."""
    target = {"AtomicProduceUser": 3, "ConsumeTransformProduceUser": 1, "FeederUser": 2, "VerifierUser": 1}
    guard = UserGuard()
    assert guard.check(target, dict(target), busy=False) == {}
    # first message: 3 users asked to stop; the spawning greenlet waits for them (busy)
    assert guard.check({"AtomicProduceUser": 1, "FeederUser": 2, "VerifierUser": 1},
                       {"AtomicProduceUser": 1, "FeederUser": 2, "VerifierUser": 1}, busy=True) == {}
    # second message: it killed that greenlet, counted the 3 stopping users as running, started none
    live = {"AtomicProduceUser": 1, "FeederUser": 2, "VerifierUser": 1}
    assert guard.check(target, live, busy=False) == {}          # one check short: not yet
    missing = guard.check(target, live, busy=False)
    assert missing == {"AtomicProduceUser": 2, "ConsumeTransformProduceUser": 1}
    # once started they are live: nothing more
    assert guard.check(target, dict(target), busy=False) == {}
    assert guard.check(target, dict(target), busy=False) == {}


def test_nothing_is_counted_while_a_spawn_is_in_progress_or_the_target_changes() -> None:
    target, live = {"A": 4}, {"A": 1}
    guard = UserGuard()
    for _ in range(5):
        assert guard.check(target, live, busy=True) == {}
    assert guard.check(target, live, busy=False) == {}
    assert guard.check({"A": 5}, live, busy=False) == {}        # a new spawn job: counting starts over
    assert guard.check({"A": 5}, live, busy=False) == {"A": 4}
    assert guard.check(target, live, busy=False) == {}
    assert guard.check(target, live, busy=True) == {}           # a spawn in between: over again
    assert guard.check(target, live, busy=False) == {}
    assert guard.check(target, live, busy=False) == {"A": 3}


def test_only_what_was_missing_at_every_check_is_started_and_a_surplus_is_left_alone() -> None:
    guard = UserGuard()
    target = {"A": 4, "B": 2, "C": 1}
    assert guard.check(target, {"A": 1, "B": 1, "C": 3}, busy=False) == {}
    # A came partly back, B is whole again (a stopping user may have been counted in between)
    assert guard.check(target, {"A": 3, "B": 2, "C": 3}, busy=False) == {"A": 1}


def test_a_deficit_that_goes_away_by_itself_is_not_topped_up() -> None:
    guard = UserGuard()
    target = {"A": 2}
    assert guard.check(target, {"A": 1}, busy=False) == {}
    assert guard.check(target, {"A": 2}, busy=False) == {}
    assert guard.check(target, {"A": 1}, busy=False) == {}      # short again: a new first strike
    assert guard.check(target, {"A": 1}, busy=False) == {"A": 1}


def test_a_runner_that_stays_short_is_topped_up_again_at_a_bounded_rate() -> None:
    guard = UserGuard()
    fired = [guard.check({"A": 3}, {"A": 0}, busy=False) for _ in range(6)]
    assert fired == [{}, {"A": 3}, {}, {"A": 3}, {}, {"A": 3}]
    assert STRIKES == 2


def test_strikes_are_at_least_one() -> None:
    assert UserGuard(strikes=1).check({"A": 1}, {}, busy=False) == {"A": 1}
    with pytest.raises(ValueError, match="at least 1"):
        UserGuard(strikes=0)
