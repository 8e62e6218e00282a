"""Fault windows from the nemesis's `fault` and `heal` operations.

Theory of operation. The nemesis writes a `fault` invoke when injection starts,
an `ok` when the fault is in effect (`fail` when it could not be injected), and
later a `heal` invoke/ok (docs/history.md). A fault window runs from the
injection's invoke to the completion of the heal that removes it (the heal's
invoke when it never completed); a fault never healed runs to the end of the
history. A heal is matched to its fault by `extra.id` when both carry one
(and to nothing else: the no-op heal an instant action once got closes no
other window), else by equal (`extra.kind`, `extra.targets`), else to the oldest fault still
open: the nemesis heals what it injected, so every rule agrees with it when
it records ids, and the fallbacks keep older histories drawable. A fault the
nemesis marks `extra.healable: false` (split, merge, terminate: nothing to
undo, no heal follows) is an instant: its window ends when the injection
completes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.history.schema import OpF, OpType, recorded_effects

__all__ = ["FaultEvent", "FaultWindow", "fault_windows"]


@dataclass(frozen=True)
class FaultEvent:
    """One `fault` or `heal` line, as collected from the history."""

    f: str
    type: str
    time_ns: int
    process: str
    writer: str
    index: int
    extra: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> FaultEvent:
        raw = row.get("extra")
        extra: Mapping[str, Any]
        if isinstance(raw, str):
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = {}
            extra = parsed if isinstance(parsed, dict) else {}
        elif isinstance(raw, Mapping):
            extra = raw
        else:
            extra = {}
        return cls(str(row["f"]), str(row["type"]), int(row["time_ns"]), str(row.get("process") or ""),
                   str(row.get("writer") or ""), int(row.get("index") or 0), extra, row.get("error"))


@dataclass(frozen=True)
class FaultWindow:
    kind: str
    targets: str
    start_ns: int
    effect_ns: int | None
    end_ns: int | None          # None: never healed in the history
    injected: bool              # False when the injection failed
    fault_id: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    healable: bool = True       # False: an instant action (split, merge, terminate), never healed
    effects: tuple[str, ...] = ()   # what it did while it held (harness.history.schema FaultEffect)
    selector: str | None = None     # the scenario's `target` it resolved (`extra.selector`), e.g. `coordinator`

    def end_or(self, history_end_ns: int) -> int:
        return self.end_ns if self.end_ns is not None else history_end_ns

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "targets": self.targets, "id": self.fault_id,
            "start_s": round(self.start_ns / 1e9, 6),
            "effect_s": round(self.effect_ns / 1e9, 6) if self.effect_ns is not None else None,
            "end_s": round(self.end_ns / 1e9, 6) if self.end_ns is not None else None,
            "healed": self.healable and self.injected and self.end_ns is not None, "injected": self.injected,
            "healable": self.healable, "params": dict(self.params), "effects": list(self.effects),
            "selector": self.selector,
        }


def _targets(extra: Mapping[str, Any]) -> str:
    targets = extra.get("targets", extra.get("target"))
    if isinstance(targets, list | tuple):
        return ",".join(str(t) for t in targets)
    return "" if targets is None else str(targets)


def _selector(extra: Mapping[str, Any]) -> str | None:
    value = extra.get("selector")
    return None if value is None else str(value)


def _id(extra: Mapping[str, Any]) -> str | None:
    value = extra.get("id", extra.get("fault_id"))
    return None if value is None else str(value)


@dataclass
class _Open:
    kind: str
    targets: str
    fault_id: str | None
    start_ns: int
    params: Mapping[str, Any]
    effect_ns: int | None = None
    injected: bool = True
    end_ns: int | None = None
    healable: bool = True
    effects: tuple[str, ...] = ()
    selector: str | None = None


def fault_windows(events: Iterable[FaultEvent]) -> list[FaultWindow]:
    """Pair injections with heals; one window per injection, in start order."""
    ordered = sorted(events, key=lambda e: (e.time_ns, e.writer, e.index))
    faults: list[_Open] = []
    pending: dict[tuple[str, str], _Open] = {}   # (writer, process) -> injection awaiting completion
    heal_invokes: dict[tuple[str, str], FaultEvent] = {}
    for ev in ordered:
        who = (ev.writer, ev.process)
        if ev.f == OpF.FAULT.value:
            if ev.type == OpType.INVOKE.value:
                params = ev.extra.get("params")
                opened = _Open(str(ev.extra.get("kind") or "fault"), _targets(ev.extra), _id(ev.extra),
                               ev.time_ns, params if isinstance(params, Mapping) else {},
                               healable=ev.extra.get("healable") is not False,
                               effects=tuple(sorted(recorded_effects(ev.extra))),
                               selector=_selector(ev.extra))
                faults.append(opened)
                pending[who] = opened
            elif who in pending:
                opened = pending.pop(who)
                if ev.type == OpType.OK.value:
                    opened.effect_ns = ev.time_ns
                elif ev.type == OpType.FAIL.value:
                    opened.injected = False
                    opened.end_ns = ev.time_ns
                else:  # info: may be in effect; the heal decides the end
                    opened.effect_ns = ev.time_ns
                if not opened.healable and opened.end_ns is None:
                    opened.end_ns = ev.time_ns   # an instant action: done when it completes
        elif ev.f == OpF.HEAL.value:
            if ev.type == OpType.INVOKE.value:
                heal_invokes[who] = ev
                continue
            invoke = heal_invokes.pop(who, None)
            extra = {**(invoke.extra if invoke else {}), **ev.extra}
            target = _match(faults, _id(extra), str(extra.get("kind") or ""), _targets(extra))
            if target is not None:
                target.end_ns = ev.time_ns
    # A heal invoked but never completed still ends its fault at the invoke.
    for ev in heal_invokes.values():
        target = _match(faults, _id(ev.extra), str(ev.extra.get("kind") or ""), _targets(ev.extra))
        if target is not None:
            target.end_ns = ev.time_ns
    return [FaultWindow(f.kind, f.targets, f.start_ns, f.effect_ns, f.end_ns, f.injected, f.fault_id, f.params,
                        f.healable, f.effects, f.selector) for f in faults]


def _match(faults: list[_Open], fault_id: str | None, kind: str, targets: str) -> _Open | None:
    if fault_id is not None and any(f.fault_id == fault_id for f in faults):
        # its own fault or none: a heal of an instant action (a no-op) must close no other window
        return next((f for f in faults if f.fault_id == fault_id and f.end_ns is None and f.healable), None)
    still_open = [f for f in faults if f.end_ns is None and f.healable]
    if kind:
        for f in still_open:
            if f.kind == kind and (not targets or f.targets == targets):
                return f
    return still_open[0] if still_open else None
