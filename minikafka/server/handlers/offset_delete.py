"""OffsetDelete: forget a group's committed offsets of partitions it does not consume."""

from __future__ import annotations

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group, may_on_topic
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.offset_delete import OffsetDeleteRequestView, OffsetDeleteResponse


async def handle(request: Request[OffsetDeleteRequestView], ctx: BrokerContext) -> OffsetDeleteResponse:
    body = request.body
    if not may_on_group(ctx, AclOperation.DELETE, body.group_id):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0, "topics": []}
    known = ctx.metadata.topics()
    readable = {t.name for t in body.topics if may_on_topic(ctx, AclOperation.READ, t.name)}
    wanted = [(t.name, p.partition_index) for t in body.topics for p in t.partitions
              if t.name in readable and t.name in known and p.partition_index in known[t.name].partitions]
    error, results = ctx.groups.delete_offsets(body.group_id, wanted)
    if error != ErrorCode.NONE:
        return {"error_code": error, "throttle_time_ms": 0, "topics": []}
    return {"error_code": ErrorCode.NONE, "throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": results.get((t.name, p.partition_index), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
             if t.name in readable else ErrorCode.TOPIC_AUTHORIZATION_FAILED}
            for p in t.partitions]}
        for t in body.topics]}
