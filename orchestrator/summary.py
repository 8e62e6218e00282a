"""The short results table a matrix prints last (`make bench`, `make chaos`, any target).

Why: a matrix's numbers were only in compare.html and compare.md; at the end of `make bench`
the terminal showed the last run's outcome line and a folder. This prints, under the runs'
lines and above the folder, one row per run: path, release, verdict, committed txn/s, commit
p50 / p99, and the load's errors beside its expected ack conflicts. Every number is copied
from the run's files (`analysis/perf.json`, `locust/status.json`, `manifest.json`); a run that
failed before it was measured shows its status and dashes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.results import RunStatus, config_of
from orchestrator.outcome import RunOutcome

HEADERS = ("path", "release", "verdict", "committed txn/s", "commit p50 / p99 (ms)", "errors", "ack conflicts")
DASH = "-"


@dataclass(frozen=True)
class SummaryRow:
    path: str
    release: str
    verdict: str
    committed_txn_per_s: float | None
    commit_p50_ms: float | None
    commit_p99_ms: float | None
    errors: int | None
    ack_conflicts: int | None

    def cells(self) -> tuple[str, ...]:
        latency = DASH if self.commit_p50_ms is None and self.commit_p99_ms is None else \
            f"{_ms(self.commit_p50_ms)} / {_ms(self.commit_p99_ms)}"
        return (self.path, self.release, self.verdict,
                DASH if self.committed_txn_per_s is None else f"{self.committed_txn_per_s:,.1f}", latency,
                DASH if self.errors is None else f"{self.errors:,}",
                DASH if self.ack_conflicts is None else f"{self.ack_conflicts:,}")


def _ms(value: float | None) -> str:
    if value is None:
        return DASH
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def release_of(manifest: Mapping[str, Any]) -> str:
    """The Pulsar release a pulsar-target run ran on; otherwise the target (`embedded`, `compose`, ...)."""
    target = str(manifest.get("target") or "")
    if target == "pulsar":
        versions = manifest.get("versions") or {}
        config = config_of(manifest)
        return str(versions.get("pulsar_release") or (config and config.cluster.pulsar_version) or "pulsar")
    return target or "?"


def verdict_of(outcome: RunOutcome) -> str:
    if outcome.status is not RunStatus.COMPLETE:
        return outcome.status.value            # failed, interrupted: no verdict
    verdict = outcome.verdict.value
    judgement = outcome.judgement
    if outcome.verdict.value == "invalid" and judgement is not None and judgement.only_expected:
        verdict += " (expected)"
    return verdict


def row_of(outcome: RunOutcome) -> SummaryRow:
    folder = outcome.run_dir.path
    manifest = _read(folder / "manifest.json")
    perf = _read(folder / "analysis" / "perf.json")
    status = _read(outcome.run_dir.locust_dir / "status.json")
    release = release_of(manifest)
    label = folder.name.removesuffix(f"-pulsar-{release}")
    commit = ((perf.get("latency_ms") or {}).get("txn-commit") or {})
    return SummaryRow(path=label, release=release, verdict=verdict_of(outcome),
                      committed_txn_per_s=_number(perf.get("committed_txn_per_s")),
                      commit_p50_ms=_number(commit.get("p50")), commit_p99_ms=_number(commit.get("p99")),
                      errors=_count(status.get("errors")), ack_conflicts=_count(status.get("ack_conflicts")))


def render(rows: Sequence[SummaryRow]) -> list[str]:
    """The table as aligned text lines (numbers right-aligned)."""
    table = [HEADERS, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADERS))]
    numeric = {3, 4, 5, 6}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    return [line(HEADERS), "  ".join("-" * w for w in widths), *(line(r.cells()) for r in rows)]


def summary_lines(outcomes: Sequence[RunOutcome], kind: str) -> list[str]:
    """The heading and the table of a matrix's runs (empty without runs)."""
    if not outcomes:
        return []
    return [f"== {kind} results (ack conflicts: acks refused because another transaction had acked the "
            f"message; expected, not errors) ==", *render([row_of(o) for o in outcomes])]
