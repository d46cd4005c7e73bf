"""OffsetForLeaderEpoch: where a leader epoch ended in a partition's log."""

from __future__ import annotations

from typing import Any

from minikafka.server.context import BrokerContext
from protocol import Request

API_KEY = 23


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    topics = []
    for topic in request.body.topics:
        partitions = []
        for p in topic.partitions:
            error, epoch, end_offset = ctx.replica_manager.end_offset_for_epoch(
                topic.topic, p.partition, p.leader_epoch, p.current_leader_epoch)
            partitions.append({"error_code": error, "partition": p.partition, "leader_epoch": epoch,
                               "end_offset": end_offset})
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
