"""`--coverage` on the pulsar target: how much of Pulsar's transaction code a run executed.

Theory of operation. During a covered run, JaCoCo's agent counts on every broker and the
bookie, and `targets.pulsar.jacoco.CoverageCollector` dumps each JVM periodically and before
every kill, stop and pause (the nemesis acts through the cluster's process control), each
dump timestamped. After the run, `report_run` has `targets.pulsar.coverage_report.build` merge
and report the dumps (JaCoCo's XML and HTML), then reads the XML here into per-class and
per-method line and branch figures of the release's transaction code, and judges the
recovery list (`targets/pulsar/recovery_methods.py`): each method reached or not, when it
was first reached (the first dump window whose data holds it) and which faults the nemesis
had active in that window (`history/nemesis.jsonl`), and what the dumps lost. It writes
`<run>/coverage/coverage.json` and `coverage.md` beside JaCoCo's `html/index.html`.

A matrix (`make chaos TARGET=pulsar`) then puts its runs side by side (`write_matrix`):
each listed method per path, and the figure the issue asks for, the share of the release's
listed methods (those a harness can reach: `unreachable` entries are shown apart) entered
by at least one of the runs. Its `coverage.md` and `coverage.json` go into the matrix
folder and a summary into `compare.md`.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.history.events import file_events
from harness.history.schema import OpF, OpType
from harness.results import config_of, write_json_atomic, write_text_atomic

COVERAGE_DIR = "coverage"
SCHEMA = 1
#: Issue #41: at least this share of 5.0.1's listed recovery methods entered across the three paths
GOAL_PERCENT = 80.0


# ---- JaCoCo's XML -------------------------------------------------------------------------------------

@dataclass
class Counter:
    missed: int = 0
    covered: int = 0

    @property
    def total(self) -> int:
        return self.missed + self.covered

    @property
    def percent(self) -> float | None:
        return 100.0 * self.covered / self.total if self.total else None

    def add(self, other: Counter) -> None:
        self.missed += other.missed
        self.covered += other.covered

    def to_json(self) -> dict[str, Any]:
        pct = self.percent
        return {"covered": self.covered, "total": self.total, "percent": round(pct, 1) if pct is not None else None}


@dataclass
class MethodCoverage:
    name: str
    desc: str
    line: int | None
    instructions: Counter
    lines: Counter
    branches: Counter

    @property
    def entered(self) -> bool:
        return self.instructions.covered > 0


@dataclass
class ClassCoverage:
    name: str                          # internal name: org/apache/pulsar/.../X$Y
    methods: list[MethodCoverage] = field(default_factory=list)
    lines: Counter = field(default_factory=Counter)
    branches: Counter = field(default_factory=Counter)
    instructions: Counter = field(default_factory=Counter)


def _counters(element: ElementTree.Element) -> dict[str, Counter]:
    return {c.get("type", ""): Counter(int(c.get("missed", 0)), int(c.get("covered", 0)))
            for c in element.findall("counter")}


def parse_jacoco_xml(path: Path | str) -> dict[str, ClassCoverage]:
    """JaCoCo's XML report: every class with its methods' instruction, line and branch counters."""
    root = ElementTree.parse(str(path)).getroot()
    out: dict[str, ClassCoverage] = {}
    for cls in root.iter("class"):
        counters = _counters(cls)
        item = ClassCoverage(cls.get("name", ""), lines=counters.get("LINE", Counter()),
                             branches=counters.get("BRANCH", Counter()),
                             instructions=counters.get("INSTRUCTION", Counter()))
        for method in cls.findall("method"):
            mc = _counters(method)
            line = method.get("line")
            item.methods.append(MethodCoverage(method.get("name", ""), method.get("desc", ""),
                                               int(line) if line else None, mc.get("INSTRUCTION", Counter()),
                                               mc.get("LINE", Counter()), mc.get("BRANCH", Counter())))
        out[item.name] = item
    return out


def belongs(method_name: str, listed: str) -> bool:
    """A JVM method counts for a listed name when it is that method or a lambda javac made of it."""
    return method_name == listed or method_name.startswith(f"lambda${listed}$")


# ---- faults and phases in time ---------------------------------------------------------------------

@dataclass(frozen=True)
class FaultSpan:
    fault_id: str
    label: str
    start_ms: float
    end_ms: float


def fault_spans(nemesis_history: Path, end_ms: float) -> list[FaultSpan]:
    """Each fault from its injection to its heal (history/nemesis.jsonl); a fault never healed lasts
    to `end_ms`, a non-healable one (unload, split, ...) is the moment it took, and one whose
    injection failed (refused, or not possible on this target) was never active."""
    starts: dict[str, tuple[float, str]] = {}
    ends: dict[str, float] = {}
    instant: dict[str, float] = {}
    failed: set[str] = set()
    if not nemesis_history.is_file():
        return []
    for op in file_events(nemesis_history, (OpF.FAULT, OpF.HEAL), skip_damaged=True):
        fid = op.extra.get("fault_id")
        if not fid:
            continue
        if op.f is OpF.FAULT and op.type is OpType.INVOKE:
            targets = ",".join(op.extra.get("targets") or []) or op.extra.get("selector", "")
            starts[fid] = (op.wall_ms, f"{op.extra.get('kind', '?')} {targets}".strip())
        elif op.f is OpF.FAULT and op.type is OpType.FAIL:
            failed.add(fid)
        elif op.f is OpF.FAULT and op.type is OpType.OK and op.extra.get("healable") is False:
            instant[fid] = op.wall_ms
        elif op.f is OpF.HEAL and op.type in (OpType.OK, OpType.FAIL):
            ends[fid] = op.wall_ms
    return [FaultSpan(fid, label, start, ends.get(fid, instant.get(fid, end_ms)))
            for fid, (start, label) in sorted(starts.items(), key=lambda x: x[1][0]) if fid not in failed]


def fault_labels(labels: Sequence[str], most: int = 6) -> str:
    """`kill broker-0, crash ledger (x6), ...`: the faults of a window, each once, counted."""
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    shown = [f"{label} (x{n})" if n > 1 else label for label, n in counts.items()]
    more = f", and {len(shown) - most} more" if len(shown) > most else ""
    return ", ".join(shown[:most]) + more if shown else "none"


def phase_starts(run_history: Path) -> list[tuple[float, str]]:
    """(wall ms, phase) of the run's phases (history/run.jsonl)."""
    out: list[tuple[float, str]] = []
    if not run_history.is_file():
        return out
    for op in file_events(run_history, (OpF.PHASE,), skip_damaged=True):
        if op.phase and op.topic is None:
            out.append((op.wall_ms, op.phase))
    return sorted(out)


