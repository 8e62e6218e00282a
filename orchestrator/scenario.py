"""A scenario as the orchestrator runs it: parsed, adjusted by the command line, validated once.

`load` is the one validation of a scenario, before any folder or process exists: the config
classes check every key while the file is parsed (harness.config), then the faults are planned
on every path the scenario runs and checked against its target (faults.validate.check_scenario),
so a bad fault kind, target or parameter is a one-line ConfigError now, not 20 s into a run (the
kinds are the faults package's: the config keeps them as text, faults/kinds/ names them). Those
timelines are kept: a run hands its nemesis the one planned here (`timeline`). `txnbench
run`, `bench`, `chaos`, `sweep` and `selftest` take their configs from here and trust them; the
load process rebuilds the same config from the load spec without checking it again
(`RunConfig.from_plain`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from faults.schedule import Timeline
from faults.validate import check_scenario
from harness.config import RunConfig, Target, parse_scenario, resolve_scenario
from harness.errors import ConfigError

_PLANNED: dict[str, Timeline] = {}   # a run's config (its repr: frozen plain values) -> its timeline


def load(name_or_path: str, adjust: Callable[[RunConfig], RunConfig] | None = None) -> RunConfig:
    """The scenario `name_or_path` (scenarios/<name>.yaml, or a file), with `adjust` applied (the
    command line's overrides: path, target, duration, settings ...), validated as it will run."""
    file = resolve_scenario(name_or_path)
    config = parse_scenario(file.read_text(encoding="utf-8"), source=str(file), default_name=file.stem)
    if adjust is not None:
        config = adjust(config)
    if config.target is Target.PULSAR:
        check_pulsar_release(config, source=str(file))
    if config.faults.enabled:   # an unknown kind names the file, as the parser would
        for txn_path, planned in check_scenario(config, source=str(file)).items():
            _PLANNED[repr(config.for_path(txn_path))] = planned
    return config


def timeline(config: RunConfig) -> Timeline:
    """The faults a run of `config` injects, planned once: by `load` on each of the scenario's paths, or
    here, checked as `load` checks, for a config made after it (a selftest's shorter run, a shrink
    candidate, the peer's bent scenario)."""
    key = repr(config)
    if key not in _PLANNED:
        _PLANNED[key] = check_scenario(dataclasses.replace(config, paths=()))[config.path]
    return _PLANNED[key]


def check_pulsar_release(config: RunConfig, source: str) -> None:
    """The pulsar target runs a pinned release, and v5 only on one with PIP-473 (5.0)."""
    from targets.pulsar.versions import path_needs, release

    try:
        chosen = release(config.cluster.pulsar_version)
    except ValueError as err:
        raise ConfigError(source, "cluster.pulsar_version", str(err)) from None
    for txn_path in dict.fromkeys([*config.paths, config.path]):
        if not chosen.supports(txn_path):
            raise ConfigError(source, "path", f"{txn_path.value} needs {path_needs(txn_path)}, which Pulsar "
                              f"{chosen.version} does not have", f"run it on {release(None).version} (the default), "
                              "or drop it")
