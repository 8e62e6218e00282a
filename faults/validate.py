"""Checking a scenario's faults before anything starts.

The nemesis checks its faults again when it is built (against the running cluster:
its brokers, links, settings, and what the target can do); this early check needs
only the config, so `txnbench run/chaos` can reject a bad scenario before a cluster
comes up. It plans the timeline of every path the scenario runs. Topic numbers are
checked only when the nemesis is built: how many topics a run has depends on the
workload's topology (a mixed workload has several families of `workload.topics`).
"""

from __future__ import annotations

from faults import kinds
from faults.kinds import Capability, kind_of
from faults.schedule import Timeline, plan_timeline
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
    check_client_faults(config)
    paths = dict.fromkeys([*config.paths, config.path]) if config.paths else {config.path: None}
    timelines = {}
    for txn_path in paths:
        timeline = plan_timeline(config.faults, seed=config.seed, duration_s=config.phases.faults_s,
                                 txn_path=txn_path, source=f"scenario {config.name}",
                                 brokers=config.cluster.brokers, topics=None,
                                 load_workers=config.load.workers,
                                 txn_timeout_s=config.workload.txn_timeout_s)
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


def check_client_faults(config: RunConfig) -> None:
    """A client fault must abandon transactions: a kill needs load workers (one is killed, the
    others go on), an isolation must outlast the transaction timeout, or the clients would come
    back in time to end what they had open and the coordinator's timeout would never be tested.
    Checked on the scenario's entries, not on a timeline `--duration` may have cut short."""
    source = f"scenario {config.name}"
    entries = [(f"faults.schedule[{i}]", e.kind, e.for_s) for i, e in enumerate(config.faults.schedule)]
    if config.faults.random is not None:
        entries += [("faults.random", k, config.faults.random.for_s) for k in config.faults.random.kinds]
    timeout = config.workload.txn_timeout_s
    for key, kind, for_s in entries:
        if kind == kinds.FaultKind.CLIENT_KILL.value and config.load.workers < 1:
            raise ConfigError(source, f"{key}.kind", "client-kill kills a Locust worker, and the load runs in "
                              "one process (load.workers 0)", "set load.workers to 2 or more")
        if kind == kinds.FaultKind.CLIENT_ISOLATE.value and for_s <= timeout:
            raise ConfigError(source, f"{key}.for_s",
                              f"client-isolate is held {for_s:g} s, not longer than the transaction timeout "
                              f"({timeout:g} s): the clients would return before the coordinator has to abort "
                              "what they abandoned", f"raise for_s above {timeout:g} or lower workload.txn_timeout_s")


def _check_target(config: RunConfig, timeline: Timeline) -> None:
    if config.target is Target.PULSAR:
        _check_pulsar_links(config, timeline)
        return
    if config.target is not Target.EXTERNAL:
        return
    for planned in timeline.faults:
        needs = kinds.spec(planned.kind).needs
        if Capability.PROCESSES in needs:
            raise ConfigError(f"scenario {config.name}", f"{planned.source}.kind",
                              f"{planned.kind.value} cannot run on the external target: txnbench cannot "
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
