"""The page model both renderers share: sections of text, tables and charts.

A report is built once as `Section`s; `render_markdown` and the HTML template
render the same sections, so report.md and report.html never disagree on a
number. Numbers are formatted here (`fmt_*`): an absent value is shown as
"absent" or "n/a", never as 0.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from analysis.report.charts import Chart

__all__ = ["Cell", "Section", "Table", "fmt_count", "fmt_ms", "fmt_num", "fmt_ratio", "fmt_s", "render_markdown"]

NA = "n/a"
ABSENT = "absent"


def fmt_num(value: Any, *, absent: str = NA) -> str:
    """A readable number: thousands separators, about four significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return absent
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if not isinstance(value, float):
        return str(value)
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:,.1f}"
    if magnitude >= 1:
        return f"{value:,.2f}"
    if magnitude >= 0.01:
        return f"{value:.3f}"
    return f"{value:.2e}"


def fmt_ms(value: Any) -> str:
    """Milliseconds with microsecond resolution where it matters."""
    if value is None:
        return NA
    value = float(value)
    if value >= 100:
        return f"{value:,.1f}"
    if value >= 10:
        return f"{value:.2f}"
    return f"{value:.3f}"


def fmt_s(value: Any) -> str:
    """Seconds to the millisecond."""
    return NA if value is None else f"{float(value):,.3f}"


def fmt_count(value: Any) -> str:
    return NA if value is None else f"{int(value):,}"


def fmt_ratio(value: Any) -> str:
    return NA if value is None else f"{float(value):.2f}\u00d7"


def fmt_json(value: Any, limit: int = 400) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Cell:
    """A table cell: text plus an optional CSS class (`absent`, `bad`, `good`, `num`)."""

    text: str
    css: str = ""


def cell(value: Any, css: str = "") -> Cell:
    return value if isinstance(value, Cell) else Cell(str(value), css)


_NUMERIC = re.compile(r"^(?:[-+]?[\d,]*\.?\d+(?:e[-+]?\d+)?\s*(?:%|\u00d7|s)?|n/a|absent|—|)$")


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    caption: str = ""
    numeric: frozenset[int] = frozenset()    # right-aligned number columns

    @classmethod
    def of(cls, headers: Sequence[str], rows: Iterable[Sequence[Any]], caption: str = "") -> Table:
        """A table whose number columns (every cell a number, n/a or absent) are found by looking."""
        cells = tuple(tuple(cell(v) for v in row) for row in rows)
        numeric = frozenset(
            i for i in range(1, len(headers))
            if cells and all(i < len(row) and _NUMERIC.match(row[i].text.strip()) for row in cells)
            and any(i < len(row) and row[i].text.strip() not in ("", "n/a", "absent", "—") for row in cells))
        return cls(tuple(headers), cells, caption, numeric)


@dataclass(frozen=True)
class Section:
    title: str
    anchor: str
    paragraphs: tuple[str, ...] = ()
    tables: tuple[Table, ...] = ()
    charts: tuple[Chart, ...] = ()
    items: tuple[str, ...] = ()          # a bullet list
    css: str = ""                        # e.g. "verdict valid"
    extra: dict[str, Any] = field(default_factory=dict)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(table: Table) -> list[str]:
    lines = []
    if table.caption:
        lines += [f"*{_md_escape(table.caption)}*", ""]
    lines.append("| " + " | ".join(_md_escape(h) for h in table.headers) + " |")
    aligns = ["---:" if i in table.numeric else "---" for i in range(len(table.headers))]
    lines.append("| " + " | ".join(aligns) + " |")
    for row in table.rows:
        lines.append("| " + " | ".join(_md_escape(c.text) for c in row) + " |")
    lines.append("")
    return lines


def render_markdown(title: str, intro: Sequence[str], sections: Sequence[Section], image_prefix: str) -> str:
    """A Markdown page; charts link to `image_prefix + <name>.png`."""
    lines = [f"# {title}", ""]
    for paragraph in intro:
        lines += [paragraph, ""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for paragraph in section.paragraphs:
            lines += [paragraph, ""]
        for item in section.items:
            lines.append(f"- {item}")
        if section.items:
            lines.append("")
        for table in section.tables:
            lines += _md_table(table)
        for chart in section.charts:
            lines += [f"![{chart.alt}]({image_prefix}{chart.path.name})", ""]
    return "\n".join(lines).rstrip() + "\n"
