"""ListPartitionReassignments: the reassignments under way (KIP-455), through any broker: the
controller knows them, another broker forwards to it. The embedded broker never moves any."""

from __future__ import annotations

from typing import cast

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.forward import to_controller
from protocol import ApiKey, Request
from protocol.errors import ErrorCode
from protocol.typed.list_partition_reassignments import (
    ListPartitionReassignmentsRequestView,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
)


async def handle(request: Request[ListPartitionReassignmentsRequestView], ctx: BrokerContext
                 ) -> ListPartitionReassignmentsResponse:
    body = request.body
    wanted = None if body.topics is None else [(t.name, p) for t in body.topics for p in t.partition_indexes]
    controller = ctx.cluster_controller
    if not ctx.session.allowed_on_cluster(AclOperation.DESCRIBE):
        return _respond({}, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed.")
    if controller is None:
        return _respond({}, ErrorCode.NONE, None)
    if not controller.active:
        forwarded = await to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, request, ctx, body.timeout_ms / 1000)
        if forwarded is None:
            return _respond({}, ErrorCode.NOT_CONTROLLER, "no controller answered")
        # The controller answered in this request's version: passed on as it came.
        return cast("ListPartitionReassignmentsResponse", forwarded)
    moving = await controller.list_reassignments(wanted)
    if moving is None:
        return _respond({}, ErrorCode.NOT_CONTROLLER, "this broker is no longer the controller")
    by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
    for (topic, index), assignment in sorted(moving.items()):
        by_topic.setdefault(topic, []).append({
            "partition_index": index, "replicas": list(assignment.replicas),
            "adding_replicas": list(assignment.adding), "removing_replicas": list(assignment.removing)})
    return _respond(by_topic, ErrorCode.NONE, None)


def _respond(by_topic: dict[str, list[OngoingPartitionReassignment]], error: ErrorCode, message: str | None
             ) -> ListPartitionReassignmentsResponse:
    return {"throttle_time_ms": 0, "error_code": error, "error_message": message,
            "topics": [{"name": topic, "partitions": partitions} for topic, partitions in by_topic.items()]}
