"""Telling anomalies a scenario expects from anomalies nobody expected.

The checker's verdict is the truth and is never changed here: a run with any
anomaly is invalid. A scenario may declare anomalies it provokes on purpose on some
paths (`checks.expected`, with the reason). This module sorts a run's anomalies into
expected and unexpected, so a matrix fails only on the unexpected ones and the report
can say "invalid, as expected: <reason>" instead of hiding the finding or crying wolf.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Judgement:
    valid: Any                                     # the checker's: True, False or "unknown"
    expected: dict[str, str] = field(default_factory=dict)    # class -> reason, that occurred
    unexpected: tuple[str, ...] = ()
    not_seen: tuple[str, ...] = ()                 # expected on this path but absent this time

    @property
    def only_expected(self) -> bool:
        """Invalid, but every anomaly was one the scenario provokes on purpose."""
        return self.valid is False and bool(self.expected) and not self.unexpected

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "expected": self.expected, "unexpected": list(self.unexpected),
                "expected_not_seen": list(self.not_seen), "only_expected": self.only_expected}


def judge(valid: Any, anomalies: Mapping[str, Any], expected_on_path: Mapping[str, str]) -> Judgement:
    found = list(anomalies)
    return Judgement(
        valid=valid,
        expected={a: expected_on_path[a] for a in found if a in expected_on_path},
        unexpected=tuple(a for a in found if a not in expected_on_path),
        not_seen=tuple(a for a in expected_on_path if a not in anomalies),
    )


def expected_from_manifest_config(config: Mapping[str, Any], path: str) -> dict[str, str]:
    """The same as `ChecksConfig.expected_on`, from a manifest's plain `config` dict."""
    out: dict[str, str] = {}
    for entry in (config.get("checks") or {}).get("expected") or []:
        if path in (entry.get("paths") or []):
            for anomaly in entry.get("anomalies") or []:
                out.setdefault(anomaly, str(entry.get("reason", "")))
    return out
