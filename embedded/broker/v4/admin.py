"""Admin REST for the v4 coordinators, on Pulsar's `/admin/v3/transactions` paths.

* `GET /admin/v3/transactions/coordinatorStats[?coordinatorId=i]`: the coordinators served
  by *this* broker (Pulsar's TransactionCoordinatorStats, plus our recovery time and log
  counts), keyed by id. (Pulsar without `coordinatorId` gathers every coordinator through
  its admin client; callers of this one ask each broker.)
* `GET /admin/v3/transactions/transactionMetadata/{mostSigBits}/{leastSigBits}`: one
  transaction the coordinator still holds (Pulsar's TransactionMetadata: `txnId` "(most,least)",
  `status`, `openTimestamp`, `timeoutAt`, `producedPartitions` {topic: {startPosition,
  aborted}}, `ackedPartitions` {topic: {subscription: {cumulativeAckPosition}}}). As Pulsar's
  `validateTopicOwnership` of assign partition `mostSigBits`: a broker that does not serve
  the coordinator answers 307 to the owner's web URL (acquiring the partition, and so
  loading the coordinator from its log, when nobody owns it). 404 when the coordinator
  does not know the transaction: a v4 coordinator forgets a transaction once it is
  COMMITTED or ABORTED, so for an ended one 404 is the answer, as in Pulsar.

Difference from Pulsar, on purpose: Pulsar fills each produced partition's `startPosition`
and `aborted` and each subscription's `cumulativeAckPosition` by asking the participant
brokers; here they come from what the coordinator knows (`startPosition` null, `aborted`
from its own decision, `cumulativeAckPosition` null). The drain reads only `status`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from embedded.broker.txn_api import TxnError
from embedded.broker.v4.coordinator_service import V4CoordinatorService, assign_partition

_OWNER_TIMEOUT_S = 10.0


def _json(value: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(value), status=status, content_type="application/json")


def pulsar_metadata(view: dict[str, Any]) -> dict[str, Any]:
    """The coordinator's `TxnMeta.to_json()` in Pulsar's TransactionMetadata shape."""
    aborted = view.get("status") in ("ABORTING", "ABORTED", "TIME_OUT")
    acked: dict[str, dict[str, Any]] = {}
    for entry in view.get("ackedPartitions") or []:
        acked.setdefault(str(entry["topic"]), {})[str(entry["subscription"])] = {"cumulativeAckPosition": None}
    return {"txnId": view.get("txnId"), "status": view.get("status"), "openTimestamp": view.get("openTimestamp"),
            "timeoutAt": view.get("timeoutAt"),
            "producedPartitions": {str(t): {"startPosition": None, "aborted": aborted}
                                   for t in view.get("producedPartitions") or []},
            "ackedPartitions": acked}


def routes(service: V4CoordinatorService, *, transaction_metadata: bool = True) -> list[web.RouteDef]:
    """The routes; without `transaction_metadata` (a v5 broker, where the v5 coordinator
    answers it for its clients' transactions) only coordinatorStats."""
    async def coordinator_stats(request: web.Request) -> web.Response:
        stats = service.stats()
        wanted = request.query.get("coordinatorId")
        if wanted is not None:
            if wanted not in stats:
                return _json({"reason": f"transaction coordinator {wanted} is not served by this broker"}, 404)
            stats = {wanted: stats[wanted]}
        return _json(stats)

    async def metadata(request: web.Request) -> web.Response:
        try:
            most = int(request.match_info["most"])
            least = int(request.match_info["least"])
        except ValueError:
            return _json({"reason": "mostSigBits and leastSigBits must be integers"}, 400)
        if not 0 <= most < service.settings.coordinator_count:
            return _json({"reason": f"transaction coordinator {most} not found"}, 404)
        coordinator = service.coordinators.get(most)
        if coordinator is None or not coordinator.ready:
            try:
                owner = await asyncio.wait_for(service.broker.ownership.ensure_owner(assign_partition(most)),
                                               _OWNER_TIMEOUT_S)
            except Exception as err:  # no owner can be had now: the caller may ask again
                return _json({"reason": f"cannot find the owner of coordinator {most}: {err!r}"}, 503)
            if owner.broker_id != service.broker.broker_id:
                raise web.HTTPTemporaryRedirect(owner.web_url.rstrip("/") + request.path + "?authoritative=true")
            try:
                await service.tc_client_connect(most)    # loads it here (bounded by tc_load_wait_ms)
            except TxnError as err:
                return _json({"reason": err.message}, 503)
            coordinator = service.coordinators.get(most)
        found = coordinator.txn_metadata(least) if coordinator is not None and coordinator.ready else None
        if found is None:
            return _json({"reason": f"Transaction not found: ({most},{least})"}, 404)
        return _json(pulsar_metadata(found))

    out = [web.get("/admin/v3/transactions/coordinatorStats", coordinator_stats)]
    if transaction_metadata:
        out.append(web.get("/admin/v3/transactions/transactionMetadata/{most}/{least}", metadata))
    return out
