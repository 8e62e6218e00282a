"""Telling anomalies a scenario expects from anomalies nobody expected.

Theory of operation. The checker's verdict is the truth and is never changed here: a
run with any anomaly is invalid. A scenario may declare anomalies it provokes on purpose
on some paths (`checks.expected`, each with its reason and scope). This module sorts a
run's anomaly classes into expected and unexpected, so a matrix fails only on the
unexpected ones and the report can say "invalid, as expected: <reason>" instead of
hiding the finding or crying wolf.

An expectation scoped to `terminated-topics` covers a class only when every instance of
it is attributed, instance by instance, to a transaction the terminate could have
affected: one with the terminated topic or segment as a participant whose operations
reach into the fault's window (from the terminate's injection on; it stays for the rest
of the run), or one whose missing values lie, in a terminated partition, after an entry
of such a transaction (PIP-31's read horizon never passes an undecided transaction, and
the terminate keeps it undecided: a transaction held open across the terminate hides
what others committed after it in that partition, even before the terminate). Each example names its operations (topics, segments, transactions, times);
a transaction's participants and span come from the history, the fault's targets and
window from the nemesis's `fault` and `heal` ops. Every instance is judged: beyond
results.json's examples the checker keeps a class's instances in a file of their own
(`instances`, analysis/checks/base.py MAX_INSTANCES). A class with more instances than
were kept, or with one instance outside every window or on another topic, stays
unexpected: an expectation may explain a finding, never swallow an unrelated one.

What a scenario expects has one definition, `ChecksConfig.expected_on` (harness.config):
`judge_run` rebuilds the run's `ChecksConfig` from its manifest (`config.checks`, the
plain form every manifest records) and asks it, so a run folder written by an older
txnbench is judged by the rules its scenario had. The module reads only files (no Spark),
so the orchestrator may call it right after the checker.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.anomalies import AnomalyClass
from harness.config import ChecksConfig, ExpectationScope, ExpectedAnomalies
from harness.history.reader import history_files, iter_history_file
from harness.txn_paths import TxnPath


@dataclass(frozen=True)
class Judgement:
    valid: Any                                     # the checker's: True, False or "unknown"
    expected: dict[str, str] = field(default_factory=dict)    # class -> reason, that occurred
    unexpected: tuple[str, ...] = ()
    not_seen: tuple[str, ...] = ()                 # expected on this path but absent this time
    notes: dict[str, str] = field(default_factory=dict)       # class -> why it stayed unexpected

    @property
    def only_expected(self) -> bool:
        """Invalid, but every anomaly was one the scenario provokes on purpose."""
        return self.valid is False and bool(self.expected) and not self.unexpected

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "expected": self.expected, "unexpected": list(self.unexpected),
                "expected_not_seen": list(self.not_seen), "notes": self.notes,
                "only_expected": self.only_expected}


def expectations_of(manifest: Mapping[str, Any], source: str) -> dict[AnomalyClass, ExpectedAnomalies]:
    """What the run's scenario expects on the run's path, from its manifest.

    A manifest naming no transaction path expects nothing. A `config.checks` that does not
    build (a hand-edited manifest) is a ConfigError naming `source` and the key.
    """
    name = manifest.get("path")
    if name not in {p.value for p in TxnPath}:
        return {}
    txn_path = TxnPath(name)
    checks = ChecksConfig.from_plain((manifest.get("config") or {}).get("checks"), source)
    return checks.expected_on(txn_path)


def judge(valid: Any, anomalies: Mapping[str, Any], expectations: Mapping[AnomalyClass, ExpectedAnomalies],
          attribute: Any = None) -> Judgement:
    """Sort anomaly classes. `attribute(name, entry)` -> (attributed, total) for scoped ones."""
    by_name = {cls.value: expectation for cls, expectation in expectations.items()}
    expected: dict[str, str] = {}
    unexpected: list[str] = []
    notes: dict[str, str] = {}
    for name, entry in anomalies.items():
        expectation = by_name.get(name)
        if expectation is None:
            unexpected.append(name)
            continue
        if expectation.scope is ExpectationScope.ANY:
            expected[name] = expectation.reason
            continue
        if attribute is None:
            unexpected.append(name)
            notes[name] = "its instances could not be attributed to terminated topics"
            continue
        attributed, total = attribute(name, entry)
        if total and attributed == total:
            expected[name] = expectation.reason
        else:
            unexpected.append(name)
            notes[name] = (f"{attributed} of {total} instance(s) touch a terminated topic while it was terminated"
                           if total else "no examples to attribute")
    return Judgement(valid=valid, expected=expected, unexpected=tuple(unexpected),
                     not_seen=tuple(a for a in by_name if a not in anomalies), notes=notes)


def judge_run(run_dir: Path, results: Mapping[str, Any] | None = None,
              manifest: Mapping[str, Any] | None = None) -> Judgement | None:
    """Judge a run folder's anomalies against its scenario's expectations (None without results)."""
    if results is None:
        path = run_dir / "analysis" / "results.json"
        if not path.is_file():
            return None
        results = json.loads(path.read_text())
    manifest_path = run_dir / "manifest.json"
    if manifest is None:
        manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    expectations = expectations_of(manifest, str(manifest_path))
    anomalies = results.get("anomalies") or {}
    attributor = _Attributor(run_dir / "history", run_dir) if any(
        e.scope is ExpectationScope.TERMINATED_TOPICS for a, e in expectations.items() if a in anomalies) else None
    return judge(results.get("valid"), anomalies, expectations,
                 attributor.attribute if attributor is not None else None)


@dataclass(frozen=True)
class FaultWindow:
    """When and where a fault could affect transactions: from its injection (the `fault` invoke)
    to its heal (`heal` ok), or to the end of the run for a kind that stays (terminate) or a
    fault never healed; on its targets (topics, segments, partitions)."""

    fault_id: str
    kind: str
    targets: frozenset[str]
    start_ns: int
    end_ns: int | None

    def covers(self, names: Iterable[str], first_ns: int, last_ns: int | None) -> bool:
        """Some of `names` is a target, and [first_ns, last_ns] (None: still open) meets the window."""
        if not any(_is_terminated(name, self.targets) for name in names):
            return False
        return (self.end_ns is None or first_ns <= self.end_ns) and (last_ns is None or last_ns >= self.start_ns)


@dataclass
class TxnSpan:
    """What a transaction touched and when: its participants and its first and last operation."""

    participants: set[str] = field(default_factory=set)
    first_ns: int | None = None
    last_ns: int | None = None
    open_invokes: int = 0     # invocations without completion: its client died or gave up waiting
    sends: list[tuple[str, tuple[int, int]]] = field(default_factory=list)   # (partition, entry) written

    def note(self, op: Mapping[str, Any]) -> None:
        t = int(op.get("time_ns") or 0)
        self.first_ns = t if self.first_ns is None else min(self.first_ns, t)
        self.last_ns = t if self.last_ns is None else max(self.last_ns, t)
        if op.get("f") in ("send", "ack"):
            for key in ("topic", "segment"):
                if op.get(key):
                    self.participants.add(str(op[key]))
        if op.get("f") == "send" and op.get("type") == "ok":
            self.sends.extend(_sends(op))


def fault_windows(history_dir: Path, kinds: Iterable[str] = ("terminate",)) -> list[FaultWindow]:
    """The windows of the nemesis's faults of `kinds` that took effect (or may have: `info`)."""
    wanted = set(kinds)
    starts: dict[str, tuple[int, Mapping[str, Any]]] = {}
    effective: dict[str, FaultWindow] = {}
    for path in history_files(history_dir):
        if path.stem != "nemesis":
            continue
        for op in iter_history_file(path):
            extra = op.get("extra") or {}
            if not isinstance(extra, Mapping) or extra.get("kind") not in wanted:
                continue
            key = str(extra.get("fault_id") or op.get("process") or "")
            t = int(op.get("time_ns") or 0)
            if op.get("f") == "fault" and op.get("type") == "invoke":
                starts[key] = (t, extra)
            elif op.get("f") == "fault" and op.get("type") in ("ok", "info"):
                start, _ = starts.get(key, (t, extra))
                effective[key] = FaultWindow(key, str(extra.get("kind")),
                                             frozenset(str(x) for x in extra.get("targets") or []), start, None)
            elif op.get("f") == "heal" and op.get("type") == "ok" and key in effective:
                effective[key] = dataclasses.replace(effective[key], end_ns=t)
    return list(effective.values())


