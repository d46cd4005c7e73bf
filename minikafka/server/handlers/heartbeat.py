"""Heartbeat: keeps a member's session alive and tells it when a rebalance started."""

from __future__ import annotations

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.heartbeat import HeartbeatRequestView, HeartbeatResponse


async def handle(request: Request[HeartbeatRequestView], ctx: BrokerContext) -> HeartbeatResponse:
    body = request.body
    if not may_on_group(ctx, AclOperation.READ, body.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    error = ctx.groups.heartbeat(body.group_id, body.generation_id, body.member_id, body.group_instance_id)
    return {"throttle_time_ms": 0, "error_code": error}
