"""Reports: one run's report.html / report.md / plots, the comparison of several runs, the sweep.

Modules: `cli` (`txnbench report`), `run_report`, `compare_report` and
`sweep_report` (each builds its kind's page), `writer` (the one writer of every
report: `write_report(kind, model, out_dir)`), `run_plots` and `compare_plots`
(matplotlib, Agg), `charts` (shared drawing), `model` (the section/table model
both Markdown and HTML render), `html` (self-contained HTML via Jinja2),
`cost` (the cost ledger and critical-path sections). Importing this package is
cheap: the command's work is imported when it runs, so a broken optional
dependency shows up as its own error, not as "report not available".
"""

from __future__ import annotations

import argparse

__all__ = ["main_report"]


def main_report(args: argparse.Namespace) -> int:
    """`txnbench report RUN_DIR... [--out DIR]` (see analysis.report.cli)."""
    from analysis.report.cli import main_report as run

    return run(args)
