"""AlterReplicaLogDirs: move replicas of this broker to other log dirs (KIP-113).

Per partition, as Apache Kafka answers: LOG_DIR_NOT_FOUND for a path that is not one of the
configured (absolute) log dirs; KAFKA_STORAGE_ERROR for an offline dir or replica; for a
replica this broker does not host, the dir is remembered for when it is created (in the
metadata store, so a restart keeps it) and the answer is REPLICA_NOT_AVAILABLE, or
UNKNOWN_TOPIC_OR_PARTITION when no such partition exists; otherwise NONE, the LogDirMover having
started, redirected or (to the replica's current dir) cancelled its move.  A partition named
twice takes the last dir given.
"""

from __future__ import annotations

import logging
import os

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.log import future_dir_name
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.alter_replica_log_dirs import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsRequestView,
    AlterReplicaLogDirsResponse,
)

MAX_DIR_NAME = 255
log = logging.getLogger(__name__)


async def handle(request: Request[AlterReplicaLogDirsRequestView], ctx: BrokerContext
                 ) -> AlterReplicaLogDirsResponse:
    wanted: dict[tuple[str, int], str] = {}
    for log_dir in request.body.dirs:
        for topic in log_dir.topics:
            for index in topic.partitions:
                wanted.pop((topic.name, index), None)  # the last one given decides
                wanted[(topic.name, index)] = log_dir.path
    by_topic: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    allowed = ctx.session.allowed_on_cluster(AclOperation.ALTER)
    for (name, index), path in wanted.items():
        error = await alter(name, index, path, ctx) if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        by_topic.setdefault(name, []).append({"partition_index": index, "error_code": error})
    return {"throttle_time_ms": 0,
            "results": [{"topic_name": name, "partitions": partitions} for name, partitions in by_topic.items()]}


async def alter(topic: str, index: int, path: str, ctx: BrokerContext) -> ErrorCode:
    manager = ctx.log_manager
    log_dir = os.path.normpath(path) if os.path.isabs(path) else path
    if log_dir not in manager.log_dirs:
        return ErrorCode.LOG_DIR_NOT_FOUND
    if log_dir not in manager.live_dirs:
        return ErrorCode.KAFKA_STORAGE_ERROR
    if len(future_dir_name(topic, index)) > MAX_DIR_NAME:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    replicas = ctx.replica_manager
    if replicas.get_partition(topic, index) is not None:
        return ctx.mover.move(topic, index, log_dir)
    if replicas.is_offline(topic, index):
        return ErrorCode.KAFKA_STORAGE_ERROR
    try:
        await ctx.controller.remember_log_dir(topic, index, log_dir)
    except KafkaStorageError as exc:
        log.error("could not remember %s for %s-%d: %s", log_dir, topic, index, exc)
        return ErrorCode.KAFKA_STORAGE_ERROR
    state = ctx.metadata.topic(topic)
    if state is not None and index in state.partitions:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
