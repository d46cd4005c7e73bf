"""AlterPartition (broker -> controller): a broker leading a partition proposes its new ISR
(Kafka's and minikafka's brokers from inter.broker.protocol.version 2.7-IV2; below it they
write the state znode themselves)."""

from __future__ import annotations

import uuid

from minikafka.controller.isr_proposals import IsrProposal
from minikafka.controller.zk_controller import AlterPartitionResult
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import from_a_broker
from minikafka.server.handlers.controller_requests import on_a_broker_listener
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.alter_partition import (
    AlterPartitionRequestView,
    AlterPartitionResponse,
    ResponsePartitionData,
    ResponseTopicData,
)


async def handle(request: Request[AlterPartitionRequestView], ctx: BrokerContext) -> AlterPartitionResponse:
    body = request.body
    by_id = request.api_version >= 2
    proposals: dict[tuple[str | uuid.UUID, int], IsrProposal] = {}
    for topic in body.topics:
        key: str | uuid.UUID = topic.topic_id if by_id else topic.topic_name
        for p in topic.partitions:
            if request.api_version >= 3:
                isr = tuple(m.broker_id for m in p.new_isr_with_epochs)
                epochs = {m.broker_id: m.broker_epoch for m in p.new_isr_with_epochs}
            else:
                isr, epochs = tuple(p.new_isr), {}
            proposals[(key, p.partition_index)] = IsrProposal(
                p.leader_epoch, isr, epochs, p.leader_recovery_state, p.partition_epoch)
    controller = ctx.cluster_controller
    results: dict[tuple[str | uuid.UUID, int], AlterPartitionResult] = {}
    if not on_a_broker_listener(ctx) or not from_a_broker(ctx):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif controller is None or not controller.active:
        error = ErrorCode.NOT_CONTROLLER
    else:
        error, results = await controller.alter_partition(body.broker_id, body.broker_epoch, proposals)
    if error != ErrorCode.NONE:
        return {"throttle_time_ms": 0, "error_code": error, "topics": []}
    topics: dict[str | uuid.UUID, list[ResponsePartitionData]] = {}
    for (topic_key, index), (partition_error, record) in results.items():
        if record is None:
            answer: ResponsePartitionData = {"partition_index": index, "error_code": partition_error,
                                             "leader_id": -1, "leader_epoch": -1, "isr": [], "partition_epoch": -1}
        else:
            answer = {"partition_index": index, "error_code": partition_error, "leader_id": record.state.leader,
                      "leader_epoch": record.state.leader_epoch, "isr": list(record.state.isr),
                      "leader_recovery_state": 0, "partition_epoch": record.zk_version}
        topics.setdefault(topic_key, []).append(answer)
    answers: list[ResponseTopicData] = [
        {"topic_id": key, "partitions": ps} if isinstance(key, uuid.UUID) else {"topic_name": key, "partitions": ps}
        for key, ps in topics.items()]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "topics": answers}
