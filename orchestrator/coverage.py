"""`txnbench chaos --coverage`: how much of the embedded cluster's failure-handling code a chaos run reached.

Theory of operation. With `--coverage` every service of ours runs under coverage.py
(`harness.covered`, started by the embedded target's launcher), writing one data file
per process into `<run>/coverage/`. After the matrix, `measure` combines the data files
of each run (and of all runs together: "across the three paths") and reports, for the
functions `embedded/recovery_code.py` names (log replay, snapshot restore, pending-ack
replay, v5 recovery, fencing and takeover, timeout sweep, garbage collection, sealed and
split segments), the lines and branches reached, per area and in all, and the lines
never reached. A line is a statement coverage.py can measure; a block guarded by a
planted bug is excluded (it cannot run without the bug). A function is its `def` line
to its last line, nested functions included.

The figure goes into the matrix folder as `coverage.json` and `coverage.md`, and its
summary into `compare.md`; `GOAL_PERCENT` is the issue's goal for `make chaos`.
"""

from __future__ import annotations

import ast
import json
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedded.recovery_code import PLANTED_BUG_BRANCH, RECOVERY_CODE
from harness.results import write_json_atomic, write_text_atomic

COVERAGE_DIR = "coverage"      # under a run folder: the services' data files
GOAL_PERCENT = 90.0
COVERAGE_SCHEMA = 1


@dataclass(frozen=True)
class Span:
    """A function's lines in its file: `def` (decorators included) to its last line."""

    file: str
    name: str
    first: int
    last: int


@dataclass
class Tally:
    """Lines and branches of some code: measurable, reached, and which lines were not."""

    lines: int = 0
    lines_hit: int = 0
    branches: int = 0
    branches_hit: int = 0
    missing: list[int] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.lines += other.lines
        self.lines_hit += other.lines_hit
        self.branches += other.branches
        self.branches_hit += other.branches_hit

    @property
    def line_percent(self) -> float:
        return 100.0 * self.lines_hit / self.lines if self.lines else 100.0

    @property
    def branch_percent(self) -> float:
        return 100.0 * self.branches_hit / self.branches if self.branches else 100.0

    def to_json(self) -> dict[str, Any]:
        return {"lines": self.lines, "lines_hit": self.lines_hit, "line_percent": round(self.line_percent, 1),
                "branches": self.branches, "branches_hit": self.branches_hit,
                "branch_percent": round(self.branch_percent, 1)}


def find_span(root: Path, file: str, qualname: str) -> Span:
    """Where `qualname` (`Class.method` or `function`) is defined in `file`; KeyError when it is not."""
    tree = ast.parse((root / file).read_text(), filename=file)
    parts = qualname.split(".")
    body: Sequence[ast.stmt] = tree.body
    node: ast.AST | None = None
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        wanted = (ast.FunctionDef, ast.AsyncFunctionDef) if last else (ast.ClassDef,)
        node = next((n for n in body if isinstance(n, wanted) and n.name == part), None)
        if node is None:
            raise KeyError(f"{file}: no {qualname}")
        body = getattr(node, "body", [])
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return Span(file, qualname, first, node.end_lineno or node.lineno)


def spans(root: Path, code: Mapping[str, Iterable[tuple[str, str]]] = RECOVERY_CODE) -> dict[str, list[Span]]:
    return {area: [find_span(root, file, name) for file, name in entries] for area, entries in code.items()}


def ranges(lines: Iterable[int]) -> str:
    """`[3, 4, 5, 9]` -> `3-5, 9`."""
    out: list[str] = []
    ordered = sorted(set(lines))
    start = prev = None
    for n in ordered:
        if start is None:
            start = prev = n
        elif prev is not None and n == prev + 1:
            prev = n
        else:
            out.append(f"{start}-{prev}" if start != prev else f"{start}")
            start = prev = n
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else f"{start}")
    return ", ".join(out)


