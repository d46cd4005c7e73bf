"""StopReplica (controller -> broker): stop serving replicas, and delete them when asked
(topic deletion, or a replica moved off this broker)."""

from __future__ import annotations

from minikafka.server.context import BrokerContext
from minikafka.server.controller_commands import StopCommand
from minikafka.server.handlers.controller_requests import refusal
from protocol import Request
from protocol.typed.stop_replica import StopReplicaRequestView, StopReplicaResponse


def _commands(request: Request[StopReplicaRequestView]) -> list[StopCommand]:
    body = request.body
    version = request.api_version
    if version == 0:
        return [StopCommand(p.topic_name, p.partition_index, body.delete_partitions) for p in body.ungrouped_partitions]
    if version <= 2:
        return [StopCommand(t.name, index, body.delete_partitions) for t in body.topics for index in t.partition_indexes]
    return [StopCommand(t.topic_name, p.partition_index, p.delete_partition, p.leader_epoch)
            for t in body.topic_states for p in t.partition_states]


async def handle(request: Request[StopReplicaRequestView], ctx: BrokerContext) -> StopReplicaResponse:
    body = request.body
    commands = _commands(request)
    error = refusal(request.api_key, ctx, body.controller_id, body.controller_epoch, body.broker_epoch)
    if error is not None:
        return {"error_code": error, "partition_errors": [
            {"topic_name": c.topic, "partition_index": c.index, "error_code": error} for c in commands]}
    assert ctx.commands is not None
    results = ctx.commands.stop_replica(commands)
    return {"error_code": 0, "partition_errors": [
        {"topic_name": topic, "partition_index": index, "error_code": code} for (topic, index), code in results.items()]}
