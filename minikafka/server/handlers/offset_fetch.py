"""OffsetFetch: a group's committed offsets; one group (v1-7) or several (v8+), by topic id from v10.
With require_stable (v7+, KIP-447), a partition whose offsets an open transaction committed
answers UNSTABLE_OFFSET_COMMIT until the transaction ends."""

from __future__ import annotations

from typing import Any

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group, may_on_topic
from protocol import Request
from protocol.errors import ErrorCode


def _partition(index: int, committed: Any, error: ErrorCode = ErrorCode.NONE) -> dict[str, Any]:
    if isinstance(committed, ErrorCode):
        committed, error = None, committed
    if committed is None:
        return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                "error_code": error}
    return {"partition_index": index, "committed_offset": committed.offset,
            "committed_leader_epoch": committed.leader_epoch, "metadata": committed.metadata, "error_code": error}


def _fetch_group(group_id: str, topics: Any, by_id: bool, require_stable: bool,
                 ctx: BrokerContext) -> tuple[ErrorCode, list[dict[str, Any]]]:
    """(group error, topics of the response) for one group; `topics` None means every committed one."""
    if not may_on_group(ctx, AclOperation.DESCRIBE, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, [] if topics is None else [
            {"name": topic.get("name"), "topic_id": topic.get("topic_id"), "partitions": [
                _partition(i, None, ErrorCode.GROUP_AUTHORIZATION_FAILED) for i in topic.partition_indexes]}
            for topic in topics]
    if topics is None:
        error, committed = ctx.groups.fetch_offsets(group_id, None)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (name, index), om in sorted(committed.items()):
            if may_on_topic(ctx, AclOperation.DESCRIBE, name):  # the others are left out, as in Kafka
                by_topic.setdefault(name, []).append(_partition(index, om))
        known = ctx.metadata.topics()
        result = []
        for name, partitions in by_topic.items():
            if by_id:
                state = known.get(name)
                if state is None:
                    continue  # no id to name it by any more
                result.append({"topic_id": state.topic_id, "partitions": partitions})
            else:
                result.append({"name": name, "partitions": partitions})
        return error, result
    resolved: list[tuple[Any, str | None]] = []
    wanted: list[tuple[str, int]] = []
    for topic in topics:
        topic_name: str | None
        if by_id:
            state = ctx.metadata.topic_by_id(topic.topic_id)
            topic_name = state.name if state is not None else None
        else:
            topic_name = topic.name
        resolved.append((topic, topic_name))
        if topic_name is not None:
            wanted += [(topic_name, index) for index in topic.partition_indexes]
    error, committed = ctx.groups.fetch_offsets(group_id, wanted, require_stable)
    result = []
    for topic, topic_name in resolved:
        if topic_name is None:
            partitions = [_partition(i, None, ErrorCode.UNKNOWN_TOPIC_ID) for i in topic.partition_indexes]
        elif not may_on_topic(ctx, AclOperation.DESCRIBE, topic_name):
            partitions = [_partition(i, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for i in topic.partition_indexes]
        else:
            partitions = [_partition(i, committed.get((topic_name, i))) for i in topic.partition_indexes]
        if by_id:
            result.append({"topic_id": topic.topic_id, "partitions": partitions})
        else:
            result.append({"name": topic_name, "partitions": partitions})
    return error, result


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    body = request.body
    version = request.api_version
    if version >= 8:
        groups = []
        for group in body.groups:
            error, topics = _fetch_group(group.group_id, group.topics, version >= 10, body.require_stable, ctx)
            groups.append({"group_id": group.group_id, "topics": [] if error else topics, "error_code": error})
        return {"throttle_time_ms": 0, "groups": groups}
    error, topics = _fetch_group(body.group_id, body.topics, False, version >= 7 and body.require_stable, ctx)
    if error != ErrorCode.NONE and version < 2:
        # v1 has no request-level error: every partition carries it.
        for topic in topics:
            for partition in topic["partitions"]:
                partition["error_code"] = error
        return {"throttle_time_ms": 0, "topics": topics}
    return {"throttle_time_ms": 0, "topics": [] if error else topics, "error_code": error}
