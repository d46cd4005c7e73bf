"""AssignReplicasToDirs (broker -> controller, KIP-858): record which log dir holds each of a
broker's replicas."""

from __future__ import annotations

import uuid

from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import from_a_broker
from minikafka.server.handlers.controller_requests import on_a_broker_listener
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.assign_replicas_to_dirs import (
    AssignReplicasToDirsRequestView,
    AssignReplicasToDirsResponse,
    ResponsePartitionData,
)


async def handle(request: Request[AssignReplicasToDirsRequestView], ctx: BrokerContext
                 ) -> AssignReplicasToDirsResponse:
    body = request.body
    controller = ctx.cluster_controller
    assignments = [(topic.topic_id, p.partition_index, directory.id)
                   for directory in body.directories for topic in directory.topics for p in topic.partitions]
    results: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    if not on_a_broker_listener(ctx) or not from_a_broker(ctx):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif controller is None or not controller.active:
        error = ErrorCode.NOT_CONTROLLER
    else:
        error, results = await controller.assign_replicas_to_dirs(body.broker_id, body.broker_epoch, assignments)
    if error != ErrorCode.NONE:
        results = {(topic_id, index): error for topic_id, index, _ in assignments}
    by_dir: dict[uuid.UUID, dict[uuid.UUID, list[ResponsePartitionData]]] = {}
    for topic_id, index, directory in assignments:
        by_dir.setdefault(directory, {}).setdefault(topic_id, []).append(
            {"partition_index": index, "error_code": results.get((topic_id, index), ErrorCode.UNKNOWN_SERVER_ERROR)})
    return {"throttle_time_ms": 0, "error_code": error, "directories": [
        {"id": directory, "topics": [{"topic_id": topic_id, "partitions": partitions}
                                     for topic_id, partitions in topics.items()]}
        for directory, topics in by_dir.items()]}
