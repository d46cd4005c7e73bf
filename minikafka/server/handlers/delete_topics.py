"""DeleteTopics: topics leave the metadata at once; their files are removed in the background."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_topic
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.delete_topics import DeletableTopicResult, DeleteTopicsRequestView, DeleteTopicsResponse

ZERO_UUID = uuid.UUID(int=0)


async def _delete(name: str | None, topic_id: uuid.UUID, ctx: BrokerContext) -> DeletableTopicResult:
    if name is None:
        state = ctx.metadata.topic_by_id(topic_id)
        if state is None:
            return {"name": None, "topic_id": topic_id, "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                    "error_message": f"Topic id {topic_id} does not exist"}
        name = state.name
    if not may_on_topic(ctx, AclOperation.DELETE, name):
        return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                "error_message": "Authorization failed."}
    error, message = await ctx.controller.delete_topic(name)
    if error == ErrorCode.NONE:
        ctx.groups.on_topic_deleted(name)
    return {"name": name, "topic_id": topic_id, "error_code": error, "error_message": message}


async def handle(request: Request[DeleteTopicsRequestView], ctx: BrokerContext) -> DeleteTopicsResponse:
    body = request.body
    if request.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in body.topic_names]
    counts = Counter(name if name is not None else topic_id for name, topic_id in wanted)

    async def refused(name: str | None, topic_id: uuid.UUID, message: str) -> DeletableTopicResult:
        return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.INVALID_REQUEST, "error_message": message}

    answers = []
    for name, topic_id in wanted:
        if counts[name if name is not None else topic_id] > 1:
            answers.append(refused(name, topic_id, "Duplicate topic in the request"))
        elif name is not None and topic_id != ZERO_UUID:
            answers.append(refused(name, topic_id, "A topic is named by its name or by its id, not both"))
        elif name is None and topic_id == ZERO_UUID:
            answers.append(refused(name, topic_id, "Neither a topic name nor a topic id"))
        else:
            answers.append(_delete(name, topic_id, ctx))
    # All at once, as Kafka marks them all and waits for them together: one after the other, each
    # waited for its deletion to finish before the next was even marked (30 topics of 100
    # partitions took 21 s).
    return {"throttle_time_ms": 0, "responses": list(await asyncio.gather(*answers))}
