"""The PIP-473 metadata key layout, as Pulsar 5.0 implements it (`TxnPaths.java`).

Theory of operation. Every transactional fact lives under `/txn`:

| key | record | partition key | secondary index |
|---|---|---|---|
| `/txn/id/<txnId>` | header | txnId | OPEN: `idx:txn-by-deadline` = `%020d(deadline)`; terminal: `idx:txn-by-final-state` = `<STATE>:%020d(finalizedMs)` |
| `/txn/op/<txnId>-<seq20>` | one write or ack | txnId | `idx:ops-by-txn` = txnId, plus `idx:writes-by-segment` = urlenc(segment) or `idx:acks-by-segment-subscription` = `urlenc(segment):urlenc(sub)` |
| `/txn/segment-events/<urlenc(segment)>-<seq20>` | decision event | urlenc(segment) | |
| `/txn/subscription-events/<urlenc(seg)>:<urlenc(sub)>-<seq20>` | decision event | same | |
| `/txn/segment-state/watermark/<urlenc(segment)>` | resolved-below position | urlenc(segment) | |
| `/txn/segment-state/aborted/<urlenc(segment)>:<txnId>` | aborted txn with readable data | urlenc(segment) | `idx:txn-aborted-by-position` = `urlenc(seg):%020d(ledger):%020d(entry)` |
| `/txn/tc-seq/<tcId>` | CAS counter of txnId.least | | |
| `/txn/tc/leader/<partition>` | coordinator leader (ephemeral) | | |
| `/txn/tc/parallelism` | the cluster's coordinator count | | |

A txnId key is `<most>_<least>` (`TxnIds.toKey`), so the sequence dash of an op key is
always its last `-`. Segment and subscription names are URL-encoded (no `/`, no `:`),
so the `:` of composite keys is unambiguous. Numeric index keys are zero-padded to 20
digits, so the store's natural (byte) order is numeric order. The store's index ranges
are `[min, max)`; `exact_range(k)` selects exactly the secondary key `k`.

Everything here is pure string work; nothing touches the store.
"""

from __future__ import annotations

import urllib.parse

from harness.wire import TxnId

ROOT = "/txn"
HEADER_PREFIX = "/txn/id"
OP_PREFIX = "/txn/op"
SEGMENT_EVENTS_PREFIX = "/txn/segment-events"
SUBSCRIPTION_EVENTS_PREFIX = "/txn/subscription-events"
SEGMENT_STATE_PREFIX = "/txn/segment-state"
WATERMARK_PREFIX = SEGMENT_STATE_PREFIX + "/watermark"
ABORTED_PREFIX = SEGMENT_STATE_PREFIX + "/aborted"
TC_SEQ_PREFIX = "/txn/tc-seq"
TC_LEADER_PREFIX = "/txn/tc/leader"
TC_PARALLELISM_KEY = "/txn/tc/parallelism"

IDX_WRITES_BY_SEGMENT = "idx:writes-by-segment"
IDX_ACKS_BY_SEGMENT_SUBSCRIPTION = "idx:acks-by-segment-subscription"
IDX_TXN_BY_DEADLINE = "idx:txn-by-deadline"
IDX_TXN_BY_FINAL_STATE = "idx:txn-by-final-state"
IDX_TXN_ABORTED_BY_POSITION = "idx:txn-aborted-by-position"
IDX_OPS_BY_TXN = "idx:ops-by-txn"

LONG_KEY_WIDTH = 20
MIN_LONG_KEY = "0" * LONG_KEY_WIDTH
MAX_LONG_KEY = "9" * LONG_KEY_WIDTH


class KeyFormatError(ValueError):
    """A key does not have the layout this module produces."""


def long_key(value: int) -> str:
    """`value` zero-padded to 20 digits (non-negative: ids, epoch millis)."""
    if value < 0:
        raise KeyFormatError(f"index keys hold non-negative numbers, got {value}")
    return f"{value:0{LONG_KEY_WIDTH}d}"


def txn_key(txn: TxnId) -> str:
    return f"{txn.most}_{txn.least}"


def parse_txn_key(key: str) -> TxnId:
    most, sep, least = key.partition("_")
    if not sep or not most.isdigit() or not least.isdigit():
        raise KeyFormatError(f"{key!r} is not a txnId key <most>_<least>")
    return TxnId(int(most), int(least))


def encode(text: str) -> str:
    """URL-encode a name for a path component, partition key or index key (Pulsar's Codec.encode)."""
    return urllib.parse.quote(text, safe="")


