"""`txnbench finding`: one name space and one exit code over both kinds of finding.

Why apart from both kinds: a finding about the broker is a Java program on Pulsar's client
(`finding.py`, `FINDINGS`), a finding about a tool beside it (pulsar-perf, Oxia) is the tool
driven from Python (`tool_finding.py`, `TOOL_FINDINGS`); the command lists, names and runs
them alike, and each run's verdict is the same contract (`finding.judge`): 1 the bug shows, 0
it does not, 2 it could not run. `--all` runs every one and exits by the worst: 2 if any could
not run, else 1 if any showed.
"""

from __future__ import annotations

import shlex
from typing import Any

from harness.errors import ConfigError
from targets.pulsar import finding, tool_finding
from targets.pulsar.finding import COULD_NOT_RUN, NOT_SHOWN, SHOWS, Finding, Outcome, summary
from targets.pulsar.tool_finding import ToolFinding

AnyFinding = Finding | ToolFinding


def registry() -> dict[str, AnyFinding]:
    """Every finding with a reproduction, the Java ones first (read at call time: tests replace them)."""
    return {**finding.FINDINGS, **tool_finding.TOOL_FINDINGS}


def get(name: str) -> AnyFinding:
    known = registry()
    if name not in known:
        raise ConfigError("txnbench finding", name, "no such finding with a reproduction",
                          f"choose one of {', '.join(sorted(known))} (docs/findings/<name>.md)")
    return known[name]


def list_line(f: AnyFinding) -> str:
    """One line of `--list`: name, what it runs on, race or not, tries, the bug."""
    if isinstance(f, Finding):
        where = f"Pulsar {f.release:<7} {f.txn_path.value:<4}"
    else:
        where = f"{f.tool} {f.release}".strip()
    return (f"{f.name:<48} {where:<17} {'race' if f.race else 'deterministic'}"
            f", {f.tries} tr{'ies' if f.tries > 1 else 'y'}: {f.what}")


def run_one(f: AnyFinding, args: Any, extra: tuple[str, ...]) -> Outcome:
    if isinstance(f, ToolFinding):
        if extra:
            print(f"{f.name}: --program-args ignored: its reproduction is {f.tool} itself, not a Java program")
        return tool_finding.run_tool_finding(f, tries=args.tries, version=args.pulsar_version, results=args.results,
                                             brokers=args.brokers)
    return finding.run_finding(f, tries=args.tries, version=args.pulsar_version, results=args.results, args=extra,
                               brokers=args.brokers)


def main_finding(args: Any) -> int:
    """The command: one finding, or every one (`--all`: 2 if any could not run, else 1 if any showed)."""
    if args.list:
        for f in registry().values():
            print(list_line(f))
        return 0
    if args.all == bool(args.name):
        raise ConfigError("txnbench finding", "NAME", "name one finding or pass --all", "`--list` lists them")
    chosen = list(registry().values()) if args.all else [get(args.name)]
    extra = tuple(shlex.split(args.program_args or ""))
    outcomes = [run_one(f, args, extra) for f in chosen]
    if len(outcomes) > 1:
        print("\n".join(summary(o) for o in outcomes))
    codes = {o.exit_code for o in outcomes}
    return COULD_NOT_RUN if COULD_NOT_RUN in codes else SHOWS if SHOWS in codes else NOT_SHOWN
