"""The fault kinds' registry: each kind's module, imported here by name, so the import contracts and
mypy see every one and nothing discovers kinds at run time.

A kind is one module (faults/kinds/<kind>.py) with one `KIND` (faults.kinds.base.Kind), named here
in the import and in `KINDS`. The order is the order generated schedules draw from and docs/scenarios.md lists: append, never
reorder, or every seed of every shipped scenario draws other faults. The scenario config keeps a kind
as text (harness does not import this package); `kind_of` turns it into its `Kind` where a scenario
is validated and planned.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from types import MappingProxyType

from faults.environment import FaultEnvironment
from faults.kinds import (
    bandwidth,
    client_isolate,
    client_kill,
    corrupt,
    crash,
    kill,
    latency,
    merge,
    partition,
    pause,
    restart,
    slow_participant,
    split,
    terminate,
    unload,
)
from faults.kinds.base import Kind
from faults.model import FaultAction
from harness.errors import ConfigError

KINDS: tuple[Kind, ...] = (
    partition.KIND, latency.KIND, bandwidth.KIND, kill.KIND, pause.KIND, split.KIND, merge.KIND, terminate.KIND,
    slow_participant.KIND, restart.KIND, unload.KIND, client_kill.KIND, client_isolate.KIND, crash.KIND,
    corrupt.KIND,
)
BY_NAME: Mapping[str, Kind] = MappingProxyType({kind.name: kind for kind in KINDS})


def kind_of(text: str, source: str, key: str) -> Kind:
    """The kind a scenario names; a ConfigError naming the file, the key and the closest kind otherwise."""
    if isinstance(text, str) and text in BY_NAME:
        return BY_NAME[text]
    close = difflib.get_close_matches(str(text), list(BY_NAME), n=1)
    fix = f"did you mean '{close[0]}'?" if close else f"use one of: {', '.join(BY_NAME)}"
    raise ConfigError(source, key, f"{text!r} is not a valid choice", fix)


def build_actions(env: FaultEnvironment) -> dict[str, FaultAction]:
    """The actions this environment can run, by kind name; kinds whose dependency is missing are absent."""
    built = {kind.name: kind.action(env) for kind in KINDS}
    return {name: action for name, action in built.items() if action is not None}
