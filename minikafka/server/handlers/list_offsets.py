"""ListOffsets: earliest, latest, max-timestamp or by-timestamp offsets of partitions; for a
read_committed consumer (isolation_level 1, v2+) the latest is the last stable offset."""

from __future__ import annotations

from typing import Any

from minikafka.server.context import BrokerContext
from protocol import Request

API_KEY = 2
READ_COMMITTED = 1


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    read_committed = request.api_version >= 2 and request.body.isolation_level == READ_COMMITTED
    topics = []
    for topic in request.body.topics:
        partitions = []
        for p in topic.partitions:
            result = ctx.replica_manager.list_offset(topic.name, p.partition_index, p.timestamp, p.current_leader_epoch,
                                                     read_committed=read_committed)
            partitions.append({"partition_index": p.partition_index, "error_code": result.error,
                               "timestamp": result.timestamp, "offset": result.offset,
                               "leader_epoch": result.leader_epoch})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
