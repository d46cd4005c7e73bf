"""LeaderAndIsr (controller -> broker): lead or follow partitions as the controller decided."""

from __future__ import annotations

import uuid

from minikafka.server.context import BrokerContext
from minikafka.server.controller_commands import PartitionCommand
from minikafka.server.handlers.controller_requests import refusal
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.leader_and_isr import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrPartitionStateView,
    LeaderAndIsrRequestView,
    LeaderAndIsrResponse,
)

ZERO_UUID = uuid.UUID(int=0)


def _commands(request: Request[LeaderAndIsrRequestView]) -> list[tuple[PartitionCommand, str]]:
    """(command, topic name as the request gave it) for every partition of the request."""
    body = request.body
    version = request.api_version
    found: list[tuple[PartitionCommand, str]] = []
    if version <= 1:
        groups: list[tuple[str, uuid.UUID, list[LeaderAndIsrPartitionStateView]]] = [
            (s.topic_name, ZERO_UUID, [s]) for s in body.ungrouped_partition_states]
    else:
        groups = [(t.topic_name, t.topic_id or ZERO_UUID, t.partition_states) for t in body.topic_states]
    for topic, topic_id, states in groups:
        for s in states:
            found.append((PartitionCommand(
                topic=topic, topic_id=topic_id, index=s.partition_index, leader=s.leader,
                leader_epoch=s.leader_epoch, isr=tuple(s.isr), replicas=tuple(s.replicas),
                partition_epoch=s.partition_epoch, is_new=s.is_new), topic))
    return found


async def handle(request: Request[LeaderAndIsrRequestView], ctx: BrokerContext) -> LeaderAndIsrResponse:
    body = request.body
    commands = _commands(request)
    error = refusal(request.api_key, ctx, body.controller_id, body.controller_epoch, body.broker_epoch)
    if error is None:
        assert ctx.commands is not None
        results = await ctx.commands.leader_and_isr([c for c, _ in commands])
    else:
        results = {(c.topic, c.index): error for c, _ in commands}
    top_error = error if error is not None else ErrorCode.NONE
    if request.api_version <= 4:
        return {"error_code": top_error, "partition_errors": [
            {"topic_name": c.topic, "partition_index": c.index, "error_code": results[(c.topic, c.index)]}
            for c, _ in commands]}
    by_topic: dict[uuid.UUID, list[LeaderAndIsrPartitionError]] = {}
    for c, _ in commands:
        by_topic.setdefault(c.topic_id, []).append(
            {"partition_index": c.index, "error_code": results[(c.topic, c.index)]})
    return {"error_code": top_error, "topics": [
        {"topic_id": topic_id, "partition_errors": errors} for topic_id, errors in by_topic.items()]}
