"""Produce: append record batches to partitions this broker leads."""

from __future__ import annotations

import logging
from typing import Any

from minikafka.replica.replica_manager import ProduceResult, now_ms
from minikafka.server.context import BrokerContext
from protocol import Request
from protocol.errors import ErrorCode

API_KEY = 0
log = logging.getLogger(__name__)


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any] | None:
    body = request.body
    by_id = request.api_version >= 13
    acks = body.acks
    now = now_ms()
    responses = []
    for topic_data in body.topic_data:
        name = _topic_name(topic_data, by_id, ctx)
        partitions = []
        for data in topic_data.partition_data:
            if acks not in (-1, 0, 1):
                result = ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS)
            elif body.transactional_id is not None:
                result = ProduceResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                       error_message="transactions are not supported")
            elif name is None:
                result = ProduceResult(ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                result = ctx.replica_manager.append(name, data.index, data.records, now)
                if result.error not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    log.info("produce to %s-%d refused: %s %s", name, data.index, result.error.name,
                             result.error_message or "")
            partitions.append({
                "index": data.index,
                "error_code": result.error,
                "base_offset": result.base_offset,
                "log_append_time_ms": result.log_append_time_ms,
                "log_start_offset": result.log_start_offset,
                "error_message": result.error_message,
            })
        responses.append({"name": topic_data.get("name"), "topic_id": topic_data.get("topic_id"),
                          "partition_responses": partitions})
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}


def _topic_name(topic_data: Any, by_id: bool, ctx: BrokerContext) -> str | None:
    """The topic's name; auto-creates a topic named by a v0-12 request when the broker allows it."""
    controller = ctx.controller
    if by_id:
        topic = controller.topic_by_id(topic_data.topic_id)
        return topic.name if topic is not None else None
    name = topic_data.name
    if name not in controller.topics() and ctx.config["auto.create.topics.enable"]:
        controller.auto_create_topic(name)
    return name
