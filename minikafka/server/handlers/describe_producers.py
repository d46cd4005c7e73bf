"""DescribeProducers (KIP-664): the producers with state on partitions this broker leads, as
`kafka-transactions describe-producers` shows them to find a hanging transaction (one whose
current_txn_start_offset stays put).

As in Kafka, a topic the principal may not READ, an invalid name or an unknown topic answers
every partition asked with that error; otherwise each partition is answered by its leader
(NOT_LEADER_OR_FOLLOWER elsewhere)."""

from __future__ import annotations

from minikafka.controller.topics import topic_name_error
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_topic
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.describe_producers import (
    DescribeProducersRequestView,
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicRequestView,
    TopicResponse,
)


def _topic_error(topic: str, ctx: BrokerContext) -> tuple[ErrorCode, str] | None:
    invalid = topic_name_error(topic)
    if invalid is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, invalid
    if not may_on_topic(ctx, AclOperation.READ, topic):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Not authorized to read topic {topic}"
    if ctx.metadata.topic(topic) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {topic} does not exist"
    return None


def _describe_topic(topic: TopicRequestView, ctx: BrokerContext) -> TopicResponse:
    topic_error = _topic_error(topic.name, ctx)
    partitions: list[PartitionResponse] = []
    for index in topic.partition_indexes:
        if topic_error is not None:
            error, message = topic_error
            partitions.append({"partition_index": index, "error_code": error, "error_message": message,
                               "active_producers": []})
            continue
        producers, error = ctx.replica_manager.active_producers(topic.name, index)
        states: list[ProducerState] = [
            {"producer_id": p.producer_id, "producer_epoch": p.epoch, "last_sequence": p.last_seq,
             "last_timestamp": p.last_timestamp, "coordinator_epoch": p.coordinator_epoch,
             "current_txn_start_offset": p.current_txn_first_offset}
            for p in producers]
        partitions.append({"partition_index": index, "error_code": error,
                           "error_message": None if error == ErrorCode.NONE else f"{topic.name}-{index}: {error.name}",
                           "active_producers": states})
    return {"name": topic.name, "partitions": partitions}


async def handle(request: Request[DescribeProducersRequestView], ctx: BrokerContext) -> DescribeProducersResponse:
    return {"throttle_time_ms": 0, "topics": [_describe_topic(t, ctx) for t in request.body.topics]}
