"""OffsetForLeaderEpoch: where a leader epoch ended in a partition's log."""

from __future__ import annotations

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import from_a_broker, may_on_topic
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequestView,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)


async def handle(request: Request[OffsetForLeaderEpochRequestView], ctx: BrokerContext
                 ) -> OffsetForLeaderEpochResponse:
    topics: list[OffsetForLeaderTopicResult] = []
    # A follower (replica id >= 0, v3+) needs CLUSTER_ACTION, anyone else DESCRIBE on each topic.
    follower = request.body.replica_id >= 0
    for topic in request.body.topics:
        partitions: list[EpochEndOffset] = []
        allowed = from_a_broker(ctx) if follower else may_on_topic(ctx, AclOperation.DESCRIBE, topic.topic)
        for p in topic.partitions:
            if not allowed:
                partitions.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "partition": p.partition,
                                   "leader_epoch": -1, "end_offset": -1})
                continue
            error, epoch, end_offset = ctx.replica_manager.end_offset_for_epoch(
                topic.topic, p.partition, p.leader_epoch, p.current_leader_epoch)
            partitions.append({"error_code": error, "partition": p.partition, "leader_epoch": epoch,
                               "end_offset": end_offset})
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