class _Attributor:
    """Which anomaly instances a terminate could have caused, instance by instance.

    An instance is attributed to a fault when one of its transactions had one of the
    fault's targets as a participant (a send or ack on the topic, a partition of it, or
    the segment) while the fault was in effect: the transaction's operations reach into
    the fault's window (from the `fault` invoke to the heal, or to the run's end for a
    terminate, which stays). An instance naming no transaction is judged by its own
    operations: one on a target, at a time inside the window. Anything else is a finding.
    """

    def __init__(self, history_dir: Path, run_dir: Path | None = None) -> None:
        self.history_dir = history_dir
        self.run_dir = run_dir if run_dir is not None else history_dir.parent
        self.windows = fault_windows(history_dir)
        self._spans: dict[str, TxnSpan] | None = None
        self._floors: dict[str, tuple[int, int]] | None = None

    def attribute(self, name: str, entry: Mapping[str, Any]) -> tuple[int, int]:
        total = int(entry.get("count") or 0)
        instances = self.instances(entry)
        if not self.windows or len(instances) < total:
            return 0, total   # instances the checker did not keep cannot be attributed
        return sum(1 for instance in instances if self.affected(instance)), total

    def instances(self, entry: Mapping[str, Any]) -> list[Any]:
        """Every instance the checker kept: its file of instances (analysis/instances/), else the
        examples. A file that is missing or torn gives the examples, which then fall short."""
        examples = list(entry.get("examples") or [])
        name = entry.get("instances")
        if not isinstance(name, str) or not name:
            return examples
        path = self.run_dir / name
        try:
            return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (OSError, ValueError):
            return examples

    def affected(self, example: Any) -> bool:
        names: set[str] = set()
        txns: set[str] = set()
        _collect(example, names, txns)
        spans = self._txn_spans()
        known = [spans[t] for t in txns if t in spans]
        if known and any(self._covers(span, names) for span in known):
            return True   # the example's own operations are its transactions' too
        if self._behind_a_stuck_transaction(example):
            return True
        if known:
            return False
        times = [int(t) for t in _times(example)]
        return any(w.covers(names, t, t) for t in times for w in self.windows)

    def _covers(self, span: TxnSpan, names: set[str]) -> bool:
        return any(w.covers(span.participants | names, span.first_ns or 0,
                            None if span.open_invokes else span.last_ns) for w in self.windows)

    def _behind_a_stuck_transaction(self, example: Any) -> bool:
        """Every send the example names lies, in a partition of a terminated topic, after an entry
        of a transaction the terminate left undecided. PIP-31's read horizon (max read position)
        never passes an open transaction's first entry, and a terminated partition cannot take the
        marker that would end it, so everything written after that entry stays invisible, also
        values of transactions that committed before the terminate."""
        sends = _sends(example)
        if not sends:
            return False
        floors = self._stuck_floors()
        return all(segment in floors and position > floors[segment] for segment, position in sends)

    def _stuck_floors(self) -> dict[str, tuple[int, int]]:
        """Partition -> the earliest entry in it of a transaction undecided when its topic was
        terminated (one whose operations reach into the terminate's window)."""
        if self._floors is None:
            floors: dict[str, tuple[int, int]] = {}
            for span in self._txn_spans().values():
                if not span.sends or not self._covers(span, set()):
                    continue
                for segment, position in span.sends:
                    if any(_is_terminated(segment, w.targets) for w in self.windows):
                        floors[segment] = min(floors.get(segment, position), position)
            self._floors = floors
        return self._floors

    def _txn_spans(self) -> dict[str, TxnSpan]:
        if self._spans is None:
            spans: dict[str, TxnSpan] = {}
            for path in history_files(self.history_dir):
                if path.stem in ("nemesis", "drain", "drain-live", "run"):
                    continue
                pending: dict[str, str] = {}     # process -> txn of its open invocation
                for op in iter_history_file(path):
                    txn = op.get("txn")
                    process = str(op.get("process"))
                    if op.get("type") == "invoke":
                        if txn:
                            pending[process] = str(txn)
                    else:
                        pending.pop(process, None)
                    if txn and op.get("f") != "txn-state":
                        spans.setdefault(str(txn), TxnSpan()).note(op)
                for txn in pending.values():
                    spans.setdefault(txn, TxnSpan()).open_invokes += 1
            self._spans = spans
        return self._spans


