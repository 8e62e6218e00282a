"""Self-contained HTML: one file, CSS inline, charts inline as base64 PNG, no network.

A report is opened from disk, attached to a PIP thread or archived by CI, so
it must not fetch anything: no scripts, no web fonts, no external images.
Jinja2 escapes every value (anomaly examples come from the history).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

import harness
from analysis.report.model import Section

__all__ = ["render_html"]

TEMPLATES = Path(__file__).with_name("templates")


@cache
def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["html", "j2"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["b64"] = lambda data: base64.b64encode(data).decode("ascii")
    return env


def render_html(title: str, intro: Sequence[str], sections: Sequence[Section], footer: str) -> str:
    env = _environment()
    css = (TEMPLATES / "style.css").read_text(encoding="utf-8")
    return env.get_template("page.html.j2").render(title=title, intro=list(intro), sections=list(sections),
                                                   footer=footer, css=css, version=harness.__version__)
