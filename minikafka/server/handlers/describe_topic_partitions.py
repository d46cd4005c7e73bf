"""DescribeTopicPartitions (KIP-966): topics and their partitions in name order, paged. Kafka 4's
AdminClient asks it instead of Metadata for `describeTopics` (`kafka-topics --describe`).

A page holds at most `response_partition_limit` partitions (bounded by the broker's own limit,
as Kafka's max.request.partition.size.limit); when partitions are left, `next_cursor` names the
topic and partition the next page starts from, and the client sends it back as `cursor`. With
no topic named, every topic the principal may DESCRIBE is listed and an unknown one cannot
occur; a named topic that does not exist answers UNKNOWN_TOPIC_OR_PARTITION, one the principal
may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED, with no id, as Kafka hides its existence."""

from __future__ import annotations

import uuid

from minikafka.metadata.cache import NO_LEADER, PartitionMetadata, TopicMetadata
from minikafka.metadata.topics import INTERNAL_TOPICS
from minikafka.security.acl import AclOperation, ResourceType
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import authorized_operations, may_on_topic
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequestView,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)

# Kafka's max.request.partition.size.limit default: a client cannot ask for bigger pages.
MAX_PARTITIONS_PER_PAGE = 2000
ZERO_UUID = uuid.UUID(int=0)
TOPIC_OPERATIONS = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                    AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                    AclOperation.ALTER_CONFIGS)


def _partition(index: int, state: PartitionMetadata) -> DescribeTopicPartitionsResponsePartition:
    leader = state.leader if state.available else NO_LEADER
    return {"error_code": ErrorCode.LEADER_NOT_AVAILABLE if leader == NO_LEADER else ErrorCode.NONE,
            "partition_index": index, "leader_id": leader, "leader_epoch": state.leader_epoch,
            "replica_nodes": list(state.replicas), "isr_nodes": list(state.isr),
            # ZooKeeper-mode and embedded clusters have no eligible leader replicas (KIP-966's ELR).
            "eligible_leader_replicas": [], "last_known_elr": [],
            "offline_replicas": list(state.offline_replicas)}


def _without_partitions(name: str, error: ErrorCode) -> DescribeTopicPartitionsResponseTopic:
    return {"error_code": error, "name": name, "topic_id": ZERO_UUID, "is_internal": False, "partitions": []}


def _refused(request: Request[DescribeTopicPartitionsRequestView]) -> DescribeTopicPartitionsResponse:
    """Kafka answers an invalid request (a cursor on a topic not asked for, or on a negative
    partition) with INVALID_REQUEST on every topic named: the response has no message field."""
    return {"throttle_time_ms": 0, "topics": [
        _without_partitions(t.name, ErrorCode.INVALID_REQUEST) for t in request.body.topics], "next_cursor": None}


async def handle(request: Request[DescribeTopicPartitionsRequestView],
                 ctx: BrokerContext) -> DescribeTopicPartitionsResponse:
    body = request.body
    cursor = body.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    every_topic = not body.topics
    known = ctx.metadata.topics()
    names = sorted({name for name in (known if every_topic else (t.name for t in body.topics))
                    if name >= cursor_topic})
    if cursor is not None and (cursor.partition_index < 0 or not every_topic and cursor_topic not in names):
        return _refused(request)
    refused: list[DescribeTopicPartitionsResponseTopic] = []
    allowed = []
    for name in names:
        if may_on_topic(ctx, AclOperation.DESCRIBE, name):
            allowed.append(name)
        elif not every_topic:
            refused.append(_without_partitions(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    remaining = max(min(MAX_PARTITIONS_PER_PAGE, body.response_partition_limit), 1)
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    next_cursor: Cursor | None = None
    for name in allowed:
        if remaining == 0:
            # The previous topic filled the page exactly: the next page starts at this one.
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        topic: TopicMetadata | None = known.get(name)
        if topic is None:
            topics.append(_without_partitions(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        indexes = sorted(i for i in topic.partitions if i >= first)
        page, rest = indexes[:remaining], indexes[remaining:]
        topics.append({"error_code": ErrorCode.NONE, "name": name, "topic_id": topic.topic_id,
                       "is_internal": name in INTERNAL_TOPICS,
                       "partitions": [_partition(i, topic.partitions[i]) for i in page],
                       "topic_authorized_operations": authorized_operations(ctx, ResourceType.TOPIC, name,
                                                                            TOPIC_OPERATIONS)})
        if rest:
            next_cursor = {"topic_name": name, "partition_index": rest[0]}
            break
        remaining -= len(page)
    return {"throttle_time_ms": 0, "topics": topics + refused, "next_cursor": next_cursor}
