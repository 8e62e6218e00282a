"""The PIP-473 records (`TxnHeader`, `TxnOp`, `TxnEvent`, ...) and their JSON form.

Field names follow Pulsar 5.0's newest records: the header has `state`, `timeout`,
`createdAt`, `finalizedAt`, `owner`; an op has `kind`, `segment`, `subscription`
(acks), `ledgerId`, `entryId`, `cumulative` (acks); an event has `txnId` and
`decision`. Times are integers here, in milliseconds (`timeout` is a duration in ms,
`createdAt`/`finalizedAt` epoch ms), where Pulsar's Jackson writes `Duration`/`Instant`.
One addition: an ack op of part of a batch carries `ackSet` (the batch ack-set words),
which Pulsar's `TxnOp` has no field for.

A write op is written before its entry exists, so its position is the sentinel 0:0,
as in `MetadataTransactionBuffer`; positions of writes live in the buffer's memory.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

from embedded.broker.v5.txn import keys
from harness.wire import TxnAction, TxnId


class RecordError(ValueError):
    """A stored record cannot be decoded; the message names the record."""


class TxnState(enum.Enum):
    OPEN = "OPEN"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"

    @property
    def terminal(self) -> bool:
        return self is not TxnState.OPEN

    @classmethod
    def for_action(cls, action: TxnAction) -> TxnState:
        return cls.COMMITTED if action is TxnAction.COMMIT else cls.ABORTED


class OpKind(enum.Enum):
    WRITE = "WRITE"
    ACK = "ACK"


def _dump(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def _load(text: str | None, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text or "")
    except ValueError:
        raise RecordError(f"{what} is not JSON: {text!r:.200}") from None
    if not isinstance(data, dict):
        raise RecordError(f"{what} is not a JSON object: {text!r:.200}")
    return data


@dataclass(frozen=True)
class TxnHeader:
    """One transaction's state: the linearization point of its outcome."""

    state: TxnState
    timeout_ms: int
    created_ms: int
    finalized_ms: int | None = None
    owner: str | None = None

    @property
    def deadline_ms(self) -> int:
        return self.created_ms + self.timeout_ms

    def finalize(self, state: TxnState, now_ms: int) -> TxnHeader:
        if not state.terminal:
            raise ValueError("a header can only be finalized to COMMITTED or ABORTED")
        return TxnHeader(state, self.timeout_ms, self.created_ms, now_ms, self.owner)

    def index(self) -> dict[str, str]:
        """The header's one secondary-index entry: by deadline while OPEN, by final state after."""
        if self.state.terminal:
            return {keys.IDX_TXN_BY_FINAL_STATE: keys.final_state_key(self.state.value, self.finalized_ms or 0)}
        return {keys.IDX_TXN_BY_DEADLINE: keys.deadline_key(self.deadline_ms)}

    def to_json(self) -> str:
        return _dump({"state": self.state.value, "timeout": self.timeout_ms, "createdAt": self.created_ms,
                      "finalizedAt": self.finalized_ms, "owner": self.owner})

    @classmethod
    def from_json(cls, text: str | None) -> TxnHeader:
        data = _load(text, "transaction header")
        try:
            finalized = data.get("finalizedAt")
            return cls(TxnState(data["state"]), int(data["timeout"]), int(data["createdAt"]),
                       None if finalized is None else int(finalized), data.get("owner"))
        except (KeyError, ValueError, TypeError) as err:
            raise RecordError(f"transaction header {text!r:.200}: {err}") from None


