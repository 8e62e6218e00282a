"""Telling anomalies a scenario expects from anomalies nobody expected.

Theory of operation. The checker's verdict is the truth and is never changed here: a
run with any anomaly is invalid. A scenario may declare anomalies it provokes on purpose
on some paths (`checks.expected`, each with its reason and scope). This module sorts a
run's anomaly classes into expected and unexpected, so a matrix fails only on the
unexpected ones and the report can say "invalid, as expected: <reason>" instead of
hiding the finding or crying wolf.

An expectation scoped to `terminated-topics` covers a class only when every instance of
it has its cause in a terminate, instance by instance (`_Attributor`). Attribution is by
cause, never by resemblance: a terminate *touched* a transaction when the transaction sent
to the terminated topic (a partition of it, or the sealed segment; any completion of the
send, since a send registers its partition with the coordinator) and was open at some time
in the fault's window: its first operation before the window ends, its last one (or an
invocation never completed: its client died) at or after the terminate's injection. The
terminate stays, so its window lasts to the run's end: a transaction opened after it that
sends there (the load stops choosing a topic once it refused a send) cannot end either. An instance is
expected when its own transaction was touched, at most as many instances per transaction
and class as one transaction can produce (a transaction is one partial-txn and one
unresolved-txn, one stalled-commit per end it invoked, one lost-write per acknowledged send,
one ctp-loss per ack), or when every acknowledged send it names lies, in a terminated
partition, after the first entry there of a touched transaction (PIP-31's read horizon never
passes an undecided transaction's entry, and the terminate keeps it undecided: a transaction
held open across the terminate hides what others committed after it in that partition, even
before the terminate). Everything else is a finding: an instance naming no transaction, one
of a transaction that sent only to other topics (acks do not count: a terminated topic still
takes acknowledgements, and the pending-ack log is not its data stream), or one whose client
was done with it before the terminate (a commit that had already timed out was stalled before
the terminate existed). So the expected instances are bounded by the transactions each
terminate touched (`Judgement.attribution` counts them per fault). Why: the terminate leaves
transactions COMMITTING, stalled, unresolved; an expectation that absorbed every instance of
those classes once a transaction had *some* link to the terminated topic at *some* time let a
bug that leaves other transactions in the same state pass as "all expected". Each example
names its transaction (its `txn`) and its operations; a transaction's sends and span come
from the load's history, never from the example; the fault's targets and window from the
nemesis's `fault` and `heal` ops. Every instance is judged: beyond results.json's examples
the checker keeps a class's instances in a file of their own (`instances`,
analysis/checks/base.py MAX_INSTANCES). A class with more instances than were kept stays
unexpected: an expectation may explain a finding, never swallow an unrelated one.

Faults are told apart by their recorded effects (`extra.effects`, harness.history.schema
FaultEffect), never by kind: a server's own exit, which the supervisor records (faults/supervisor.py),
stops it as a kill does; no expectation scope explains anything by a stopped service, and the checker
leaves a broker's or the commit store's exit out of stalled-commit's time as it does its kill
(analysis/check.py, `commit_blocked_windows`).

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

from analysis.held_account import account, held_partitions
from analysis.holder_logs import broker_lines_naming
from harness.anomalies import AnomalyClass
from harness.config import ChecksConfig, ExpectationScope, ExpectedAnomalies
from harness.history.events import Event, read_events
from harness.history.schema import NEMESIS_WRITER, NOT_THE_LOAD, FaultEffect, OpF, OpType
from harness.txn_paths import TxnPath


@dataclass(frozen=True)
class Judgement:
    valid: Any                                     # the checker's: True, False or "unknown"
    expected: dict[str, str] = field(default_factory=dict)    # class -> reason, that occurred
    unexpected: tuple[str, ...] = ()
    not_seen: tuple[str, ...] = ()                 # expected on this path but absent this time
    notes: dict[str, str] = field(default_factory=dict)       # class -> why it stayed unexpected
    attribution: dict[str, dict[str, Any]] = field(default_factory=dict)   # scoped class -> its instances' causes
    held: dict[str, dict[str, Any]] = field(default_factory=dict)   # class -> its instances behind held horizons

    @property
    def only_expected(self) -> bool:
        """Invalid, but every anomaly was one the scenario provokes on purpose."""
        return self.valid is False and bool(self.expected) and not self.unexpected

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "expected": self.expected, "unexpected": list(self.unexpected),
                "expected_not_seen": list(self.not_seen), "notes": self.notes,
                "only_expected": self.only_expected, "attribution": self.attribution, "held": self.held}


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
            notes[name] = (f"{attributed} of {total} instance(s) caused by a terminate (a transaction that sent "
                           "to the terminated topic and was open when it was terminated, or a value behind one)"
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
    judged = judge(results.get("valid"), anomalies, expectations,
                   attributor.attribute if attributor is not None else None)
    judged = _with_held_horizons(judged, run_dir, anomalies)
    if attributor is None or not attributor.attributions:
        return judged
    notes = dict(judged.notes)
    for name, result in attributor.attributions.items():
        if name in notes and result.reasons:
            notes[name] += "; not caused by one: " + ", ".join(
                f"{n} ({why})" for why, n in sorted(result.reasons.items(), key=lambda kv: -kv[1]))
    return dataclasses.replace(judged, notes=notes,
                               attribution={name: r.to_json() for name, r in attributor.attributions.items()})


def _with_held_horizons(judged: Judgement, run_dir: Path, anomalies: Mapping[str, Any]) -> Judgement:
    """`judged` with, per unexpected class, its instances behind the read horizons the drain found
    held (analysis/held_account.py); unchanged when the drain found none."""
    if not judged.unexpected:
        return judged
    held = held_partitions(run_dir / "history")
    if not held:
        return judged
    found = {}
    for name in judged.unexpected:
        entry = anomalies.get(name) or {}
        behind = account(instances_of(run_dir, entry), int(entry.get("count") or 0), held, sends_named)
        if behind.behind:
            found[name] = behind
    if not found:
        return judged
    # the logs are read once, and only when some instance lies behind a holder
    said = broker_lines_naming(run_dir / "logs", sorted({h.holder for h in held.values() if h.holder}))
    accounts = {}
    for name, behind in found.items():
        named = {h: lines for h, lines in said.items() if any(f"transaction {h} " in label for label in behind.by_holder)}
        logs = "".join(f"; the brokers' log lines naming {h}: " + " | ".join(lines)
                       for h, lines in named.items())
        accounts[name] = behind.to_json() | {"describe": behind.describe() + logs, "holder_logs": named}
    return dataclasses.replace(judged, held=accounts)


@dataclass(frozen=True)
class FaultWindow:
    """When and where a fault could affect transactions: from its injection (the `fault` invoke)
    to its heal (`heal` ok), or to the end of the run for a kind that stays (terminate) or a
    fault never healed; on its targets (topics, segments, partitions, services)."""

    fault_id: str
    kind: str
    targets: frozenset[str]
    start_ns: int
    end_ns: int | None

    def meets(self, first_ns: int, last_ns: int | None) -> bool:
        """[first_ns, last_ns] (None: not ended) meets the window."""
        return (self.end_ns is None or first_ns <= self.end_ns) and (last_ns is None or last_ns >= self.start_ns)

    def covers(self, names: Iterable[str], first_ns: int, last_ns: int | None) -> bool:
        """Some of `names` is a target, and [first_ns, last_ns] (None: still open) meets the window."""
        return any(_is_terminated(name, self.targets) for name in names) and self.meets(first_ns, last_ns)


@dataclass
class TxnSpan:
    """What a transaction did and when, from the load's history (never from an anomaly's example).

    `written`: the topics and partitions or segments of its sends (any completion: a send that
    failed or whose outcome is unknown was still registered with the coordinator as a participant,
    and its end must write a marker there). `first_ns` and `last_ns`: its first and last operation
    (an invocation or a completion of any kind), the time its client had it open; an invocation
    never completed (its client died) leaves it open to the end. `ended_ok`: a commit or abort of
    it completed `ok` (its markers were written)."""

    written: set[str] = field(default_factory=set)
    first_ns: int | None = None
    last_ns: int | None = None
    ended_ok: bool = False
    open_invokes: int = 0     # invocations without completion: its client died or gave up waiting
    sends: list[tuple[str, tuple[int, int]]] = field(default_factory=list)   # (partition, entry) written
    ok_sends: int = 0
    end_invokes: int = 0      # txn-commit and txn-abort invocations
    acks: int = 0             # ok acks

    def note(self, op: Event) -> None:
        t = op.time_ns
        self.first_ns = t if self.first_ns is None else min(self.first_ns, t)
        self.last_ns = t if self.last_ns is None else max(self.last_ns, t)
        if op.f is OpF.SEND:
            self.written.update(where for where in (op.topic, op.segment) if where)
            if op.type is OpType.OK:
                self.ok_sends += 1
                self.sends.extend(_sent_at(op.segment or op.topic, op.msg_id))
        elif op.f is OpF.ACK and op.type is OpType.OK:
            self.acks += 1
        elif op.f in (OpF.TXN_COMMIT, OpF.TXN_ABORT):
            if op.type is OpType.INVOKE:
                self.end_invokes += 1
            elif op.type is OpType.OK:
                self.ended_ok = True

    @property
    def until_ns(self) -> int | None:
        """Until when its client had it open: its last operation, or None (to the end of the run)
        when an invocation of it never completed."""
        return None if self.open_invokes else self.last_ns

    def capacity(self, anomaly: str) -> int:
        """How many instances of `anomaly` this one transaction can account for: one per
        transaction, per end operation (stalled-commit), per acknowledged send (lost-write) or
        per ok ack (ctp-loss: its inputs)."""
        if anomaly == AnomalyClass.STALLED_COMMIT.value:
            return max(1, self.end_invokes)
        if anomaly == AnomalyClass.LOST_WRITE.value:
            return max(1, self.ok_sends)
        if anomaly == AnomalyClass.CTP_LOSS.value:
            return max(1, self.acks)
        return 1


def fault_windows(history_dir: Path, effect: FaultEffect = FaultEffect.STAYS) -> list[FaultWindow]:
    """The windows of the nemesis's faults with `effect` (default: those that stay, terminated topics)
    that took effect (or may have: `info`), including the supervisor's (a server's own exit stops it).
    A heal ends the window of a fault that can be undone; a fault that stays (a terminate) outlasts any
    heal recorded for it: one whose injection ended `info` (Pulsar answered HTTP 500 after terminating
    one partition of two, 3.2.0, 2026-12-03) was "healed" by a no-op, and the window that heal closed
    made the transactions it left ABORTING look like nobody's cause."""
    starts: dict[str, tuple[int, Mapping[str, Any]]] = {}
    effective: dict[str, FaultWindow] = {}
    for op in read_events(history_dir, writers=(NEMESIS_WRITER,), fs=(OpF.FAULT, OpF.HEAL)):
        if effect not in op.effects:
            continue
        key, t = op.fault_key, op.time_ns
        if op.f is OpF.FAULT and op.type is OpType.INVOKE:
            starts[key] = (t, op.extra)
        elif op.f is OpF.FAULT and op.type in (OpType.OK, OpType.INFO):
            start, _ = starts.get(key, (t, op.extra))
            effective[key] = FaultWindow(key, str(op.extra.get("kind")), frozenset(str(x) for x in op.extra.get("targets") or []), start, None)
        elif op.f is OpF.HEAL and op.type is OpType.OK and key in effective and effect is not FaultEffect.STAYS:
            effective[key] = dataclasses.replace(effective[key], end_ns=t)
    return list(effective.values())


