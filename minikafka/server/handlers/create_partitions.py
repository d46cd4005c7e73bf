"""CreatePartitions: more partitions for existing topics (never fewer)."""

from __future__ import annotations

from collections import Counter

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_topic
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.create_partitions import (
    CreatePartitionsRequestView,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
    CreatePartitionsTopicView,
)


async def _create(topic: CreatePartitionsTopicView, validate_only: bool, ctx: BrokerContext
                  ) -> tuple[ErrorCode, str | None]:
    assignment = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
    return await ctx.controller.create_partitions(topic.name, topic.count, validate_only, assignment)


async def handle(request: Request[CreatePartitionsRequestView], ctx: BrokerContext
                 ) -> CreatePartitionsResponse:
    body = request.body
    counts = Counter(t.name for t in body.topics)
    results: list[CreatePartitionsTopicResult] = []
    for topic in body.topics:
        message: str | None
        if counts[topic.name] > 1:
            error, message = ErrorCode.INVALID_REQUEST, "Duplicate topic in the request"
        elif not may_on_topic(ctx, AclOperation.ALTER, topic.name):
            error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
        else:
            error, message = await _create(topic, body.validate_only, ctx)
        results.append({"name": topic.name, "error_code": error, "error_message": message})
    return {"throttle_time_ms": 0, "results": results}
