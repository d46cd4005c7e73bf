"""LeaveGroup: one member (v0-2) or a batch of members by id or group instance id (v3+) leave."""

from __future__ import annotations

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.leave_group import LeaveGroupRequestView, LeaveGroupResponse, MemberResponse


async def handle(request: Request[LeaveGroupRequestView], ctx: BrokerContext) -> LeaveGroupResponse:
    body = request.body
    if not may_on_group(ctx, AclOperation.READ, body.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "members": []}
    if request.api_version < 3:
        error, per_member = ctx.groups.leave_group(body.group_id, [(body.member_id, None)])
        if error == ErrorCode.NONE and per_member:
            error = per_member[0]
        return {"throttle_time_ms": 0, "error_code": error}
    leaving = [(m.member_id, m.group_instance_id) for m in body.members]
    error, per_member = ctx.groups.leave_group(body.group_id, leaving)
    members: list[MemberResponse] = [
        {"member_id": member_id, "group_instance_id": instance_id, "error_code": member_error}
        for (member_id, instance_id), member_error in zip(leaving, per_member, strict=False)]
    return {"throttle_time_ms": 0, "error_code": error, "members": members}
