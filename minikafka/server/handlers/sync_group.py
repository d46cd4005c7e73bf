"""SyncGroup: the leader's assignment goes out; every member waits for its own part."""

from __future__ import annotations

from typing import Any

from minikafka.server.context import BrokerContext
from protocol import Request

API_KEY = 14


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    body = request.body
    response = await ctx.groups.sync_group(
        body.group_id, body.generation_id, body.member_id, body.group_instance_id, body.protocol_type,
        body.protocol_name, [(a.member_id, bytes(a.assignment)) for a in body.assignments])
    return {"throttle_time_ms": 0, **response}