class _Measured:
    """The combined coverage data of some data files, answering per function."""

    def __init__(self, data_files: Sequence[Path], root: Path, work: Path) -> None:
        import coverage

        self.root = root
        self.cov = coverage.Coverage(data_file=str(work / ".coverage"), branch=True)
        self.cov.exclude(PLANTED_BUG_BRANCH)
        if data_files:
            self.cov.combine([str(p) for p in data_files], keep=True)
            self.cov.save()
        self.cov.load()
        data = self.cov.get_data()
        # coverage.py lists the unimported files of a source package too, with nothing run
        self._files = {str(Path(f).resolve()) for f in data.measured_files() if data.lines(f)}
        self._cache: dict[str, Any] = {}

    def _analysis(self, file: str) -> Any:
        path = str((self.root / file).resolve())
        if path not in self._cache:
            self._cache[path] = self.cov._analyze(path) if path in self._files else None
        return self._cache[path]

    def tally(self, span: Span, *, loaded_only: bool = False) -> Tally:
        """Lines and branches of `span` reached. A file no process loaded counts as never reached,
        or, with `loaded_only` (one path's run: v4 never loads the v5 code), not at all."""
        analysis = self._analysis(span.file)
        inside = range(span.first, span.last + 1)
        if analysis is None and loaded_only:
            return Tally()
        if analysis is None:      # never imported by any process measured: nothing reached
            never = _statements(self.root / span.file, span)
            return Tally(len(never), 0, 0, 0, sorted(never))
        statements = [n for n in analysis.statements if n in inside]
        missing = sorted(n for n in analysis.missing if n in inside)
        stats = {line: counts for line, counts in analysis.branch_stats().items() if line in inside}
        branches = sum(total for total, _ in stats.values())
        taken = sum(hit for _, hit in stats.values())
        return Tally(len(statements), len(statements) - len(missing), branches, taken, missing)


def _statements(path: Path, span: Span) -> set[int]:
    """Lines of `span` that hold a statement (for a file no process loaded: none of them ran)."""
    tree = ast.parse(path.read_text())
    return {n.lineno for n in ast.walk(tree) if isinstance(n, ast.stmt) and span.first <= n.lineno <= span.last}


def data_files(folder: Path) -> list[Path]:
    """The services' data files in a run's coverage folder."""
    return sorted(p for p in folder.glob(".coverage.*") if p.is_file())


def report(measured: _Measured, areas: Mapping[str, list[Span]], *, loaded_only: bool = False) -> dict[str, Any]:
    total = Tally()
    out_areas = []
    for area, area_spans in areas.items():
        area_total = Tally()
        functions = []
        for span in area_spans:
            t = measured.tally(span, loaded_only=loaded_only)
            area_total.add(t)
            functions.append({"file": span.file, "function": span.name, **t.to_json(),
                              "missing": ranges(t.missing)})
        total.add(area_total)
        out_areas.append({"area": area, **area_total.to_json(), "functions": functions})
    return {**total.to_json(), "areas": out_areas}


def measure(runs: Mapping[str, Path], root: Path) -> dict[str, Any]:
    """coverage.json's content: all runs together, then each run (`runs`: label -> run folder)."""
    areas = spans(root)
    per_run = {label: data_files(run / COVERAGE_DIR) for label, run in runs.items()}
    with tempfile.TemporaryDirectory(prefix="txnbench-coverage-") as tmp:
        everything = report(_Measured([f for files in per_run.values() for f in files], root, Path(tmp)), areas)
    result: dict[str, Any] = {"schema": COVERAGE_SCHEMA, "goal_percent": GOAL_PERCENT,
                              "data_files": sum(len(f) for f in per_run.values()), "all": everything, "runs": {}}
    for label, files in per_run.items():
        with tempfile.TemporaryDirectory(prefix="txnbench-coverage-") as tmp:
            one = report(_Measured(files, root, Path(tmp)), areas, loaded_only=True)
        result["runs"][label] = {k: v for k, v in one.items() if k != "areas"} | {
            "areas": [{k: v for k, v in a.items() if k != "functions"} for a in one["areas"]],
            "faults_progress": _faults_progress(runs[label])}
    return result