def _sends(value: Any) -> list[tuple[str, tuple[int, int]]]:
    """(partition or segment, (ledger, entry)) of every acknowledged send an example names."""
    out: list[tuple[str, tuple[int, int]]] = []
    if isinstance(value, Mapping):
        if value.get("f") == "send" and value.get("msg_id"):
            where = value.get("segment") or value.get("topic")
            parts = str(value["msg_id"]).split(":")
            if where and len(parts) >= 2 and all(p.lstrip("-").isdigit() for p in parts[:2]):
                out.append((str(where), (int(parts[0]), int(parts[1]))))
            return out
        for item in value.values():
            out.extend(_sends(item))
    elif isinstance(value, (list, tuple)):
        for item in value:
            out.extend(_sends(item))
    return out


def _times(value: Any) -> list[int]:
    """Every `time_ns` an example's operations name."""
    out: list[int] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key == "time_ns" and isinstance(item, int) and not isinstance(item, bool):
                out.append(item)
            else:
                out.extend(_times(item))
    elif isinstance(value, (list, tuple)):
        for item in value:
            out.extend(_times(item))
    return out


def _collect(value: Any, names: set[str], txns: set[str]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in ("topic", "segment") and isinstance(item, str):
                names.add(item)
            elif key == "txn" and isinstance(item, str):
                txns.add(item)
            else:
                _collect(item, names, txns)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, names, txns)


def _is_terminated(name: str, terminated: Iterable[str]) -> bool:
    """A name is terminated when it is a terminated topic/segment or a partition of one."""
    return any(name == t or name.startswith(f"{t}-partition-") for t in terminated)
