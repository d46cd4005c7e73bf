"""AlterPartitionReassignments: move partitions' replicas to other brokers, or cancel a move
(KIP-455), through any broker: the controller decides, another broker forwards to it.

The embedded broker is the only broker: its replicas can only stay where they are.
"""

from __future__ import annotations

from typing import cast

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.forward import to_controller
from protocol import ApiKey, Request
from protocol.errors import ErrorCode
from protocol.typed.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequestView,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
)

Outcome = tuple[ErrorCode, str | None]


async def handle(request: Request[AlterPartitionReassignmentsRequestView], ctx: BrokerContext
                 ) -> AlterPartitionReassignmentsResponse:
    body = request.body
    wanted: dict[tuple[str, int], list[int] | None] = {
        (t.name, p.partition_index): p.replicas for t in body.topics for p in t.partitions}
    allow_rf_change = body.get("allow_replication_factor_change", True)
    if not ctx.session.allowed_on_cluster(AclOperation.ALTER):
        denied = _respond(request, {})
        denied["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        denied["error_message"] = "Authorization failed."
        return denied
    controller = ctx.cluster_controller
    if controller is None:
        return _respond(request, {tp: _embedded(tp, target, ctx) for tp, target in wanted.items()})
    if controller.active:
        return _respond(request, await controller.alter_reassignments(wanted, allow_rf_change))
    forwarded = await to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, request, ctx, body.timeout_ms / 1000)
    if forwarded is None:
        return _respond(request, dict.fromkeys(wanted, (ErrorCode.NOT_CONTROLLER, "no controller answered")))
    # The controller answered in this request's version: passed on as it came.
    return cast("AlterPartitionReassignmentsResponse", forwarded)


def _embedded(tp: tuple[str, int], target: list[int] | None, ctx: BrokerContext) -> Outcome:
    topic = ctx.metadata.topic(tp[0])
    if topic is None or tp[1] not in topic.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp[0]}-{tp[1]} does not exist"
    if target is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"{tp[0]}-{tp[1]} is not being reassigned"
    if list(target) != [ctx.broker_id]:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"broker {ctx.broker_id} is the only broker of this cluster"
    return ErrorCode.NONE, None


def _respond(request: Request[AlterPartitionReassignmentsRequestView], results: dict[tuple[str, int], Outcome]
             ) -> AlterPartitionReassignmentsResponse:
    by_topic: dict[str, list[ReassignablePartitionResponse]] = {}
    for (topic, index), (error, message) in results.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": error,
                                               "error_message": message})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "allow_replication_factor_change": request.body.get("allow_replication_factor_change", True),
            "responses": [{"name": topic, "partitions": partitions} for topic, partitions in by_topic.items()]}
