"""SyncGroup: the leader's assignment goes out; every member waits for its own part."""

from __future__ import annotations

from typing import Any

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group
from protocol import Request
from protocol.errors import ErrorCode


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    body = request.body
    if not may_on_group(ctx, AclOperation.READ, body.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "assignment": b""}
    response = await ctx.groups.sync_group(
        body.group_id, body.generation_id, body.member_id, body.group_instance_id, body.protocol_type,
        body.protocol_name, [(a.member_id, bytes(a.assignment)) for a in body.assignments])
    return {"throttle_time_ms": 0, **response}
