"""JoinGroup: a member joins its group and waits (long poll) for the rebalance to complete."""

from __future__ import annotations

from minikafka.group.coordinator import JoinRequest
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group
from minikafka.server.handlers.find_coordinator import ensure_offsets_topic
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.join_group import JoinGroupRequestView, JoinGroupResponse, JoinGroupResponseMember


async def handle(request: Request[JoinGroupRequestView], ctx: BrokerContext) -> JoinGroupResponse:
    body = request.body
    version = request.api_version
    if not may_on_group(ctx, AclOperation.READ, body.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "generation_id": -1,
                "protocol_name": None if version >= 7 else "", "leader": "", "member_id": body.member_id,
                "members": []}
    # v0 has no rebalance timeout: the session timeout bounds the rebalance, as in Kafka.
    rebalance_timeout = body.rebalance_timeout_ms if version >= 1 and body.rebalance_timeout_ms >= 0 \
        else body.session_timeout_ms
    join = JoinRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        group_instance_id=body.group_instance_id,
        client_id=request.header.client_id or "",
        client_host="/" + ctx.client_host,
        session_timeout_ms=body.session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout,
        protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
        require_known_member_id=version >= 4,
        reason=body.reason,
    )
    await ensure_offsets_topic(ctx)
    result = await ctx.groups.join_group(join)
    protocol_name = result["protocol_name"]
    if version < 7 and protocol_name is None:
        protocol_name = ""  # nullable only from v7
    members: list[JoinGroupResponseMember] = [
        {"member_id": m["member_id"], "group_instance_id": m["group_instance_id"], "metadata": m["metadata"]}
        for m in result["members"]]
    return {"throttle_time_ms": 0, "error_code": result["error_code"], "generation_id": result["generation_id"],
            "protocol_type": result["protocol_type"], "protocol_name": protocol_name, "leader": result["leader"],
            "skip_assignment": result["skip_assignment"], "member_id": result["member_id"], "members": members}
