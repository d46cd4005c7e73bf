"""CreateTopics: new topics with partitions, replication factor and configs."""

from __future__ import annotations

from collections import Counter

from minikafka.controller.api import CreateTopicResult, NewTopic
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_create_topic
from minikafka.topic_config import TOPIC_CONFIGS, describe_topic_config
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.create_topics import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreatableTopicView,
    CreateTopicsRequestView,
    CreateTopicsResponse,
)


async def handle(request: Request[CreateTopicsRequestView], ctx: BrokerContext) -> CreateTopicsResponse:
    body = request.body
    counts = Counter(t.name for t in body.topics)
    # Refused here, or passed on to the controller all together (the slot keeps the request's order).
    slots: list[CreatableTopicResult | NewTopic] = []
    for creatable in body.topics:
        if counts[creatable.name] > 1:
            slots.append({"name": creatable.name, "error_code": ErrorCode.INVALID_REQUEST,
                          "error_message": "Create topics request from client contains a duplicate topic name"})
        elif not may_create_topic(ctx, creatable.name):
            slots.append({"name": creatable.name, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                          "error_message": "Authorization failed."})
        else:
            slots.append(_new_topic(creatable))
    wanted = [slot for slot in slots if isinstance(slot, NewTopic)]
    created = iter(await ctx.controller.create_topics(wanted, body.validate_only, body.timeout_ms) if wanted else [])
    results = [slot if isinstance(slot, dict) else _response(next(created), ctx) for slot in slots]
    return {"throttle_time_ms": 0, "topics": results}


def _new_topic(creatable: CreatableTopicView) -> CreatableTopicResult | NewTopic:
    num_partitions, replication_factor = creatable.num_partitions, creatable.replication_factor
    assignment: dict[int, list[int]] | None = None
    if creatable.assignments:
        if num_partitions != -1 or replication_factor != -1:
            return {"name": creatable.name, "error_code": ErrorCode.INVALID_REQUEST,
                    "error_message": "Both numPartitions or replicationFactor and replicasAssignments were set. "
                                     "Both cannot be used at the same time."}
        assignment = {a.partition_index: list(a.broker_ids) for a in creatable.assignments}
        if sorted(assignment) != list(range(len(creatable.assignments))):
            return {"name": creatable.name, "error_code": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "error_message": "Partitions should be a consecutive 0-based integer sequence"}
    configs = {c.name: c.value for c in creatable.configs}
    return NewTopic(creatable.name, num_partitions, replication_factor, configs, assignment)


def _response(result: CreateTopicResult, ctx: BrokerContext) -> CreatableTopicResult:
    topic = result.topic
    if topic is None:
        return {"name": result.name, "error_code": result.error, "error_message": result.message}
    return {"name": result.name, "error_code": result.error, "error_message": result.message,
            "topic_id": topic.topic_id, "num_partitions": len(topic.partitions),
            "replication_factor": len(topic.partitions[0].replicas),
            "configs": [_config_entry(key, topic.configs, ctx) for key in TOPIC_CONFIGS]}


def _config_entry(key: str, topic_configs: dict[str, str], ctx: BrokerContext) -> CreatableTopicConfigs:
    value, source = describe_topic_config(key, topic_configs, ctx.config)
    return {"name": key, "value": value, "read_only": False, "config_source": source, "is_sensitive": False}
