"""DeleteRecords: move partitions' log start offsets forward (-1: up to the high watermark)."""

from __future__ import annotations

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_topic
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequestView,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)


async def handle(request: Request[DeleteRecordsRequestView], ctx: BrokerContext) -> DeleteRecordsResponse:
    topics: list[DeleteRecordsTopicResult] = []
    moved = False
    for topic in request.body.topics:
        partitions: list[DeleteRecordsPartitionResult] = []
        allowed = may_on_topic(ctx, AclOperation.DELETE, topic.name)
        for p in topic.partitions:
            if not allowed:
                partitions.append({"partition_index": p.partition_index, "low_watermark": -1,
                                   "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED})
                continue
            error, low_watermark = ctx.replica_manager.delete_records(topic.name, p.partition_index, p.offset)
            moved |= error == ErrorCode.NONE
            partitions.append({"partition_index": p.partition_index, "low_watermark": low_watermark,
                               "error_code": error})
        topics.append({"name": topic.name, "partitions": partitions})
    if moved:
        # The new log start offsets reach the checkpoint files now, not a minute later, so a
        # crash cannot bring deleted records back.
        ctx.log_manager.checkpoint()
    return {"throttle_time_ms": 0, "topics": topics}
