"""ListOffsets: earliest, latest, max-timestamp or by-timestamp offsets of partitions; for a
read_committed consumer (isolation_level 1, v2+) the latest is the last stable offset.

Kafka's debugging replica id (-2) may ask any replica, leader or not, and reads past the high
watermark: for it the latest offset is the replica's log end offset, with the latest leader
epoch of its log (-1 for none). The controller asks it of every live replica to choose an
unclean leader (controller/replica_log_ends.py); it needs DESCRIBE on the topic, or to be a broker."""

from __future__ import annotations

from minikafka.replica.replica_manager import LATEST_TIMESTAMP
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import from_a_broker, may_on_topic
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequestView,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)

READ_COMMITTED = 1
DEBUGGING_REPLICA_ID = -2


async def handle(request: Request[ListOffsetsRequestView], ctx: BrokerContext) -> ListOffsetsResponse:
    read_committed = request.api_version >= 2 and request.body.isolation_level == READ_COMMITTED
    debugging = request.body.replica_id == DEBUGGING_REPLICA_ID
    topics: list[ListOffsetsTopicResponse] = []
    for topic in request.body.topics:
        partitions: list[ListOffsetsPartitionResponse] = []
        if not (may_on_topic(ctx, AclOperation.DESCRIBE, topic.name) or debugging and from_a_broker(ctx)):
            topics.append({"name": topic.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                 "timestamp": -1, "offset": -1, "leader_epoch": -1} for p in topic.partitions]})
            continue
        for p in topic.partitions:
            if debugging and p.timestamp == LATEST_TIMESTAMP:
                result = ctx.replica_manager.replica_log_end(topic.name, p.partition_index)
            else:
                result = ctx.replica_manager.list_offset(topic.name, p.partition_index, p.timestamp,
                                                         p.current_leader_epoch, read_committed=read_committed)
            partitions.append({"partition_index": p.partition_index, "error_code": result.error,
                               "timestamp": result.timestamp, "offset": result.offset,
                               "leader_epoch": result.leader_epoch})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