def decode(text: str) -> str:
    return urllib.parse.unquote(text)


def exact_range(secondary_key: str) -> tuple[str, str]:
    """`[min, max)` selecting exactly `secondary_key` in an index range query."""
    return secondary_key, secondary_key + "\x00"


# ---- headers ----------------------------------------------------------------------------------


def header(txn: TxnId) -> str:
    return f"{HEADER_PREFIX}/{txn_key(txn)}"


def txn_of_header(key: str) -> TxnId:
    head, sep, name = key.rpartition("/")
    if head != HEADER_PREFIX or not sep:
        raise KeyFormatError(f"{key!r} is not a header key {HEADER_PREFIX}/<txnId>")
    return parse_txn_key(name)


def deadline_key(deadline_ms: int) -> str:
    return long_key(deadline_ms)


def final_state_key(state: str, finalized_ms: int) -> str:
    return f"{state}:{long_key(finalized_ms)}"


# ---- op records -------------------------------------------------------------------------------


def op_parent(txn: TxnId) -> str:
    """The sequence prefix of a transaction's op records (`/txn/op/<txnId>`)."""
    return f"{OP_PREFIX}/{txn_key(txn)}"


def op_range(txn: TxnId) -> tuple[str, str]:
    """`[min, max)` over every op record of `txn` (its sequence keys `<parent>-<seq20>`)."""
    parent = op_parent(txn)
    return parent + "-", parent + "."   # '.' sorts right after '-'


def txn_of_op(key: str) -> TxnId:
    head, sep, name = key.rpartition("/")
    dash = name.rfind("-")
    if head != OP_PREFIX or not sep or dash <= 0:
        raise KeyFormatError(f"{key!r} is not an op key {OP_PREFIX}/<txnId>-<seq>")
    return parse_txn_key(name[:dash])


def segment_key(segment: str) -> str:
    """The `idx:writes-by-segment` key and the partition key of a segment's records."""
    return encode(segment)


def ack_index_key(segment: str, subscription: str) -> str:
    """`urlenc(segment):urlenc(sub)`: the ack index key and subscription-event partition key."""
    return f"{encode(segment)}:{encode(subscription)}"


# ---- decision events --------------------------------------------------------------------------


def segment_events_parent(segment: str) -> str:
    return f"{SEGMENT_EVENTS_PREFIX}/{segment_key(segment)}"


def subscription_events_parent(segment: str, subscription: str) -> str:
    return f"{SUBSCRIPTION_EVENTS_PREFIX}/{ack_index_key(segment, subscription)}"


def sequence_watch_prefix(parent: str) -> str:
    """What to watch for new keys of the sequence `parent` (`<parent>-<seq20>`)."""
    return parent + "-"


def is_sequence_key(parent: str, key: str) -> bool:
    suffix = key[len(parent) + 1:] if key.startswith(parent + "-") else ""
    return len(suffix) == LONG_KEY_WIDTH and suffix.isdigit()


# ---- per-segment visibility state ---------------------------------------------------------------


def watermark(segment: str) -> str:
    return f"{WATERMARK_PREFIX}/{segment_key(segment)}"


def aborted(segment: str, txn: TxnId) -> str:
    return f"{ABORTED_PREFIX}/{segment_key(segment)}:{txn_key(txn)}"


def txn_of_aborted(key: str) -> TxnId:
    head, sep, name = key.rpartition("/")
    segment, colon, txn = name.partition(":")
    if head != ABORTED_PREFIX or not sep or not colon or not segment:
        raise KeyFormatError(f"{key!r} is not an aborted-txn key {ABORTED_PREFIX}/<segment>:<txnId>")
    return parse_txn_key(txn)


def aborted_index_key(segment: str, ledger_id: int, entry_id: int) -> str:
    return f"{segment_key(segment)}:{long_key(max(0, ledger_id))}:{long_key(max(0, entry_id))}"


def aborted_index_range(segment: str) -> tuple[str, str]:
    """`[min, max)` over one segment's entries of `idx:txn-aborted-by-position`."""
    base = segment_key(segment)
    return f"{base}:{MIN_LONG_KEY}:{MIN_LONG_KEY}", f"{base}:{MAX_LONG_KEY}:{MAX_LONG_KEY}~"


# ---- coordinator ------------------------------------------------------------------------------


def tc_sequence(tc_id: int) -> str:
    return f"{TC_SEQ_PREFIX}/{tc_id}"


def tc_leader(partition: int) -> str:
    return f"{TC_LEADER_PREFIX}/{partition}"
