"""Admin REST of the v5 coordinator, on Pulsar's `/admin/v3/transactions` paths.

`GET /admin/v3/transactions/transactionMetadata/{mostSigBits}/{leastSigBits}` answers from
the transaction's header in the metadata store (PIP-473: the header *is* the coordinator's
state, so any broker can answer and nothing is redirected): Pulsar's TransactionMetadata
shape, `status` the header's state (OPEN, COMMITTED, ABORTED), `openTimestamp` its
`createdAt`, `timeoutAt` its timeout, `producedPartitions` / `ackedPartitions` from the op
records still stored (`startPosition` the first written entry; `aborted` from the
header). 404 once the header is gone: never created, or garbage-collected after the
retention window. A decided header stays until then, so on v5 an abandoned transaction
the sweep aborted reads `ABORTED`, where a v4 coordinator has already forgotten it (404).

(`coordinatorStats` stays the v4 coordinators' view, registered first by the v4 extension
that every broker installs.)
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

from embedded.broker.v5.txn.records import OpKind, TxnState
from embedded.metadata.model import MetadataError, MetadataUnavailable
from harness.wire import TxnId

if TYPE_CHECKING:
    from embedded.broker.v5.txn.store import TxnMetadataStore


def _json(value: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(value), status=status, content_type="application/json")


def routes(store: TxnMetadataStore) -> list[web.RouteDef]:
    async def transaction_metadata(request: web.Request) -> web.Response:
        try:
            txn = TxnId(int(request.match_info["most"]), int(request.match_info["least"]))
        except ValueError:
            return _json({"reason": "mostSigBits and leastSigBits must be integers"}, 400)
        try:
            found = await store.get_header(txn)
            ops = await store.ops_of(txn) if found is not None else []
        except (MetadataUnavailable, MetadataError) as err:
            return _json({"reason": f"metadata store: {err}"}, 503)
        if found is None:
            return _json({"reason": f"Transaction not found: ({txn.most},{txn.least})"}, 404)
        header, _version = found
        aborted = header.state is TxnState.ABORTED
        produced: dict[str, dict[str, Any]] = {}
        acked: dict[str, dict[str, Any]] = {}
        for stored in ops:
            op = stored.op
            if op.kind is OpKind.WRITE:
                produced.setdefault(op.segment, {"startPosition": f"{op.ledger_id}:{op.entry_id}",
                                                 "aborted": aborted})
            elif op.subscription is not None:
                acked.setdefault(op.segment, {})[op.subscription] = {
                    "cumulativeAckPosition": f"{op.ledger_id}:{op.entry_id}" if op.cumulative else None}
        return _json({"txnId": f"({txn.most},{txn.least})", "status": header.state.value,
                      "openTimestamp": header.created_ms, "timeoutAt": header.timeout_ms,
                      "producedPartitions": produced, "ackedPartitions": acked})

    return [
        web.get("/admin/v3/transactions/transactionMetadata/{most}/{least}", transaction_metadata),
    ]
