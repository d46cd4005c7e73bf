"""Produce: append record batches to partitions this broker leads."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from minikafka.replica.replica_manager import ProduceResult, now_ms
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_create_topic, may_on_topic
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
    replicating: list[Awaitable[None]] = []
    layout: list[tuple[Any, list[tuple[int, ProduceResult]]]] = []
    names: list[str | None] = []
    for topic_data in body.topic_data:
        name = await _topic_name(topic_data, by_id, ctx)
        names.append(name)
        writable = name is not None and may_on_topic(ctx, AclOperation.WRITE, name)
        partitions: list[tuple[int, ProduceResult]] = []
        for data in topic_data.partition_data:
            if acks not in (-1, 0, 1):
                result = ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS)
            elif name is not None and not writable:
                result = ProduceResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif body.transactional_id is not None:
                result = ProduceResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                       error_message="transactions are not supported")
            elif name is None:
                result = ProduceResult(ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                result = ctx.replica_manager.append(name, data.index, data.records, now, acks=acks)
                if result.error not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    log.info("produce to %s-%d refused: %s %s", name, data.index, result.error.name,
                             result.error_message or "")
                elif result.error == ErrorCode.NONE and acks == -1:
                    replicating.append(ctx.replica_manager.wait_for_replication(name, data.index, result,
                                                                                body.timeout_ms))
            partitions.append((data.index, result))
        layout.append((topic_data, partitions))
    if replicating:
        await asyncio.gather(*replicating)
    if acks == 0:
        return None
    leaders: set[int] = set()
    for (topic_data, partitions), name in zip(layout, names, strict=True):
        answers = []
        for index, result in partitions:
            answer: dict[str, Any] = {
                "index": index,
                "error_code": result.error,
                "base_offset": result.base_offset if result.error == ErrorCode.NONE else -1,
                "log_append_time_ms": result.log_append_time_ms,
                "log_start_offset": result.log_start_offset,
                "error_message": result.error_message,
                "record_errors": [{"batch_index": index, "batch_index_error_message": why}
                                  for index, why in result.record_errors],
            }
            # KIP-951: tell the client where the partition went, so it need not ask Metadata first.
            state = ctx.metadata.partition(name, index) if result.error == ErrorCode.NOT_LEADER_OR_FOLLOWER \
                and name is not None else None
            if state is not None and state.available:
                answer["current_leader"] = {"leader_id": state.leader, "leader_epoch": state.leader_epoch}
                leaders.add(state.leader)
            answers.append(answer)
        responses.append({"name": topic_data.get("name"), "topic_id": topic_data.get("topic_id"),
                          "partition_responses": answers})
    endpoints = [ctx.metadata.broker(b, ctx.listener_name) for b in sorted(leaders)]
    return {"responses": responses, "throttle_time_ms": 0, "node_endpoints": [
        {"node_id": e.broker_id, "host": e.host, "port": e.port, "rack": e.rack} for e in endpoints if e is not None]}


async def _topic_name(topic_data: Any, by_id: bool, ctx: BrokerContext) -> str | None:
    """The topic's name; auto-creates a topic named by a v0-12 request when the broker allows it."""
    if by_id:
        topic = ctx.metadata.topic_by_id(topic_data.topic_id)
        return topic.name if topic is not None else None
    name = topic_data.name
    if ctx.metadata.topic(name) is None and ctx.config["auto.create.topics.enable"] and may_create_topic(ctx, name):
        await ctx.controller.auto_create_topic(name)
    return name
