"""Telling anomalies a scenario expects from anomalies nobody expected.

Theory of operation. The checker's verdict is the truth and is never changed here: a
run with any anomaly is invalid. A scenario may declare anomalies it provokes on purpose
on some paths (`checks.expected`, each with its reason and scope). This module sorts a
run's anomaly classes into expected and unexpected, so a matrix fails only on the
unexpected ones and the report can say "invalid, as expected: <reason>" instead of
hiding the finding or crying wolf.

An expectation scoped to `terminated-topics` covers a class only when every instance of
it is attributed to a topic the nemesis terminated: each example names its operations
(topics, segments, transactions), a transaction's topics come from the history, and the
terminated topics from the nemesis's `fault` ops. A class with more instances than
examples, or with one example that touches no terminated topic, stays unexpected: an
expectation may explain a finding, never swallow an unrelated one.

What a scenario expects has one definition, `ChecksConfig.expected_on` (harness.config):
`judge_run` rebuilds the run's `ChecksConfig` from its manifest (`config.checks`, the
plain form every manifest records) and asks it, so a run folder written by an older
txnbench is judged by the rules its scenario had. The module reads only files (no Spark),
so the orchestrator may call it right after the checker.
"""

from __future__ import annotations

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
            notes[name] = (f"{attributed} of {total} instance(s) touch a terminated topic"
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
    attributor = _Attributor(run_dir / "history") if any(
        e.scope is ExpectationScope.TERMINATED_TOPICS for a, e in expectations.items() if a in anomalies) else None
    return judge(results.get("valid"), anomalies, expectations,
                 attributor.attribute if attributor is not None else None)


class _Attributor:
    """Which anomaly instances touch a topic the nemesis terminated (read from the history)."""

    def __init__(self, history_dir: Path) -> None:
        self.history_dir = history_dir
        self.terminated: set[str] = set()
        self._txn_topics: dict[str, set[str]] | None = None
        for path in history_files(history_dir):
            if path.stem != "nemesis":
                continue
            for op in iter_history_file(path):
                extra = op.get("extra") or {}
                if op.get("f") == "fault" and op.get("type") == "ok" and extra.get("kind") == "terminate":
                    self.terminated.update(str(t) for t in extra.get("targets") or [])

    def attribute(self, name: str, entry: Mapping[str, Any]) -> tuple[int, int]:
        examples = list(entry.get("examples") or [])
        total = int(entry.get("count") or 0)
        if not self.terminated or len(examples) < total:
            return 0, total   # a count beyond the examples cannot be attributed
        return sum(1 for example in examples if self._touches_terminated(example)), total

    def _touches_terminated(self, example: Any) -> bool:
        names: set[str] = set()
        txns: set[str] = set()
        _collect(example, names, txns)
        if txns:
            mapping = self._topics_of_transactions()
            for txn in txns:
                names |= mapping.get(txn, set())
        return any(_is_terminated(name, self.terminated) for name in names)

    def _topics_of_transactions(self) -> dict[str, set[str]]:
        if self._txn_topics is None:
            mapping: dict[str, set[str]] = {}
            for path in history_files(self.history_dir):
                if path.stem in ("nemesis", "drain", "run"):
                    continue
                for op in iter_history_file(path):
                    txn = op.get("txn")
                    if txn and op.get("f") in ("send", "ack"):
                        for key in ("topic", "segment"):
                            if op.get(key):
                                mapping.setdefault(txn, set()).add(str(op[key]))
            self._txn_topics = mapping
        return self._txn_topics


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