def _faults_progress(run: Path) -> dict[str, Any] | None:
    """The run's fault timeline progress (manifest): a figure is only as good as the faults that ran."""
    try:
        manifest = json.loads((run / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    progress = manifest.get("faults_progress")
    return progress if isinstance(progress, dict) else None


def summary_lines(result: Mapping[str, Any]) -> list[str]:
    """The figure in a few lines: all runs, each run, against the goal."""
    everything = result["all"]
    verdict = "reaches" if everything["line_percent"] >= result["goal_percent"] else "is short of"
    lines = [f"Recovery code reached (embedded/recovery_code.py, {result['data_files']} data files): "
             f"**{everything['line_percent']:.1f}% of lines** ({everything['lines_hit']}/{everything['lines']}), "
             f"{everything['branch_percent']:.1f}% of branches ({everything['branches_hit']}/{everything['branches']}) "
             f"across the runs; {verdict} the goal of {result['goal_percent']:g}% of lines."]
    for label, run in result["runs"].items():
        progress = run.get("faults_progress") or {}
        ran = (f"; {progress['started']} of {progress['windows']} fault windows ran"
               + (f" (the rest never did: the timeline ran {progress['last_late_s']:g} s late)"
                  if progress.get("unreached") else "")) if progress.get("windows") else ""
        lines.append(f"- {label}: {run['line_percent']:.1f}% of lines ({run['lines_hit']}/{run['lines']}), "
                     f"{run['branch_percent']:.1f}% of branches, of the listed code its processes loaded{ran}")
    return lines


def render_markdown(result: Mapping[str, Any]) -> str:
    lines = ["# Recovery-code coverage", "", *summary_lines(result), "",
             "| area | lines | % | branches | % | " + " | ".join(f"{k} %" for k in result["runs"]) + " |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(result["runs"])]
    per_run = {label: {a["area"]: a for a in run["areas"]} for label, run in result["runs"].items()}
    for area in result["all"]["areas"]:
        cells = " | ".join(_percent(per_run[label][area["area"]]) for label in per_run)
        lines.append(f"| {area['area']} | {area['lines_hit']}/{area['lines']} | {area['line_percent']:.1f} | "
                     f"{area['branches_hit']}/{area['branches']} | {area['branch_percent']:.1f} | {cells} |")
    lines += ["", "## Lines never reached (all runs together)", "",
              "| function | lines | branches | never reached |", "|---|---:|---:|---|"]
    for area in result["all"]["areas"]:
        for fn in area["functions"]:
            if fn["missing"] or fn["branches_hit"] < fn["branches"]:
                lines.append(f"| `{fn['file']}` `{fn['function']}` | {fn['lines_hit']}/{fn['lines']} | "
                             f"{fn['branches_hit']}/{fn['branches']} | {fn['missing'] or '(partial branches)'} |")
    return "\n".join(lines) + "\n"


def _percent(tally: Mapping[str, Any]) -> str:
    return f"{tally['line_percent']:.0f}" if tally["lines"] else "-"


def write_matrix_coverage(matrix_path: Path, runs: Mapping[str, Path], root: Path) -> dict[str, Any]:
    """Measure, write coverage.json and coverage.md, and add the summary to compare.md."""
    result = measure(runs, root)
    write_json_atomic(matrix_path / "coverage.json", result)
    write_text_atomic(matrix_path / "coverage.md", render_markdown(result))
    compare = matrix_path / "compare.md"
    if compare.is_file():
        text = compare.read_text()
        section = "\n## Recovery-code coverage\n\n" + "\n".join(summary_lines(result)) + \
            "\n\nPer area and the lines never reached: coverage.md.\n"
        write_text_atomic(compare, text.rstrip("\n") + "\n" + section)
    return result


def repository_root() -> Path:
    """The checkout the embedded code runs from (what the data files' paths point into)."""
    import embedded

    return Path(embedded.__file__).resolve().parent.parent
