"""CreatePartitions: more partitions for existing topics (never fewer)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from minikafka.server.context import BrokerContext
from protocol import Request
from protocol.errors import ErrorCode

API_KEY = 37


def _create(topic: Any, validate_only: bool, ctx: BrokerContext) -> tuple[ErrorCode, str | None]:
    state = ctx.controller.topics().get(topic.name)
    if state is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic.name}' does not exist."
    current = len(state.partitions)
    if topic.assignments is not None:
        if len(topic.assignments) != topic.count - current:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                f"Increasing the number of partitions by {topic.count - current} but {len(topic.assignments)} "
                "assignments provided.")
        for assignment in topic.assignments:
            if list(assignment.broker_ids) != [ctx.broker_id]:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"Replica assignment {list(assignment.broker_ids)} names brokers other than the only "
                    f"broker {ctx.broker_id}")
    return ctx.controller.create_partitions(topic.name, topic.count, validate_only)


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    body = request.body
    counts = Counter(t.name for t in body.topics)
    results = []
    for topic in body.topics:
        if counts[topic.name] > 1:
            error, message = ErrorCode.INVALID_REQUEST, "Duplicate topic in the request"
        else:
            error, message = _create(topic, body.validate_only, ctx)
        results.append({"name": topic.name, "error_code": error, "error_message": message})
    return {"throttle_time_ms": 0, "results": results}
