"""History schema 1: the contract between load generators, the nemesis and the checker.

A run writes `history/<writer>.jsonl`, one JSON object per line, one file per
writing process. Each line is an `Op`. Invocations (`invoke`) are written and
flushed before the operation starts; their completion (`ok`, `fail`, `info`)
carries the same `process` and `f`. A process has at most one outstanding
operation, so pairing is "the next completion of the same writer and process".
Single events (`receive`, `read`, `phase`) are written as one `ok` line.

Field meanings are in docs/history.md; this module is the executable version.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import orjson

SCHEMA_VERSION = 1


class OpType(StrEnum):
    INVOKE = "invoke"
    OK = "ok"
    FAIL = "fail"   # definitely did not happen
    INFO = "info"   # outcome unknown


class OpF(StrEnum):
    TXN_OPEN = "txn-open"
    SEND = "send"
    ACK = "ack"
    TXN_COMMIT = "txn-commit"
    TXN_ABORT = "txn-abort"
    RECEIVE = "receive"
    READ = "read"
    FAULT = "fault"
    HEAL = "heal"
    PHASE = "phase"
    TXN_STATE = "txn-state"   # the drain's reading of a coordinator's view of one transaction


class FaultEffect(StrEnum):
    """What a fault does while it holds, in its `fault` and `heal` ops' `extra.effects`: each kind
    declares its own (faults/kinds/), so the analysis judges faults by effect and names no kind."""

    STOPS = "stops"                        # its target services are down (killed, paused, crashed,
                                           # corrupted, restarting, or exited on their own)
    CUTS = "cuts"                          # its target links carry nothing
    ISOLATES_CLIENTS = "isolates-clients"  # every client cut off from every broker
    KILLS_CLIENT = "kills-client"          # a load worker killed (`extra.effect.writer` names it)
    STAYS = "stays"                        # it outlasts the run: its topics are terminated


#: The effects of each fault kind a history recorded before faults carried `extra.effects`
#: (until 2026-11-29): such a history names only the kind, and reading it again must find the
#: same outage, killed-writer and terminate windows it was judged by, or a re-check would invent
#: stalls and lost writes. Frozen: a kind's effects today are declared in faults/kinds/.
LEGACY_KIND_EFFECTS: Mapping[str, frozenset[FaultEffect]] = MappingProxyType({
    **dict.fromkeys(("kill", "crash", "corrupt", "pause", "restart", "exit"), frozenset({FaultEffect.STOPS})),
    "partition": frozenset({FaultEffect.CUTS}), "client-isolate": frozenset({FaultEffect.ISOLATES_CLIENTS}),
    "client-kill": frozenset({FaultEffect.KILLS_CLIENT}), "terminate": frozenset({FaultEffect.STAYS}),
})
_EFFECT_NAMES = {e.value: e for e in FaultEffect}


def recorded_effects(fault: Mapping[str, Any]) -> frozenset[FaultEffect]:
    """A recorded fault's effects: its `effects` (a nemesis op's `extra`, a perf fault entry), or,
    where it has none (recorded before they were), its `kind`'s in `LEGACY_KIND_EFFECTS`. Names
    schema 1 does not know are left out."""
    named = fault.get("effects")
    if named is None:
        return LEGACY_KIND_EFFECTS.get(str(fault.get("kind")), frozenset())
    return frozenset(_EFFECT_NAMES[e] for e in named if e in _EFFECT_NAMES)


# Operations that are one `ok` line with no invocation.
SINGLE_EVENT_FS = frozenset({OpF.RECEIVE, OpF.READ, OpF.PHASE, OpF.TXN_STATE})

# A `txn-state` reading's `extra.status` values that are no end of the transaction (the
# coordinators' names): the drain asks such a one again, the checker's unresolved-txn reports one
# still there after the transaction's deadline.
UNFINISHED_TXN_STATES = ("OPEN", "TIME_OUT", "COMMITTING", "ABORTING")

# Field order of a line; also the column order of the analysis schema.
FIELDS: tuple[str, ...] = (
    "schema", "run", "writer", "process", "index", "time_ns", "wall_ms", "type", "f", "path",
    "txn", "topic", "segment", "subscription", "key", "value", "inputs", "msg_id", "error", "extra",
)

# The writers that are not the load (`w<i>`, `r<k>`): the run's phases, the faults (the nemesis,
# and the supervisor's record of a server's exit), the drain's final and live reads. What a
# transaction did and when an anomaly happened come from the load's own lines only.
RUN_WRITER, NEMESIS_WRITER, DRAIN_WRITER, LIVE_DRAIN_WRITER = "run", "nemesis", "drain", "drain-live"
NOT_THE_LOAD = frozenset({RUN_WRITER, NEMESIS_WRITER, DRAIN_WRITER, LIVE_DRAIN_WRITER})

# Phase names the orchestrator writes (`f: phase`, `extra.name`).
PHASE_DRAIN_COMPLETE = "drain-complete"
# One per durable subscription, written once it exists (before the load sends anything):
# `topic` and `subscription` name it, `extra.initial_position` says where it starts. Every
# value sent after this event is past the subscription's start position (the `undelivered` check).
PHASE_SUBSCRIPTION_START = "subscription-start"


@dataclass(slots=True, unsafe_hash=True)
class Op:
    """One history line. Optional fields are None when they do not apply.

    Treat it as immutable (it is hashed and compared by value). Not `frozen=True`: a
    frozen dataclass sets each of its 20 fields through `object.__setattr__`, which made
    building one 2-3x slower, and the load process builds two per operation (issue #27).
    """

    run: str
    writer: str
    process: str
    index: int
    time_ns: int
    wall_ms: float
    type: OpType
    f: OpF
    path: str
    txn: str | None = None
    topic: str | None = None
    segment: str | None = None
    subscription: str | None = None
    key: str | None = None
    value: str | None = None
    inputs: tuple[str, ...] | None = None
    msg_id: str | None = None
    error: str | None = None
    extra: dict[str, Any] | None = None
    schema: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        """The line's fields in `FIELDS` order (enums as their values, `inputs` a list)."""
        # Field by field, not dataclasses.asdict: that deep-copies `extra` and costs more
        # than the rest of a line's write (every operation of the load writes two lines).
        return {"schema": self.schema, "run": self.run, "writer": self.writer, "process": self.process,
                "index": self.index, "time_ns": self.time_ns, "wall_ms": self.wall_ms,
                "type": self.type.value, "f": self.f.value, "path": self.path, "txn": self.txn,
                "topic": self.topic, "segment": self.segment, "subscription": self.subscription,
                "key": self.key, "value": self.value,
                "inputs": list(self.inputs) if self.inputs is not None else None,
                "msg_id": self.msg_id, "error": self.error, "extra": self.extra}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    def to_json_bytes(self) -> bytes:
        """The line as UTF-8 JSON without the newline: what the recorder writes.

        orjson, not `json`: the load process writes two lines per operation, and encoding
        them with `json` was about 7% of its CPU (py-spy, issue #27). The two agree on every
        value a line holds but the spelling of a float's exponent (`1e-7` / `1e-07`), which
        reads back the same, and a NaN or infinity, which orjson writes as null (no writer
        records one). What orjson refuses (an integer past 64 bits) falls back to `json`.
        """
        data = self.to_dict()
        try:
            return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
        except (TypeError, orjson.JSONEncodeError):
            return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def to_json_line(self) -> bytes:
        """`to_json_bytes` and its newline: one history line, as the recorder writes it.

        The enums and `inputs` go to orjson as they are (it writes a str enum as its value and
        a tuple as a list), and orjson appends the newline: no intermediate dict of converted
        values and no second bytes object per line (issue #27).
        """
        data = {"schema": self.schema, "run": self.run, "writer": self.writer, "process": self.process,
                "index": self.index, "time_ns": self.time_ns, "wall_ms": self.wall_ms,
                "type": self.type, "f": self.f, "path": self.path, "txn": self.txn,
                "topic": self.topic, "segment": self.segment, "subscription": self.subscription,
                "key": self.key, "value": self.value, "inputs": self.inputs,
                "msg_id": self.msg_id, "error": self.error, "extra": self.extra}
        try:
            return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
        except (TypeError, orjson.JSONEncodeError):
            return self.to_json_bytes() + b"\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Op:
        inputs = data.get("inputs")
        return cls(
            run=data["run"], writer=data["writer"], process=data["process"], index=data["index"],
            time_ns=data["time_ns"], wall_ms=data["wall_ms"], type=OpType(data["type"]),
            f=OpF(data["f"]), path=data["path"], txn=data.get("txn"), topic=data.get("topic"),
            segment=data.get("segment"), subscription=data.get("subscription"), key=data.get("key"),
            value=data.get("value"), inputs=tuple(inputs) if inputs is not None else None,
            msg_id=data.get("msg_id"), error=data.get("error"), extra=data.get("extra"),
            schema=data.get("schema", SCHEMA_VERSION),
        )


def format_txn_id(most: int, least: int) -> str:
    """The history's transaction id: `"<most>:<least>"`."""
    return f"{most}:{least}"


def format_msg_id(ledger: int, entry: int, batch_index: int = -1) -> str:
    """The history's message id: `"<ledger>:<entry>:<batch_index>"` (-1 when not batched)."""
    return f"{ledger}:{entry}:{batch_index}"
