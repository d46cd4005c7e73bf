"""Metadata: brokers, controller, and the leader, replicas and ISR of every partition asked for."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from minikafka.controller.embedded import INTERNAL_TOPICS, topic_name_error
from minikafka.controller.metadata_store import NO_LEADER, PartitionState, TopicState
from minikafka.server.context import BrokerContext
from protocol import Request
from protocol.errors import ErrorCode

API_KEY = 3
ZERO_UUID = uuid.UUID(int=0)


OfflineReplicas = Callable[[str, int], list[int]]


def describe_topic(topic: TopicState, offline_replicas: OfflineReplicas | None = None) -> dict[str, Any]:
    """The topic's metadata; ``offline_replicas(topic, partition)`` names the brokers whose
    replica is on a failed log dir (none when not given)."""
    return {
        "error_code": ErrorCode.NONE,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.name in INTERNAL_TOPICS,
        "partitions": [
            _describe_partition(index, state, offline_replicas(topic.name, index) if offline_replicas else [])
            for index, state in sorted(topic.partitions.items())
        ],
    }


def _describe_partition(index: int, state: PartitionState, offline: list[int]) -> dict[str, Any]:
    # An offline leader is no leader: clients see what Kafka shows for a partition whose only
    # replica is gone (LEADER_NOT_AVAILABLE, leader -1, the ISR as last known).
    leader = NO_LEADER if state.leader in offline else state.leader
    return {
        "error_code": ErrorCode.LEADER_NOT_AVAILABLE if leader == NO_LEADER else ErrorCode.NONE,
        "partition_index": index,
        "leader_id": leader,
        "leader_epoch": state.leader_epoch,
        "replica_nodes": state.replicas,
        "isr_nodes": state.isr,
        "offline_replicas": offline,
    }


def local_offline_replicas(ctx: BrokerContext) -> OfflineReplicas:
    """offline_replicas for describe_topic: this broker, when its replica is offline."""
    replica_manager, broker = ctx.replica_manager, [ctx.broker_id]
    return lambda topic, index: broker if replica_manager.is_offline(topic, index) else []


def _missing_topic(name: str | None, topic_id: uuid.UUID, error: ErrorCode) -> dict[str, Any]:
    return {"error_code": error, "name": name, "topic_id": topic_id, "is_internal": False, "partitions": []}


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    body = request.body
    controller = ctx.controller
    known = controller.topics()
    # v0: an empty list means every topic; v1+: null means every topic.
    every_topic = body.topics is None or (request.api_version == 0 and not body.topics)
    allow_create = ctx.config["auto.create.topics.enable"] and (
        request.api_version < 4 or body.allow_auto_topic_creation)
    topics: list[dict[str, Any]] = []
    offline = local_offline_replicas(ctx)
    if every_topic:
        topics = [describe_topic(t, offline) for t in known.values()]
    else:
        for requested in body.topics:
            name = requested.name
            topic_id = requested.get("topic_id") or ZERO_UUID
            if name is None:
                by_id = controller.topic_by_id(topic_id)
                topics.append(describe_topic(by_id, offline) if by_id is not None
                              else _missing_topic(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            topic = known.get(name)
            if topic is None:
                if topic_name_error(name) is not None:
                    topics.append(_missing_topic(name, ZERO_UUID, ErrorCode.INVALID_TOPIC_EXCEPTION))
                    continue
                if allow_create:
                    created = controller.auto_create_topic(name)
                    topic = created.topic
                    if topic is None:
                        topics.append(_missing_topic(name, ZERO_UUID, created.error))
                        continue
                else:
                    topics.append(_missing_topic(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
            topics.append(describe_topic(topic, offline))
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": ctx.broker_id, "host": ctx.host, "port": ctx.port, "rack": None}],
        "cluster_id": controller.cluster_id,
        "controller_id": ctx.broker_id,
        "topics": topics,
        "error_code": ErrorCode.NONE,
    }