@dataclass(frozen=True)
class Cause:
    """Why one instance is expected: the fault, and the transaction it touched that explains it
    (the instance's own, or the one whose stuck entry hides the instance's values)."""

    fault_id: str
    txn: str
    behind: bool = False     # the instance's values lie behind `txn`'s entry, not in `txn` itself


@dataclass
class Attribution:
    """One class's instances sorted by cause (results in `Judgement.attribution`)."""

    total: int
    expected: int = 0
    by_fault: dict[str, dict[str, int]] = field(default_factory=dict)   # fault -> instances, transactions
    reasons: dict[str, int] = field(default_factory=dict)               # why instances stayed unexpected

    def to_json(self) -> dict[str, Any]:
        return {"instances": self.total, "expected": self.expected, "by_fault": self.by_fault,
                "unexpected": dict(self.reasons)}


class _Attributor:
    """Which anomaly instances a terminate caused, instance by instance (module docstring).

    A terminate *touched* a transaction when the transaction sent to the terminated topic (a
    partition of it, or the sealed segment; any completion of the send) and was open at some time
    in the fault's window: its first operation before the window ends, its last operation (or an
    invocation never completed) at or after the terminate's injection. The terminate stays, so its
    window lasts to the run's end: a transaction opened after it that sends there registers the
    terminated partition, and its end cannot write the marker either. Acks never count: a
    terminated topic still takes acknowledgements and the pending-ack log is not its data stream.

    An instance is expected when (1) its own transaction (the example's `txn`) was touched, at
    most as many instances per transaction and class as one transaction can produce
    (`TxnSpan.capacity`); or (2) every acknowledged send it names lies, in a terminated partition,
    after the first entry there of a touched transaction (PIP-31's read horizon never passes an
    undecided transaction's entry, and the terminated partition cannot take its marker). Nothing
    else is expected: an instance naming no transaction, one of a transaction that wrote only to
    other topics, or one its client was done with before the terminate, is a finding.
    """

    def __init__(self, history_dir: Path, run_dir: Path | None = None) -> None:
        self.history_dir = history_dir
        self.run_dir = run_dir if run_dir is not None else history_dir.parent
        self.windows = fault_windows(history_dir)
        self._spans: dict[str, TxnSpan] | None = None
        self._touched: dict[str, str] | None = None           # txn -> the first fault that touched it
        self._floors: dict[str, tuple[tuple[int, int], str, str]] | None = None
        self.attributions: dict[str, Attribution] = {}

    def attribute(self, name: str, entry: Mapping[str, Any]) -> tuple[int, int]:
        total = int(entry.get("count") or 0)
        result = Attribution(total)
        self.attributions[name] = result
        instances = self.instances(entry)
        if not self.windows or len(instances) < total:
            # instances the checker did not keep cannot be attributed
            result.reasons["not kept by the checker" if self.windows else "no terminate in the history"] = total
            return 0, total
        used: dict[str, int] = {}
        spans = self._txn_spans()
        for instance in instances:
            cause, why = self.cause(instance)
            if cause is not None and not cause.behind:
                used[cause.txn] = used.get(cause.txn, 0) + 1
                if used[cause.txn] > spans[cause.txn].capacity(name):
                    cause, why = None, "more instances than its transaction can account for"
            if cause is None:
                result.reasons[why] = result.reasons.get(why, 0) + 1
                continue
            result.expected += 1
            counts = result.by_fault.setdefault(cause.fault_id, {"instances": 0, "transactions": 0})
            counts["instances"] += 1
        for fault_id, counts in result.by_fault.items():
            counts["transactions"] = sum(1 for f in self._touched_txns().values() if f == fault_id)
        return result.expected, total

    def instances(self, entry: Mapping[str, Any]) -> list[Any]:
        return instances_of(self.run_dir, entry)

    def cause(self, instance: Any) -> tuple[Cause | None, str]:
        """The instance's cause, or None and why it has none."""
        own = instance.get("txn") if isinstance(instance, Mapping) else None
        touched = self._touched_txns()
        if isinstance(own, str) and own in touched:
            return Cause(touched[own], own), ""
        behind = self._behind_a_stuck_transaction(instance)
        if behind is not None:
            return behind, ""
        if not isinstance(own, str):
            return None, "names no transaction"
        span = self._txn_spans().get(own)
        if span is None:
            return None, "its transaction is not in the load's history"
        if not any(_is_terminated(n, w.targets) for w in self.windows for n in span.written):
            return None, "its transaction never sent to a terminated topic"
        return None, "its transaction was not open when the topic was terminated"

    def _touched_txns(self) -> dict[str, str]:
        """Transaction -> the first terminate (by injection) that touched it (class docstring)."""
        if self._touched is None:
            touched: dict[str, str] = {}
            windows = sorted(self.windows, key=lambda w: w.start_ns)
            for txn, span in self._txn_spans().items():
                for w in windows:
                    if any(_is_terminated(n, w.targets) for n in span.written) \
                            and w.meets(span.first_ns or 0, span.until_ns):
                        touched[txn] = w.fault_id
                        break
            self._touched = touched
        return self._touched

    def _behind_a_stuck_transaction(self, example: Any) -> Cause | None:
        """The cause of an instance all of whose acknowledged sends lie, in partitions of a
        terminated topic, after an entry of a transaction the terminate touched. PIP-31's read
        horizon (max read position) never passes an open transaction's first entry, and a
        terminated partition cannot take the marker that would end it, so everything written after
        that entry stays invisible, also values of transactions that committed before the terminate."""
        sends = sends_named(example)
        if not sends:
            return None
        floors = self._stuck_floors()
        if not all(segment in floors and position > floors[segment][0] for segment, position in sends):
            return None
        _, fault_id, txn = floors[sends[0][0]]
        return Cause(fault_id, txn, behind=True)

    def _stuck_floors(self) -> dict[str, tuple[tuple[int, int], str, str]]:
        """Terminated partition -> (the earliest entry in it of a transaction the terminate touched
        that never ended `ok`, that terminate, that transaction). One whose commit or abort completed
        `ok` after all had its marker written: its entry holds nothing back."""
        if self._floors is None:
            floors: dict[str, tuple[tuple[int, int], str, str]] = {}
            spans = self._txn_spans()
            by_id = {w.fault_id: w for w in self.windows}
            for txn, fault_id in self._touched_txns().items():
                if spans[txn].ended_ok:
                    continue
                for segment, position in spans[txn].sends:
                    if _is_terminated(segment, by_id[fault_id].targets) and \
                            (segment not in floors or position < floors[segment][0]):
                        floors[segment] = (position, fault_id, txn)
            self._floors = floors
        return self._floors

    def _txn_spans(self) -> dict[str, TxnSpan]:
        if self._spans is None:
            spans: dict[str, TxnSpan] = {}
            pending: dict[tuple[str, str], str] = {}     # (writer, process) -> txn of its open invocation
            for op in read_events(self.history_dir, exclude=NOT_THE_LOAD):
                if op.type is OpType.INVOKE:
                    if op.txn:
                        pending[op.writer, op.process] = op.txn
                else:
                    pending.pop((op.writer, op.process), None)
                if op.txn and op.f is not OpF.TXN_STATE:
                    spans.setdefault(op.txn, TxnSpan()).note(op)
            for txn in pending.values():
                spans.setdefault(txn, TxnSpan()).open_invokes += 1
            self._spans = spans
        return self._spans


