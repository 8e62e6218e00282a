"""One writer for every report: a run's, a comparison's and a sweep's.

Each kind of report builds its page from its own document (analysis.report.run_report,
compare_report, sweep_report): title, intro, sections, and the charts it draws under
`plots/` while doing so. Writing is the same for all of them and lives here: the
document itself first where the kind keeps one beside its page (compare.json,
sweep.json), then the page, rendered twice from the same sections so the two never
disagree: `<stem>.html` (self-contained, analysis.report.html) and `<stem>.md`
(analysis.report.model.render_markdown, charts linked from `plots/`). Every file is
written atomically (harness.results), so a reader sees the old report or the new one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from analysis.report.charts import Chart
from analysis.report.html import render_html
from analysis.report.model import Section, render_markdown
from harness.results import write_json_atomic, write_text_atomic

__all__ = ["PLOTS", "Page", "ReportKind", "WrittenReport", "write_report"]

PLOTS = "plots"
"""The charts' folder inside a report's folder; report.md links its images there."""

M = TypeVar("M")


@dataclass(frozen=True)
class Page:
    """What a report shows, built once; both renderers read it."""

    title: str
    intro: Sequence[str]
    sections: Sequence[Section]
    footer: str
    charts: tuple[Chart, ...]


@dataclass(frozen=True)
class ReportKind(Generic[M]):
    """A kind of report: its files' names, whether it keeps its document, how its page is built.

    `page(model, out_dir)` draws the charts into `out_dir / PLOTS` and returns the page.
    With `keeps_json`, the model (a JSON-able document) is written first as `<stem>.json`.
    """

    stem: str
    page: Callable[[M, Path], Page]
    keeps_json: bool = False


@dataclass(frozen=True)
class WrittenReport:
    html: Path
    markdown: Path
    charts: tuple[Chart, ...]
    json: Path | None = None


def write_report(kind: ReportKind[M], model: M, out_dir: Path) -> WrittenReport:
    """Write the report of `kind` for `model` into `out_dir` (created when missing)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path: Path | None = None
    if kind.keeps_json:
        json_path = out_dir / f"{kind.stem}.json"
        write_json_atomic(json_path, model)
    page = kind.page(model, out_dir)
    html_path = out_dir / f"{kind.stem}.html"
    md_path = out_dir / f"{kind.stem}.md"
    write_text_atomic(html_path, render_html(page.title, page.intro, page.sections, page.footer))
    write_text_atomic(md_path, render_markdown(page.title, page.intro, page.sections, f"{PLOTS}/"))
    return WrittenReport(html_path, md_path, page.charts, json_path)
