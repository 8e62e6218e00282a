"""Admin REST for the v4 coordinators, on Pulsar's `/admin/v3/transactions` paths.

* `GET /admin/v3/transactions/coordinatorStats[?coordinatorId=i]`: the coordinators served
  by *this* broker (Pulsar's TransactionCoordinatorStats, plus our recovery time and log
  counts), keyed by id;
* `GET /admin/v3/transactions/transactionMetadata/{mostSigBits}/{leastSigBits}`: one
  transaction not yet ended (status, participants), 404 when this broker's coordinator
  does not know it (ended, or served elsewhere). Pulsar redirects to the coordinator's
  broker; we answer from the broker asked, and callers ask each broker.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from embedded.broker.v4.coordinator_service import V4CoordinatorService


def _json(value: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(value), status=status, content_type="application/json")


def routes(service: V4CoordinatorService) -> list[web.RouteDef]:
    async def coordinator_stats(request: web.Request) -> web.Response:
        stats = service.stats()
        wanted = request.query.get("coordinatorId")
        if wanted is not None:
            if wanted not in stats:
                return _json({"reason": f"transaction coordinator {wanted} is not served by this broker"}, 404)
            stats = {wanted: stats[wanted]}
        return _json(stats)

    async def transaction_metadata(request: web.Request) -> web.Response:
        try:
            most = int(request.match_info["most"])
            least = int(request.match_info["least"])
        except ValueError:
            return _json({"reason": "mostSigBits and leastSigBits must be integers"}, 400)
        coordinator = service.coordinators.get(most)
        found = coordinator.txn_metadata(least) if coordinator is not None and coordinator.ready else None
        if found is None:
            return _json({"reason": f"transaction ({most},{least}) is not open on this broker's coordinators"}, 404)
        return _json(found)

    return [
        web.get("/admin/v3/transactions/coordinatorStats", coordinator_stats),
        web.get("/admin/v3/transactions/transactionMetadata/{most}/{least}", transaction_metadata),
    ]
