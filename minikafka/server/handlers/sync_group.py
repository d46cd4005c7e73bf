"""SyncGroup: the leader's assignment goes out; every member waits for its own part."""

from __future__ import annotations

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.sync_group import SyncGroupRequestView, SyncGroupResponse


async def handle(request: Request[SyncGroupRequestView], ctx: BrokerContext) -> SyncGroupResponse:
    body = request.body
    if not may_on_group(ctx, AclOperation.READ, body.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "assignment": b""}
    result = await ctx.groups.sync_group(
        body.group_id, body.generation_id, body.member_id, body.group_instance_id, body.protocol_type,
        body.protocol_name, [(a.member_id, bytes(a.assignment)) for a in body.assignments])
    return {"throttle_time_ms": 0, "error_code": result["error_code"], "protocol_type": result["protocol_type"],
            "protocol_name": result["protocol_name"], "assignment": result["assignment"]}
