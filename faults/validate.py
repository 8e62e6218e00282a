"""Checking a scenario's faults before anything starts.

The nemesis checks its faults again when it is built (against the running cluster:
its brokers, links, settings, and what the target can do); this early check needs
only the config, so `txnbench run/chaos` can reject a bad scenario before a cluster
comes up. It plans the timeline of every path the scenario runs. Topic numbers are
checked only when the nemesis is built: how many topics a run has depends on the
workload's topology (a mixed workload has several families of `workload.topics`).
"""

from __future__ import annotations

from faults.environment import Capability
from faults.kinds import BY_NAME, kind_of
from faults.kinds.base import Refusal
from faults.schedule import Timeline, plan_run
from faults.selectors import LinkSelector, Pick
from harness.config import FaultsConfig, RunConfig, Target
from harness.errors import ConfigError
from harness.target import LinkKind
from harness.txn_paths import TxnPath


def check_scenario(config: RunConfig, source: str | None = None) -> dict[TxnPath, Timeline]:
    """The timeline of each of the scenario's paths; ConfigError on an unknown kind (naming
    `source`, the scenario's file, when given), a bad target or parameter, or a kind the target
    cannot run. A scenario without faults gives empty timelines."""
    check_kinds(config.faults, source or f"scenario {config.name}")
    check_entries(config)
    paths = dict.fromkeys([*config.paths, config.path]) if config.paths else {config.path: None}
    timelines = {}
    for txn_path in paths:
        timeline = plan_run(config, txn_path)
        _check_target(config, timeline)
        timelines[txn_path] = timeline
    return timelines


def check_kinds(faults: FaultsConfig, source: str) -> None:
    """Every kind the scenario names exists (the config keeps them as text: faults.kinds)."""
    for i, entry in enumerate(faults.schedule):
        kind_of(entry.kind, source, f"faults.schedule[{i}].kind")
    if faults.random is not None:
        for i, text in enumerate(faults.random.kinds):
            kind_of(text, source, f"faults.random.kinds[{i}]")


def check_entries(config: RunConfig) -> None:
    """Each entry against the scenario's other settings, by its kind's `check_entry` (a client fault
    must abandon transactions: faults/kinds/client_kill.py, client_isolate.py). Checked on the
    scenario's entries, not on a timeline `--duration` may have cut short."""
    entries = [(f"faults.schedule[{i}]", e.kind, e.for_s) for i, e in enumerate(config.faults.schedule)]
    if config.faults.random is not None:
        entries += [("faults.random", k, config.faults.random.for_s) for k in config.faults.random.kinds]
    for key, text, for_s in entries:
        check = BY_NAME[text].check_entry if text in BY_NAME else None
        try:
            if check is not None:
                check(for_s, config)
        except Refusal as err:
            raise ConfigError(f"scenario {config.name}", f"{key}.{err.key}", err.problem, err.fix) from None


def _check_target(config: RunConfig, timeline: Timeline) -> None:
    if config.target is Target.PULSAR:
        _check_pulsar_links(config, timeline)
        return
    if config.target is not Target.EXTERNAL:
        return
    for planned in timeline.faults:
        if Capability.PROCESSES in planned.kind.needs:
            raise ConfigError(f"scenario {config.name}", f"{planned.source}.kind",
                              f"{planned.kind.name} cannot run on the external target: txnbench cannot "
                              "kill or pause its processes", "remove it, or use --target embedded or compose")


def _check_pulsar_links(config: RunConfig, timeline: Timeline) -> None:
    """The pulsar target's links (targets/pulsar/cluster.py): every broker reaches the one bookie through
    one shared link, so one broker's link to the bookie cannot be cut alone."""
    for planned in timeline.faults:
        selector = planned.selector
        if not isinstance(selector, LinkSelector):
            continue
        if selector.kind is LinkKind.BROKER_LEDGER and selector.first.pick is not Pick.RANDOM:
            raise ConfigError(f"scenario {config.name}", f"{planned.source}.target",
                              f"{planned.target} cannot run on the pulsar target: every broker reaches the bookie "
                              "through one shared link (a bookie registers one address)",
                              "use broker-ledger:random (cuts every broker from the bookie), or --target embedded")
