"""DeleteGroups: delete empty groups with their committed offsets."""

from __future__ import annotations

from typing import Any

from minikafka.server.context import BrokerContext
from protocol import Request

API_KEY = 42


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    results = ctx.groups.delete_groups(list(dict.fromkeys(request.body.groups_names)))
    return {"throttle_time_ms": 0, "results": [{"group_id": group_id, "error_code": error}
                                               for group_id, error in results.items()]}