def instances_of(run_dir: Path, entry: Mapping[str, Any]) -> list[Any]:
    """Every instance of a class the checker kept: its file of instances (analysis/instances/),
    else the examples. A file that is missing or torn gives the examples, which then fall short."""
    examples = list(entry.get("examples") or [])
    name = entry.get("instances")
    if not isinstance(name, str) or not name:
        return examples
    try:
        return [json.loads(line) for line in (run_dir / name).read_text(encoding="utf-8").splitlines()
                if line.strip()]
    except (OSError, ValueError):
        return examples


def sends_named(value: Any) -> list[tuple[str, tuple[int, int]]]:
    """(partition or segment, (ledger, entry)) of every acknowledged send an example names (the
    checker's examples, not history lines: those are read as events, harness.history.events)."""
    out: list[tuple[str, tuple[int, int]]] = []
    if isinstance(value, Mapping):
        if value.get("f") == OpF.SEND and value.get("msg_id"):
            return _sent_at(value.get("segment") or value.get("topic"), value["msg_id"])
        for item in value.values():
            out.extend(sends_named(item))
    elif isinstance(value, (list, tuple)):
        for item in value:
            out.extend(sends_named(item))
    return out


def _sent_at(where: Any, msg_id: Any) -> list[tuple[str, tuple[int, int]]]:
    """[(where, (ledger, entry))] of a send at `msg_id` (`"ledger:entry:batch"`); [] without both."""
    parts = str(msg_id).split(":")
    if where and msg_id and len(parts) >= 2 and all(p.lstrip("-").isdigit() for p in parts[:2]):
        return [(str(where), (int(parts[0]), int(parts[1])))]
    return []


def _is_terminated(name: str, terminated: Iterable[str]) -> bool:
    """A name is terminated when it is a terminated topic/segment or a partition of one."""
    return any(name == t or name.startswith(f"{t}-partition-") for t in terminated)
