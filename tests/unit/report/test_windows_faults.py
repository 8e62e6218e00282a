"""Phase windows and fault windows from history events."""

from __future__ import annotations

from analysis.perf.faults import FaultEvent, fault_windows
from analysis.perf.windows import ALL, measurement_window, phase_windows, predecessor


def test_phases_are_half_open_and_the_last_runs_to_the_end() -> None:
    marks = [("warmup", 100), ("setup", 0), ("steady", 300), ("drain-complete", 950), ("drain", 900),
             ("steady", 400)]
    windows = phase_windows(marks, history_end_ns=1000)
    assert [(w.name, w.start_ns, w.end_ns) for w in windows] == [
        ("setup", 0, 100), ("warmup", 100, 300), ("steady", 300, 900), ("drain", 900, 1001)]
    assert windows[-1].open_end and not windows[0].open_end
    measured = measurement_window(windows, (50, 990))
    assert measured is not None
    assert measured.name == "steady"
    assert predecessor(windows, "steady") == "warmup" and predecessor(windows, "setup") is None
    assert predecessor(windows, "faults") is None


def test_without_steady_the_window_is_the_load_span() -> None:
    w = measurement_window(phase_windows([("setup", 0)], 10), (5, 80))
    assert w is not None and w.name == ALL and (w.start_ns, w.end_ns) == (5, 81)
    assert measurement_window([], None) is None


def ev(f: str, type_: str, t: int, index: int, **extra: object) -> FaultEvent:
    return FaultEvent(f, type_, t, "nemesis", "nemesis", index, dict(extra))


def test_heals_match_by_id_then_kind_then_oldest() -> None:
    events = [
        ev("fault", "invoke", 10, 0, kind="partition", targets=["a"], id="p1"),
        ev("fault", "ok", 11, 1, kind="partition", targets=["a"], id="p1"),
        ev("fault", "invoke", 20, 2, kind="kill", targets=["broker-0"]),
        ev("fault", "ok", 21, 3, kind="kill", targets=["broker-0"]),
        ev("fault", "invoke", 25, 4, kind="pause", targets="broker-1"),
        ev("fault", "fail", 26, 5, kind="pause", targets="broker-1"),
        ev("heal", "invoke", 30, 6, kind="kill", targets=["broker-0"]),
        ev("heal", "ok", 32, 7, kind="kill", targets=["broker-0"]),
        ev("heal", "invoke", 40, 8, id="p1"),
        ev("heal", "ok", 41, 9, id="p1"),
        ev("fault", "invoke", 50, 10, kind="latency", targets=["b"]),
        ev("fault", "ok", 51, 11, kind="latency", targets=["b"]),
    ]
    windows = fault_windows(events)
    got = [(w.kind, w.targets, w.start_ns, w.effect_ns, w.end_ns, w.injected) for w in windows]
    assert got == [("partition", "a", 10, 11, 41, True), ("kill", "broker-0", 20, 21, 32, True),
                   ("pause", "broker-1", 25, None, 26, False), ("latency", "b", 50, 51, None, True)]
    assert windows[3].end_or(99) == 99
    assert windows[0].to_dict()["healed"] is True and windows[3].to_dict()["healed"] is False


def test_extra_as_json_text_and_a_heal_never_completed() -> None:
    rows = [{"f": "fault", "type": "invoke", "time_ns": 5, "process": "n", "writer": "nemesis", "index": 0,
             "extra": '{"kind": "partition", "targets": ["x"]}'},
            {"f": "heal", "type": "invoke", "time_ns": 9, "process": "n", "writer": "nemesis", "index": 1,
             "extra": '{"kind": "partition"}'}]
    windows = fault_windows(FaultEvent.from_row(r) for r in rows)
    assert [(w.kind, w.start_ns, w.end_ns) for w in windows] == [("partition", 5, 9)]


def test_faults_that_cannot_be_healed_are_instants() -> None:
    events = [
        ev("fault", "invoke", 10, 0, kind="terminate", targets=["topic://t"], fault_id="f1", healable=False),
        ev("fault", "ok", 14, 1, kind="terminate", targets=["topic://t"], fault_id="f1", healable=False),
        ev("fault", "invoke", 20, 2, kind="kill", targets=["broker-0"], fault_id="f2", healable=True),
        ev("fault", "ok", 21, 3, kind="kill", targets=["broker-0"], fault_id="f2", healable=True),
        ev("heal", "invoke", 30, 4, kind="kill", targets=["broker-0"], fault_id="f2", healable=True),
        ev("heal", "ok", 31, 5, kind="kill", targets=["broker-0"], fault_id="f2", healable=True),
    ]
    terminate, kill = fault_windows(events)
    assert (terminate.start_ns, terminate.end_ns, terminate.healable) == (10, 14, False)
    assert terminate.to_dict()["healed"] is False and terminate.to_dict()["healable"] is False
    assert (kill.fault_id, kill.end_ns, kill.to_dict()["healed"]) == ("f2", 31, True)


def test_a_heal_of_an_instant_action_closes_no_other_window() -> None:
    """Runs before 2026-12-03 recorded a no-op heal for a terminate whose injection ended `info` (3.2.0
    answered HTTP 500 after terminating one partition); its id named no open fault, and the fallbacks
    closed whatever else was open then (here the partition), drawing it shorter than it was."""
    events = [
        ev("fault", "invoke", 10, 0, kind="partition", targets=["a"], fault_id="p1"),
        ev("fault", "ok", 11, 1, kind="partition", targets=["a"], fault_id="p1"),
        ev("fault", "invoke", 20, 2, kind="terminate", targets=["topic://t"], fault_id="t1", healable=False),
        ev("fault", "info", 24, 3, kind="terminate", targets=["topic://t"], fault_id="t1", healable=False),
        ev("heal", "invoke", 25, 4, kind="terminate", targets=["topic://t"], fault_id="t1"),
        ev("heal", "ok", 26, 5, kind="terminate", targets=["topic://t"], fault_id="t1"),
        ev("heal", "invoke", 40, 6, kind="partition", targets=["a"], fault_id="p1"),
        ev("heal", "ok", 41, 7, kind="partition", targets=["a"], fault_id="p1"),
    ]
    partition, terminate = fault_windows(events)
    assert (partition.end_ns, terminate.end_ns) == (41, 24)


def test_each_window_keeps_the_scenario_target_its_fault_resolved() -> None:
    """The fidelity report's failover figure reads it: only a fault aimed at a coordinator counts."""
    events = [
        ev("fault", "invoke", 10, 0, kind="kill", targets=["broker-1"], selector="coordinator", fault_id="f1"),
        ev("fault", "ok", 11, 1, kind="kill", targets=["broker-1"], selector="coordinator", fault_id="f1"),
        ev("fault", "invoke", 20, 2, kind="pause", targets=["metadata"], fault_id="f2"),
    ]
    kill, pause = fault_windows(events)
    assert (kill.selector, kill.to_dict()["selector"]) == ("coordinator", "coordinator")
    assert (pause.selector, pause.to_dict()["selector"]) == (None, None)