@dataclass(frozen=True)
class TxnOp:
    """One transactional write (per entry appended) or ack (per position acknowledged)."""

    kind: OpKind
    segment: str
    subscription: str | None = None
    ledger_id: int = 0
    entry_id: int = 0
    cumulative: bool | None = None
    ack_set: tuple[int, ...] | None = None

    @classmethod
    def write(cls, segment: str) -> TxnOp:
        return cls(OpKind.WRITE, segment)

    @classmethod
    def ack(cls, segment: str, subscription: str, ledger_id: int, entry_id: int, *, cumulative: bool = False,
            ack_set: tuple[int, ...] | None = None) -> TxnOp:
        return cls(OpKind.ACK, segment, subscription, ledger_id, entry_id, True if cumulative else None, ack_set)

    def index(self, txn: TxnId) -> dict[str, str]:
        """`idx:ops-by-txn` and the participant's own index."""
        out = {keys.IDX_OPS_BY_TXN: keys.txn_key(txn)}
        if self.kind is OpKind.WRITE:
            out[keys.IDX_WRITES_BY_SEGMENT] = keys.segment_key(self.segment)
        else:
            out[keys.IDX_ACKS_BY_SEGMENT_SUBSCRIPTION] = keys.ack_index_key(self.segment, self.subscription or "")
        return out

    def to_json(self) -> str:
        data: dict[str, Any] = {"kind": self.kind.value, "segment": self.segment, "subscription": self.subscription,
                                "ledgerId": self.ledger_id, "entryId": self.entry_id,
                                "cumulative": self.cumulative}
        if self.ack_set is not None:
            data["ackSet"] = list(self.ack_set)
        return _dump(data)

    @classmethod
    def from_json(cls, text: str | None) -> TxnOp:
        data = _load(text, "transaction op record")
        try:
            ack_set = data.get("ackSet")
            return cls(OpKind(data["kind"]), str(data["segment"]), data.get("subscription"),
                       int(data.get("ledgerId", 0)), int(data.get("entryId", 0)),
                       None if data.get("cumulative") is None else bool(data["cumulative"]),
                       None if ack_set is None else tuple(int(w) for w in ack_set))
        except (KeyError, ValueError, TypeError) as err:
            raise RecordError(f"transaction op record {text!r:.200}: {err}") from None


@dataclass(frozen=True)
class TxnEvent:
    """A decision published to a participant's event stream after the header CAS."""

    txn: TxnId
    decision: TxnState

    def to_json(self) -> str:
        return _dump({"txnId": keys.txn_key(self.txn), "decision": self.decision.value})

    @classmethod
    def from_json(cls, text: str | None) -> TxnEvent:
        data = _load(text, "transaction event")
        try:
            decision = TxnState(data["decision"])
            txn = keys.parse_txn_key(str(data["txnId"]))
        except (KeyError, ValueError) as err:
            raise RecordError(f"transaction event {text!r:.200}: {err}") from None
        if not decision.terminal:
            raise RecordError(f"transaction event {text!r:.200} carries no decision")
        return cls(txn, decision)


@dataclass(frozen=True)
class SegmentWatermark:
    """Everything of the segment at or before this position is resolved (no open txn below it)."""

    ledger_id: int
    entry_id: int

    def to_json(self) -> str:
        return _dump({"ledgerId": self.ledger_id, "entryId": self.entry_id})

    @classmethod
    def from_json(cls, text: str | None) -> SegmentWatermark:
        data = _load(text, "segment watermark")
        try:
            return cls(int(data["ledgerId"]), int(data["entryId"]))
        except (KeyError, ValueError, TypeError) as err:
            raise RecordError(f"segment watermark {text!r:.200}: {err}") from None


@dataclass(frozen=True)
class AbortedTxnRecord:
    """An aborted transaction with data still in the segment, and its highest position there."""

    max_ledger_id: int
    max_entry_id: int

    def to_json(self) -> str:
        return _dump({"maxLedgerId": self.max_ledger_id, "maxEntryId": self.max_entry_id})


@dataclass(frozen=True)
class TcLeader:
    """The value of `/txn/tc/leader/<N>`: who coordinates partition N."""

    broker_id: str
    broker_service_url: str
    broker_service_url_tls: str | None
    web_service_url: str

    def to_json(self) -> str:
        return _dump({"brokerId": self.broker_id, "brokerServiceUrl": self.broker_service_url,
                      "brokerServiceUrlTls": self.broker_service_url_tls, "webServiceUrl": self.web_service_url})

    @classmethod
    def from_json(cls, text: str | None) -> TcLeader:
        data = _load(text, "coordinator leader record")
        try:
            return cls(str(data["brokerId"]), str(data["brokerServiceUrl"]), data.get("brokerServiceUrlTls"),
                       str(data.get("webServiceUrl", "")))
        except KeyError as err:
            raise RecordError(f"coordinator leader record {text!r:.200}: missing {err}") from None
