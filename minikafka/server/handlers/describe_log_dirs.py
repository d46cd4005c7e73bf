"""DescribeLogDirs: every log dir of this broker with its replicas, future replicas and room.

Answered as Apache Kafka answers it: each configured dir (absolute path), an offline one with
KAFKA_STORAGE_ERROR and nothing else; per replica its size, its offset lag (0 for a current
replica here, where the high watermark follows the log end; for a future replica, how far it
is behind the current one) and whether it is a future replica; from v4 the total and usable
bytes of the dir's file system.  From v2, the entry of a replica whose last move failed also
carries the reason in a private tagged field (LogDirMover.MOVE_ERROR_TAG) that Kafka's clients
skip and ``minikafka log-dirs`` shows; and each live dir says which file system it is on
(FILE_SYSTEM_TAG), so that ``minikafka log-dirs --balance`` plans as the broker's disk balancer
does: dirs on one file system share its bytes.
"""

from __future__ import annotations

from collections import defaultdict

from minikafka.replica.log_dir_mover import MOVE_ERROR_TAG
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.storage.errors import KafkaStorageError
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequestView,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
)

# Private tagged field of a DescribeLogDirs v2+ result: an id of the dir's file system (its
# device number, as text); dirs with the same id share one file system.
FILE_SYSTEM_TAG = 10_001

Wanted = dict[str, set[int]] | None


class _TaggedPartition(DescribeLogDirsPartition, total=False):
    _unknown_tagged_fields: dict[int, bytes]  # MOVE_ERROR_TAG, v2+


class _TaggedResult(DescribeLogDirsResult, total=False):
    _unknown_tagged_fields: dict[int, bytes]  # FILE_SYSTEM_TAG, v2+


async def handle(request: Request[DescribeLogDirsRequestView], ctx: BrokerContext) -> DescribeLogDirsResponse:
    topics = request.body.topics
    if not ctx.session.allowed_on_cluster(AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    wanted: Wanted = None if topics is None else defaultdict(set)
    for topic in topics or []:
        wanted[topic.topic].update(topic.partitions)  # type: ignore[index]
    tagged = request.api_version >= 2
    results = [describe_dir(log_dir, ctx, wanted, tagged) for log_dir in ctx.log_manager.log_dirs]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


def describe_dir(log_dir: str, ctx: BrokerContext, wanted: Wanted, tagged: bool) -> DescribeLogDirsResult:
    manager = ctx.log_manager
    offline: DescribeLogDirsResult = {"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "log_dir": log_dir, "topics": [],
               "total_bytes": -1, "usable_bytes": -1}
    if log_dir not in manager.live_dirs:
        return offline
    try:
        usage = manager.dir_usage(log_dir)
        file_system = manager.file_system_of(log_dir)
    except KafkaStorageError:
        return offline
    failures = ctx.mover.failures
    by_topic: dict[str, list[DescribeLogDirsPartition]] = defaultdict(list)
    for (topic, index), log in list(manager.logs.items()):
        if log.log_dir != log_dir or not _selected(wanted, topic, index):
            continue
        entry: _TaggedPartition = {"partition_index": index, "partition_size": log.size_bytes,
                                 "offset_lag": max(log.high_watermark - log.log_end_offset, 0),
                                 "is_future_key": False}
        failure = failures.get((topic, index))
        if tagged and failure is not None:
            entry["_unknown_tagged_fields"] = {
                MOVE_ERROR_TAG: f"the move to {failure.dest_dir} failed: {failure.reason}".encode()}
        by_topic[topic].append(entry)
    for (topic, index), future in list(manager.future_logs.items()):
        if future.log_dir != log_dir or not _selected(wanted, topic, index):
            continue
        current = manager.logs.get((topic, index))
        lag = max(current.log_end_offset - future.log_end_offset, 0) if current is not None else -1
        by_topic[topic].append({"partition_index": index, "partition_size": future.size_bytes,
                                "offset_lag": lag, "is_future_key": True})
    result: _TaggedResult = {
        "error_code": ErrorCode.NONE,
        "log_dir": log_dir,
        "topics": [{"name": topic, "partitions": sorted(entries, key=lambda e: e["partition_index"])}
                   for topic, entries in sorted(by_topic.items())],
        "total_bytes": usage.total_bytes,
        "usable_bytes": usage.usable_bytes,
    }
    if tagged:
        result["_unknown_tagged_fields"] = {FILE_SYSTEM_TAG: str(file_system).encode()}
    return result


def _selected(wanted: Wanted, topic: str, index: int) -> bool:
    return wanted is None or index in wanted.get(topic, ())
