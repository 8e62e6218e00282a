"""Topology changes made by several operators at once (`params.operators`, faults.actions.as_operators),
against a fake scalable-topic controller: no processes, no sockets."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import pytest

from faults import actions, kinds
from faults.actions import MergeAction, SplitAction, TerminateAction, as_operators
from faults.kinds.base import Kind
from faults.model import Fault, NotInjected, TopicAdmin
from faults.resolution import SegmentTarget
from harness.client.admin import AdminError

TOPIC = "topic://public/txnbench/orders"
SEG0 = "segment://public/txnbench/orders/0000-7fff-0"
SEG1 = "segment://public/txnbench/orders/8000-ffff-1"


def _refused(status: int, why: str) -> NotInjected:
    """What faults.admin raises for a 4xx: NotInjected caused by the admin client's error."""
    try:
        raise AdminError(why, status=status)
    except AdminError as cause:
        err = NotInjected(why)
        err.__cause__ = cause
        return err


@dataclass
class FakeController:
    """Pulsar 5.0's layout operations as the embedded controller does them: one at a time per
    topic (a second is answered 409 busy while one holds the topic's lock), a sealed segment is
    neither split nor merged again (412), and terminating a terminated segment answers again."""

    hold_s: float = 0.05
    active: set[int] = field(default_factory=lambda: {0, 1})
    terminated: set[str] = field(default_factory=set)
    answers: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _busy: bool = False

    def _operation(self, segments: Sequence[int]) -> None:
        with self._lock:
            if self._busy:
                self.answers.append("409")
                raise _refused(409, "another layout operation is in progress; retry")
            self._busy = True
        try:
            time.sleep(self.hold_s)
            with self._lock:
                if not all(s in self.active for s in segments):
                    self.answers.append("412")
                    raise _refused(412, f"segments {list(segments)} must be active")
                self.active -= set(segments)
                self.answers.append("ok")
        finally:
            with self._lock:
                self._busy = False

    def split_segment(self, topic: str, segment_id: int) -> None:
        self._operation([segment_id])

    def merge_segments(self, topic: str, first_id: int, second_id: int) -> None:
        self._operation([first_id, second_id])

    def terminate_segment(self, segment: str) -> None:
        time.sleep(self.hold_s)
        with self._lock:
            self.terminated.add(segment)
            self.answers.append("ok")

    def terminate_topic(self, topic: str) -> None:
        self.terminate_segment(topic)


def _fault(kind: Kind, targets: tuple[SegmentTarget, ...], operators: int) -> Fault:
    return Fault("f7", kind.name, "segment:trigger", targets, kind.validate_params({"operators": operators}), 0.0,
                 False, "faults.schedule[7]")


def test_two_operators_split_one_segment_one_wins_the_other_is_refused_after_retrying_busy() -> None:
    controller = FakeController()
    effect = SplitAction(cast(TopicAdmin, controller)).inject(_fault(kinds.split.KIND, (SegmentTarget(TOPIC, SEG0),), 2))
    assert effect is not None and effect["operators"] == 2
    answers = effect["answers"]
    assert answers.count("ok") == 1 and len(answers) == 2
    (loser,) = [a for a in answers if a != "ok"]
    assert loser.startswith("refused:") and "must be active" in loser   # the layout's refusal, not busy
    assert "409" in controller.answers and controller.answers[-1] == "412"
    assert controller.active == {1}


def test_a_merge_racing_a_split_of_one_of_its_segments() -> None:
    controller = FakeController()
    split = SplitAction(cast(TopicAdmin, controller))
    merge = MergeAction(cast(TopicAdmin, controller))
    done: list[object] = []
    thread = threading.Thread(target=lambda: done.append(
        split.inject(_fault(kinds.split.KIND, (SegmentTarget(TOPIC, SEG0),), 1))))
    thread.start()
    time.sleep(0.01)
    with pytest.raises(NotInjected, match="must be active"):
        merge.inject(_fault(kinds.merge.KIND, (SegmentTarget(TOPIC, SEG0), SegmentTarget(TOPIC, SEG1)), 2))
    thread.join(5)
    assert done == [None] and controller.active == {1}


def test_two_operators_terminating_a_segment_both_answered() -> None:
    controller = FakeController()
    effect = TerminateAction(cast(TopicAdmin, controller)).inject(_fault(kinds.terminate.KIND, (SegmentTarget(TOPIC, SEG0),), 2))
    assert effect == {"operators": 2, "answers": ["ok", "ok"]}
    assert controller.terminated == {SEG0}


def test_one_operator_is_the_change_as_it_was() -> None:
    controller = FakeController()
    assert SplitAction(cast(TopicAdmin, controller)).inject(_fault(kinds.split.KIND, (SegmentTarget(TOPIC, SEG0),), 1)) is None
    assert controller.answers == ["ok"]
    with pytest.raises(NotInjected, match="must be active"):   # a refusal is not retried
        SplitAction(cast(TopicAdmin, controller)).inject(_fault(kinds.split.KIND, (SegmentTarget(TOPIC, SEG0),), 1))
    assert controller.answers == ["ok", "412"]


def test_busy_is_retried_only_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actions, "BUSY_RETRY_FOR_S", 0.2)
    monkeypatch.setattr(actions, "BUSY_RETRY_PAUSE_S", 0.05)
    controller = FakeController(hold_s=1.0)
    effect = SplitAction(cast(TopicAdmin, controller)).inject(_fault(kinds.split.KIND, (SegmentTarget(TOPIC, SEG0),), 2))
    assert effect is not None
    assert sorted(a.split(":")[0] for a in effect["answers"]) == ["ok", "refused"]
    assert any("retry" in a for a in effect["answers"])   # still busy when the operator gave up


def test_none_ok_all_refused_is_not_injected_and_an_unknown_answer_is_raised() -> None:
    calls = 0

    def refused() -> None:
        nonlocal calls
        calls += 1
        raise _refused(404, "no such topic")

    with pytest.raises(NotInjected, match="every one of 3 operators was refused"):
        as_operators(_fault(kinds.split.KIND, (SegmentTarget(TOPIC, SEG0),), 3), refused)
    assert calls == 3

    answers = iter([_refused(412, "sealed"), AdminError("no answer", status=None)])
    lock = threading.Lock()

    def mixed() -> None:
        with lock:
            err = next(answers)
        raise err

    with pytest.raises(AdminError, match="no answer"):
        as_operators(_fault(kinds.split.KIND, (SegmentTarget(TOPIC, SEG0),), 2), mixed)


def test_operators_bounds() -> None:
    assert kinds.split.KIND.validate_params({}) == {"operators": 1}
    assert kinds.merge.KIND.validate_params({"operators": 2}) == {"operators": 2}
    assert kinds.terminate.KIND.validate_params({}) == {"operators": 1}
    for bad in (0, 5):
        with pytest.raises(ValueError):
            kinds.split.KIND.validate_params({"operators": bad})