def phase_at(phases: Sequence[tuple[float, str]], ms: float) -> str:
    current = "setup"
    for start, name in phases:
        if start <= ms:
            current = name
    return current


def active(spans: Iterable[FaultSpan], start_ms: float, end_ms: float) -> list[FaultSpan]:
    return [s for s in spans if s.start_ms <= end_ms and s.end_ms >= start_ms]


# ---- what the dumps lost --------------------------------------------------------------------------

def losses(index: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Each JVM life, how it ended and how much of it no dump holds."""
    lives = [e for e in index if e.get("event") == "start"]
    ends = {(e["service"], e["life"]): e for e in index if e.get("event") == "end"}
    dumps = [e for e in index if e.get("event") == "dump"]
    failed = [e for e in dumps if not e.get("ok")]
    rows = []
    for start in lives:
        end = ends.get((start["service"], start["life"]), {})
        rows.append({"life": f"{start['service']}-{start['life']}", "ended": end.get("how", "unknown"),
                     "unrecorded_s": end.get("unrecorded_s"), "dumped": end.get("dumped")})
    exited = [r for r in rows if r["ended"] in ("exited", "unknown")]
    killed = [r for r in rows if r["ended"] == "kill"]
    return {"lives": len(rows), "dumps": len(dumps), "dumps_failed": len(failed),
            "dump_errors": sorted({str(e.get("error")) for e in failed})[:5],
            "killed": len(killed), "killed_unrecorded_s": round(sum(r["unrecorded_s"] or 0 for r in killed), 3),
            "stopped": sum(r["ended"] == "stop" for r in rows),
            "stopped_unrecorded_s": round(sum(r["unrecorded_s"] or 0 for r in rows if r["ended"] == "stop"), 3),
            "exited_on_their_own": len(exited),
            "exited_unrecorded_s": round(sum(r["unrecorded_s"] or 0 for r in exited), 3),
            "by_life": rows}


def losses_sentence(lost: Mapping[str, Any]) -> str:
    parts = [f"{lost['lives']} JVM lives, {lost['dumps']} dumps ({lost['dumps_failed']} failed)"]
    if lost["killed"]:
        parts.append(f"{lost['killed']} killed, each right after a dump: {lost['killed_unrecorded_s']:.2f} s "
                     "unrecorded in all (between the dump and the kill)")
    if lost["stopped"]:
        parts.append(f"{lost['stopped']} stopped gracefully: {lost.get('stopped_unrecorded_s', 0):.2f} s unrecorded "
                     "in all (between their last dump and their end)")
    if lost["exited_on_their_own"]:
        n = lost["exited_on_their_own"]
        parts.append(f"{n} exited on {'its' if n == 1 else 'their'} own: "
                     f"{lost['exited_unrecorded_s']:.1f} s after {'its' if n == 1 else 'their'} last dump lost")
    else:
        parts.append("none exited on its own, so nothing was lost but the moments above")
    if lost["dumps_failed"]:
        parts.append(f"failed dumps ({', '.join(lost['dump_errors'])}) lose nothing by themselves: the next "
                     "dump of that life holds what they would have")
    return "; ".join(parts) + "."


# ---- one run --------------------------------------------------------------------------------------

def evaluate(classes: Mapping[str, ClassCoverage], methods: Sequence[Any], txn_path: str,
             timeline_parts: Mapping[str, Sequence[str]], index: Sequence[Mapping[str, Any]],
             spans: Sequence[FaultSpan], phases: Sequence[tuple[float, str]], start_ms: float,
             missing: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The recovery list against one run's figures: one row per listed method of the release."""
    missing_keys = {m.split(" ", 1)[0] for m in missing}
    windows = sorted((e for e in index if e.get("event") == "dump" and e.get("ok") and e.get("file")),
                     key=lambda e: e["to_ms"])
    rows = []
    for m in methods:
        cls = classes.get(m.internal_class)
        own = [x for x in (cls.methods if cls else []) if belongs(x.name, m.method)]
        lines, branches = Counter(), Counter()
        for x in own:
            lines.add(x.lines)
            branches.add(x.branches)
        reached = any(x.entered for x in own)
        row: dict[str, Any] = {"area": m.area, "class": m.cls, "method": m.method, "name": m.simple,
                               "what": m.what, "paths": list(m.paths), "applies": txn_path in m.paths,
                               "unreachable": m.unreachable, "needs": getattr(m, "needs", ""),
                               "in_release": m.key not in missing_keys,
                               "reached": reached, "lines": lines.to_json(), "branches": branches.to_json(),
                               "first": None}
        if reached:
            row["first"] = _first_reached(m, windows, timeline_parts, spans, phases, start_ms)
        rows.append(row)
    return rows


def _first_reached(m: Any, windows: Sequence[Mapping[str, Any]], parts: Mapping[str, Sequence[str]],
                   spans: Sequence[FaultSpan], phases: Sequence[tuple[float, str]],
                   start_ms: float) -> dict[str, Any] | None:
    for window in windows:
        for key in parts.get(window["file"], ()):
            cls, name, _desc = [*key.split("#"), "", ""][:3]
            if cls == m.internal_class and belongs(name, m.method):
                during = active(spans, window["from_ms"], window["to_ms"])
                return {"service": f"{window['service']}-{window['life']}",
                        "from_s": round((window["from_ms"] - start_ms) / 1000, 1),
                        "to_s": round((window["to_ms"] - start_ms) / 1000, 1),
                        "phase": phase_at(phases, window["from_ms"]),
                        "faults": [s.label for s in during], "fault_ids": [s.fault_id for s in during]}
    return None


def class_rows(classes: Mapping[str, ClassCoverage]) -> list[dict[str, Any]]:
    from targets.pulsar.recovery_methods import component

    rows = []
    for name, cls in sorted(classes.items()):
        rows.append({"class": name.replace("/", "."), "component": component(name), "lines": cls.lines.to_json(),
                     "branches": cls.branches.to_json(),
                     "methods_entered": sum(m.entered for m in cls.methods), "methods": len(cls.methods),
                     "per_method": [{"method": m.name, "desc": m.desc, "line": m.line, "entered": m.entered,
                                     "lines": m.lines.to_json(), "branches": m.branches.to_json()}
                                    for m in cls.methods]})
    return rows


def path_code(components: Mapping[str, Mapping[str, Any]], txn_path: str) -> dict[str, Any]:
    """Lines and branches of the components a path's runs load (recovery_methods.COMPONENT_PATHS)."""
    from targets.pulsar.recovery_methods import COMPONENT_PATHS

    lines, branches = Counter(), Counter()
    for name, tally in components.items():
        if txn_path in COMPONENT_PATHS.get(name, ()):
            lines.add(Counter(tally["lines"]["total"] - tally["lines"]["covered"], tally["lines"]["covered"]))
            branches.add(Counter(tally["branches"]["total"] - tally["branches"]["covered"],
                                 tally["branches"]["covered"]))
    return {"lines": lines.to_json(), "branches": branches.to_json()}


def component_totals(classes: Mapping[str, ClassCoverage]) -> dict[str, dict[str, Any]]:
    from targets.pulsar.recovery_methods import component

    totals: dict[str, tuple[Counter, Counter]] = {}
    for name, cls in classes.items():
        lines, branches = totals.setdefault(component(name), (Counter(), Counter()))
        lines.add(cls.lines)
        branches.add(cls.branches)
    return {k: {"lines": v[0].to_json(), "branches": v[1].to_json()} for k, v in sorted(totals.items())}


def figure(rows: Sequence[Mapping[str, Any]], *, applicable_only: bool = True) -> dict[str, Any]:
    """Listed methods entered, of those the release has and a harness can reach (and this path, when
    `applicable_only`)."""
    counted = [r for r in rows if r["in_release"] and not r["unreachable"] and (r["applies"] or not applicable_only)]
    entered = [r for r in counted if r["reached"]]
    pct = 100.0 * len(entered) / len(counted) if counted else 0.0
    return {"entered": len(entered), "listed": len(counted), "percent": round(pct, 1)}


def report_run(run_dir: Path, *, say: Callable[[str], None] | None = None) -> dict[str, Any] | None:
    """The coverage of one pulsar run (its `coverage/` folder from a covered run); None without one."""
    from targets.pulsar import coverage_report
    from targets.pulsar.recovery_methods import for_release
    from targets.pulsar.versions import listed

    say = say or print
    directory = run_dir / COVERAGE_DIR
    if not (directory / "dumps.jsonl").is_file():
        return None
    manifest = json.loads((run_dir / "manifest.json").read_text())
    config = config_of(manifest)
    version = (manifest.get("versions") or {}).get("pulsar_release") or (config and config.cluster.pulsar_version)
    if not version:
        raise ValueError(f"{run_dir}: the manifest names no Pulsar release")
    txn_path = manifest.get("path", "")
    release = listed(version)
    methods = for_release(version)
    built = coverage_report.build(directory, release, methods, say=say,
                                  title=f"Apache Pulsar {version} transaction code, {txn_path} ({manifest.get('run_id')})")
    classes = parse_jacoco_xml(built.xml)
    start_ms = float(manifest.get("start_wall_ms") or 0.0)
    index = built.index
    end_ms = max([float(e.get("wall_ms", 0)) for e in index] + [start_ms])
    spans = fault_spans(run_dir / "history" / "nemesis.jsonl", end_ms)
    phases = phase_starts(run_dir / "history" / "run.jsonl")
    rows = evaluate(classes, methods, txn_path, built.timeline.parts, index, spans, phases, start_ms, built.missing)
    total_lines, total_branches = Counter(), Counter()
    for cls in classes.values():
        total_lines.add(cls.lines)
        total_branches.add(cls.branches)
    lost = losses(index)
    components = component_totals(classes)
    result = {"schema": SCHEMA, "run_id": manifest.get("run_id"), "path": txn_path, "pulsar_release": version,
              "jacoco": built.jacoco_version, "html": "coverage/html/index.html", "xml": "coverage/jacoco.xml",
              "exec": "coverage/jacoco.exec", "classes": len(classes),
              "transaction_code": {"lines": total_lines.to_json(), "branches": total_branches.to_json()},
              "path_code": path_code(components, txn_path), "components": components, "recovery": figure(rows),
              "recovery_methods": rows, "lost": lost, "faults_progress": manifest.get("faults_progress"),
              "per_class": class_rows(classes)}
    write_json_atomic(directory / "coverage.json", result)
    write_text_atomic(directory / "coverage.md", render_run(result))
    return result


def _why_not(row: Mapping[str, Any]) -> str:
    if row.get("unreachable"):
        return f": cannot be reached from outside the broker: {row['unreachable']}"
    if row.get("needs"):
        return f": what would reach it: {row['needs']}"
    return ""


def _pct(counter: Mapping[str, Any]) -> str:
    return "-" if counter["percent"] is None else f"{counter['percent']:.1f}%"


def _frac(counter: Mapping[str, Any]) -> str:
    return f"{counter['covered']}/{counter['total']}"


def _first_cell(row: Mapping[str, Any]) -> tuple[str, str]:
    first = row.get("first")
    if not row["reached"]:
        return "no", ""
    if not first:
        return "yes", "(in no timed dump)"
    faults = fault_labels(first["faults"])
    return "yes", f"{first['from_s']:g}-{first['to_s']:g} s ({first['phase']}, {first['service']}): {faults}"


def summary(result: Mapping[str, Any]) -> str:
    rec, code = result["recovery"], result.get("path_code") or result["transaction_code"]
    return (f"Apache Pulsar {result['pulsar_release']}, {result['path']}: {rec['entered']} of {rec['listed']} "
            f"listed recovery methods entered ({rec['percent']:.1f}%); the path's transaction code "
            f"{_pct(code['lines'])} of lines ({_frac(code['lines'])}), {_pct(code['branches'])} of branches "
            f"({_frac(code['branches'])})")


def render_run(result: Mapping[str, Any]) -> str:
    lines = [f"# Transaction-code coverage: Apache Pulsar {result['pulsar_release']}, {result['path']}", "",
             f"Run {result['run_id']}; JaCoCo {result['jacoco']} on every broker and the bookie. "
             f"JaCoCo's own report: [html/index.html](html/index.html) (XML: jacoco.xml, data: jacoco.exec).", "",
             summary(result) + ".", "",
             f"What the dumps lost: {losses_sentence(result['lost'])}", ""]
    progress = result.get("faults_progress") or {}
    if progress.get("windows"):
        lines += [f"Fault windows that ran: {progress.get('started')} of {progress['windows']}"
                  + (f" (the rest never did: the timeline ran {progress.get('last_late_s', 0):g} s late)"
                     if progress.get("unreached") else "") + ".", ""]
    lines += ["## Recovery methods (targets/pulsar/recovery_methods.py)", "",
              "First reached: the dump window whose data first holds the method (seconds since the run "
              "started, the phase, the JVM life) and the faults active in that window.", "",
              "| area | method | reached | first reached, faults active | lines | branches |",
              "|---|---|---|---|---:|---:|"]
    for row in result["recovery_methods"]:
        if not row["applies"] or not row["in_release"]:
            continue
        reached, first = _first_cell(row)
        mark = f"{reached} (unreachable)" if row["unreachable"] else reached
        lines.append(f"| {row['area']} | `{row['name']}` | {mark} | {first} | {_frac(row['lines'])} | "
                     f"{_frac(row['branches'])} |")
    never = [r for r in result["recovery_methods"] if r["applies"] and r["in_release"] and not r["reached"]]
    if never:
        lines += ["", "### Never reached", ""]
        lines += [f"- `{r['name']}` ({r['what']})" + _why_not(r) for r in never]
    lines += ["", "## Per component", "", "| component | lines | % | branches | % |", "|---|---:|---:|---:|---:|"]
    for name, tally in result["components"].items():
        lines.append(f"| {name} | {_frac(tally['lines'])} | {_pct(tally['lines'])} | {_frac(tally['branches'])} | "
                     f"{_pct(tally['branches'])} |")
    lines += ["", "## Per class", "", "Per method: coverage.json (`per_class[].per_method`) and the HTML report.", "",
              "| class | component | lines | % | branches | % | methods entered |", "|---|---|---:|---:|---:|---:|---:|"]
    for row in result["per_class"]:
        if not row["lines"]["total"]:
            continue
        lines.append(f"| `{row['class'].rsplit('.', 1)[-1]}` | {row['component']} | {_frac(row['lines'])} | "
                     f"{_pct(row['lines'])} | {_frac(row['branches'])} | {_pct(row['branches'])} | "
                     f"{row['methods_entered']}/{row['methods']} |")
    return "\n".join(lines) + "\n"


# ---- a matrix ------------------------------------------------------------------------------------

def measure_matrix(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The runs' figures side by side: per listed method, which paths reached it; the share entered
    by at least one run, of the listed methods of the runs' release(s) a harness can reach."""
    releases = sorted({r["pulsar_release"] for r in results.values()})
    by_key: dict[str, dict[str, Any]] = {}
    for label, result in results.items():
        for row in result["recovery_methods"]:
            key = f"{row['class']}.{row['method']}"
            entry = by_key.setdefault(key, {k: row.get(k, "") for k in ("area", "name", "what", "paths",
                                                                        "unreachable", "needs", "in_release")}
                                      | {"runs": {}})
            entry["in_release"] = entry["in_release"] and row["in_release"]
            if row["applies"]:
                entry["runs"][label] = {"reached": row["reached"], "first": row["first"],
                                        "lines": row["lines"], "branches": row["branches"]}
    counted = [e for e in by_key.values() if e["in_release"] and not e["unreachable"] and e["runs"]]
    entered = [e for e in counted if any(r["reached"] for r in e["runs"].values())]
    pct = 100.0 * len(entered) / len(counted) if counted else 0.0
    return {"schema": SCHEMA, "goal_percent": GOAL_PERCENT, "releases": releases,
            "all": {"entered": len(entered), "listed": len(counted), "percent": round(pct, 1)},
            "runs": {label: {"path": r["path"], "pulsar_release": r["pulsar_release"], "recovery": r["recovery"],
                             "transaction_code": r.get("path_code") or r["transaction_code"],
                             "components": r["components"],
                             "lost": {k: v for k, v in r["lost"].items() if k != "by_life"},
                             "html": r["html"]} for label, r in results.items()},
            "methods": by_key}


def summary_lines(result: Mapping[str, Any]) -> list[str]:
    everything = result["all"]
    verdict = "reaches" if everything["percent"] >= result["goal_percent"] else "is short of"
    lines = [f"Pulsar recovery methods entered (targets/pulsar/recovery_methods.py, {', '.join(result['releases'])}): "
             f"**{everything['entered']} of {everything['listed']} ({everything['percent']:.1f}%)** across the runs; "
             f"{verdict} the goal of {result['goal_percent']:g}%."]
    merged = result.get("merged")
    if merged:
        code = merged["transaction_code"]
        lines.append(f"The runs merged: Pulsar's transaction code {_pct(code['lines'])} of lines "
                     f"({_frac(code['lines'])}), {_pct(code['branches'])} of branches ({_frac(code['branches'])}); "
                     f"JaCoCo report: {merged['html']}.")
    for label, run in result["runs"].items():
        rec, code = run["recovery"], run["transaction_code"]
        lines.append(f"- {label} ({run['pulsar_release']}): {rec['entered']}/{rec['listed']} methods "
                     f"({rec['percent']:.1f}%); its path's transaction code {_pct(code['lines'])} of lines, "
                     f"{_pct(code['branches'])} of branches; JaCoCo report: runs/{label}/{run['html']}")
    return lines


def render_matrix(result: Mapping[str, Any]) -> str:
    labels = list(result["runs"])
    lines = ["# Transaction-code coverage (pulsar target)", "", *summary_lines(result), "",
             "## Recovery methods, per run", "",
             "A cell: reached (first in which phase, and the faults then), `no`, or `-` (the path cannot "
             "reach it).", "",
             "| area | method | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for entry in result["methods"].values():
        if not entry["in_release"]:
            continue
        cells = []
        for label in labels:
            run = entry["runs"].get(label)
            if run is None:
                cells.append("-")
            elif run["reached"]:
                first = run.get("first") or {}
                faults = fault_labels(first.get("faults") or [], most=3).replace("none", "no fault")
                cells.append(f"yes ({first.get('phase', '?')}: {faults})" if first else "yes")
            else:
                cells.append("**no**")
        name = f"`{entry['name']}`" + (" (unreachable)" if entry["unreachable"] else "")
        lines.append(f"| {entry['area']} | {name} | " + " | ".join(cells) + " |")
    components = sorted({c for run in result["runs"].values() for c in run["components"]})
    merged = (result.get("merged") or {}).get("components", {})
    lines += ["", "## Per component (lines, branches)", "",
              "| component | " + " | ".join(labels) + (" | runs merged |" if merged else " |"),
              "|---|" + "---:|" * (len(labels) + (1 if merged else 0))]
    for name in components:
        cells = []
        for label in labels:
            tally = result["runs"][label]["components"].get(name)
            cells.append(f"{_pct(tally['lines'])}, {_pct(tally['branches'])}" if tally else "-")
        if merged:
            tally = merged.get(name)
            cells.append(f"{_pct(tally['lines'])}, {_pct(tally['branches'])}" if tally else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    never = [e for e in result["methods"].values() if e["in_release"] and e["runs"]
             and not any(r["reached"] for r in e["runs"].values())]
    if never:
        lines += ["", "## Never reached in any run", ""]
        lines += [f"- `{e['name']}` ({e['what']})" + _why_not(e) for e in never]
    lines += ["", "## What the dumps lost", ""]
    for label, run in result["runs"].items():
        lines.append(f"- {label}: {losses_sentence({**run['lost'], 'by_life': []})}")
    return "\n".join(lines) + "\n"


def write_matrix(matrix_path: Path, runs: Mapping[str, Path], say: Callable[[str], None]) -> dict[str, Any] | None:
    """coverage.json and coverage.md of a pulsar matrix from its runs' own (made when each run ended)."""
    results = {}
    for label, run in runs.items():
        path = run / COVERAGE_DIR / "coverage.json"
        if path.is_file():
            results[label] = json.loads(path.read_text())
        else:
            say(f"coverage: {label} has no coverage report ({path})")
    if not results:
        return None
    result = measure_matrix(results)
    result["merged"] = _merged(matrix_path, runs, results, say)
    write_json_atomic(matrix_path / "coverage.json", result)
    write_text_atomic(matrix_path / "coverage.md", render_matrix(result))
    compare = matrix_path / "compare.md"
    if compare.is_file():
        text = compare.read_text()
        section = ("\n## Transaction-code coverage\n\n" + "\n".join(summary_lines(result))
                   + "\n\nPer method and per run: coverage.md.\n")
        write_text_atomic(compare, text.rstrip("\n") + "\n" + section)
    return result


def _merged(matrix_path: Path, runs: Mapping[str, Path], results: Mapping[str, Mapping[str, Any]],
            say: Callable[[str], None]) -> dict[str, Any] | None:
    """All runs' data merged and reported (one release only): the transaction code across the paths."""
    from targets.pulsar import coverage_report
    from targets.pulsar.versions import listed

    releases = {r["pulsar_release"] for r in results.values()}
    files = [runs[label] / COVERAGE_DIR / coverage_report.MERGED for label in results]
    if len(releases) != 1 or not all(f.is_file() for f in files):
        return None
    directory = matrix_path / COVERAGE_DIR
    try:
        xml = coverage_report.merge_and_report(files, listed(releases.pop()), directory, say=say)
    except Exception as err:   # the per-run figures stand without it
        say(f"coverage: merging the runs failed: {type(err).__name__}: {err}")
        return None
    classes = parse_jacoco_xml(xml)
    lines, branches = Counter(), Counter()
    for cls in classes.values():
        lines.add(cls.lines)
        branches.add(cls.branches)
    return {"html": f"{COVERAGE_DIR}/html/index.html", "xml": f"{COVERAGE_DIR}/jacoco.xml",
            "transaction_code": {"lines": lines.to_json(), "branches": branches.to_json()},
            "components": component_totals(classes)}
