"""ConsumerGroupHeartbeat: a KIP-848 consumer group member joins, heartbeats, reconciles and leaves."""

from __future__ import annotations

from minikafka.group.consumer_group import HeartbeatRequest, TopicInfo, owned_from_wire
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group, may_on_topic
from minikafka.server.handlers.find_coordinator import ensure_offsets_topic
from minikafka.server.handlers.offset_commit import COMMIT_TIMEOUT_MS
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.consumer_group_heartbeat import (
    Assignment,
    ConsumerGroupHeartbeatRequestView,
    ConsumerGroupHeartbeatResponse,
)


def _refused(error: ErrorCode, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
    return {"throttle_time_ms": 0, "error_code": error, "error_message": message, "member_id": None,
            "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}


async def handle(request: Request[ConsumerGroupHeartbeatRequestView],
                 ctx: BrokerContext) -> ConsumerGroupHeartbeatResponse:
    body = request.body
    if not may_on_group(ctx, AclOperation.READ, body.group_id):
        return _refused(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    names = body.subscribed_topic_names or []
    if any(not may_on_topic(ctx, AclOperation.DESCRIBE, name) for name in names):
        return _refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
    await ensure_offsets_topic(ctx)
    topics = {name: TopicInfo(state.topic_id, name, len(state.partitions))
              for name, state in ctx.metadata.topics().items()
              if body.subscribed_topic_regex is None or may_on_topic(ctx, AclOperation.DESCRIBE, name)}
    result = ctx.groups.consumer_groups.heartbeat(HeartbeatRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        subscribed_topic_names=None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names),
        subscribed_topic_regex=body.subscribed_topic_regex,
        server_assignor=body.server_assignor,
        owned=owned_from_wire(body.topic_partitions),
        client_id=request.header.client_id or "",
        client_host="/" + ctx.client_host,
        api_version=request.api_version,
    ), topics)
    if result.error != ErrorCode.NONE:
        return _refused(result.error, result.message)
    # What the member is told must survive a failover of the coordinator: wait for the ISR.
    replicated = await ctx.groups.store.replicated(ctx.groups.partition_for(body.group_id), COMMIT_TIMEOUT_MS)
    if replicated != ErrorCode.NONE:
        return _refused(replicated)
    assignment: Assignment | None = None if result.assignment is None else {"topic_partitions": [
        {"topic_id": topic, "partitions": sorted(parts)} for topic, parts in result.assignment.items()]}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "member_id": result.member_id, "member_epoch": result.member_epoch,
            "heartbeat_interval_ms": result.heartbeat_interval_ms, "assignment": assignment}
