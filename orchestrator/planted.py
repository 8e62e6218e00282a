"""The harness's guard on planted bugs (embedded/planted_bugs.py).

Planted bugs exist to prove the checker can catch bugs (`txnbench selftest`). They must
never leak into a benchmark or a chaos run that someone reads as a verdict on Pulsar's
designs, so every entry point that starts a cluster asks `refuse_planted_bugs` first:
`bench`, `chaos` and `sweep` refuse them always; `run` and `cluster up` only with
`--allow-planted-bugs`; the self-test passes `allowed=True`. Whatever was allowed is
written to the manifest (`planted_bugs`) and named at the top of every report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from embedded import planted_bugs
from harness.errors import ConfigError


def planted_in(settings: Mapping[str, Any], source: str = "cluster.settings") -> list[str]:
    """The planted bugs `settings` switch on (catalogue order); a misspelt one is a ConfigError."""
    try:
        return planted_bugs.enabled_in(settings)
    except planted_bugs.UnknownPlantedBug as err:
        raise ConfigError(source, "", str(err), "use an id from `txnbench selftest --list`") from None


def refuse_planted_bugs(settings: Mapping[str, Any], command: str, *, allowed: bool = False) -> list[str]:
    """The planted bugs switched on, or a ConfigError when `command` may not run with them."""
    planted = planted_in(settings, f"txnbench {command}")
    if planted and not allowed:
        fix = ("planted bugs are deliberate faults for `txnbench selftest` only; remove the setting"
               if command in ("bench", "chaos", "sweep") else
               "planted bugs are deliberate faults; pass --allow-planted-bugs to run with them on purpose")
        raise ConfigError(f"txnbench {command}", planted[0],
                          f"is a planted bug (a deliberate fault) and {command} refuses it", fix)
    return planted


def banner(planted: list[str] | tuple[str, ...]) -> str:
    """One line that says plainly that a run had deliberate faults on (empty when none)."""
    if not planted:
        return ""
    return ("PLANTED BUGS ON (deliberate faults of the txnbench self-test; this run says nothing about "
            f"Pulsar): {', '.join(planted)}")
