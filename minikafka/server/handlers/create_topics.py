"""CreateTopics: new topics with partitions, replication factor and configs."""

from __future__ import annotations

from collections import Counter
from typing import Any

from minikafka.server.context import BrokerContext
from minikafka.topic_config import TOPIC_CONFIGS, describe_topic_config
from protocol import Request
from protocol.errors import ErrorCode

API_KEY = 19


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    body = request.body
    counts = Counter(t.name for t in body.topics)
    results = []
    for creatable in body.topics:
        if counts[creatable.name] > 1:
            results.append({"name": creatable.name, "error_code": ErrorCode.INVALID_REQUEST,
                            "error_message": "Create topics request from client contains a duplicate topic name"})
            continue
        results.append(_create(creatable, body.validate_only, ctx))
    return {"throttle_time_ms": 0, "topics": results}


def _create(creatable: Any, validate_only: bool, ctx: BrokerContext) -> dict[str, Any]:
    num_partitions, replication_factor = creatable.num_partitions, creatable.replication_factor
    if creatable.assignments:
        if num_partitions != -1 or replication_factor != -1:
            return {"name": creatable.name, "error_code": ErrorCode.INVALID_REQUEST,
                    "error_message": "Both numPartitions or replicationFactor and replicasAssignments were set. "
                                     "Both cannot be used at the same time."}
        indexes = sorted(a.partition_index for a in creatable.assignments)
        if indexes != list(range(len(indexes))):
            return {"name": creatable.name, "error_code": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "error_message": "Partitions should be a consecutive 0-based integer sequence"}
        for assignment in creatable.assignments:
            if list(assignment.broker_ids) != [ctx.broker_id]:
                return {"name": creatable.name, "error_code": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        "error_message": f"Replica assignment {list(assignment.broker_ids)} names brokers other "
                                         f"than the only broker {ctx.broker_id}"}
        num_partitions, replication_factor = len(indexes), 1
    configs = {c.name: c.value for c in creatable.configs}
    result = ctx.controller.create_topic(creatable.name, num_partitions, replication_factor, configs, validate_only)
    response: dict[str, Any] = {"name": creatable.name, "error_code": result.error, "error_message": result.message}
    topic = result.topic
    if topic is not None:
        response.update(
            topic_id=topic.topic_id,
            num_partitions=len(topic.partitions),
            replication_factor=len(topic.partitions[0].replicas),
            configs=[_config_entry(key, topic.configs, ctx) for key in TOPIC_CONFIGS],
        )
    return response


def _config_entry(key: str, topic_configs: dict[str, str], ctx: BrokerContext) -> dict[str, Any]:
    value, source = describe_topic_config(key, topic_configs, ctx.config)
    return {"name": key, "value": value, "read_only": False, "config_source": source, "is_sensitive": False}
