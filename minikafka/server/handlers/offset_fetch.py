"""OffsetFetch: a group's committed offsets; one group (v1-7) or several (v8+), by topic id from v10.
With require_stable (v7+, KIP-447), a partition whose offsets an open transaction committed
answers UNSTABLE_OFFSET_COMMIT until the transaction ends."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from minikafka.group.group import OffsetAndMetadata
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group, may_on_topic
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.offset_fetch import (
    OffsetFetchRequestView,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)

# A requested topic, from either request shape: (name, id from v10, partition indexes).
WantedTopic = tuple[str, uuid.UUID | None, Sequence[int]]
Committed = OffsetAndMetadata | None | ErrorCode


def _partition(index: int, committed: Committed, error: ErrorCode = ErrorCode.NONE) -> OffsetFetchResponsePartitions:
    if isinstance(committed, ErrorCode):
        error = committed
    if committed is None or isinstance(committed, ErrorCode):
        return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                "error_code": error}
    return {"partition_index": index, "committed_offset": committed.offset,
            "committed_leader_epoch": committed.leader_epoch, "metadata": committed.metadata, "error_code": error}


def _answer(name: str, topic_id: uuid.UUID | None, partitions: list[OffsetFetchResponsePartitions]
            ) -> OffsetFetchResponseTopics:
    if topic_id is not None:
        return {"topic_id": topic_id, "partitions": partitions}
    return {"name": name, "partitions": partitions}


def _fetch_group(group_id: str, topics: Sequence[WantedTopic] | None, by_id: bool, require_stable: bool,
                 ctx: BrokerContext, member: tuple[str | None, int] = (None, -1),
                 ) -> tuple[ErrorCode, list[OffsetFetchResponseTopics]]:
    """(group error, topics of the response) for one group; `topics` None means every committed
    one; `member` the (member id, member epoch) of a consumer-protocol member asking (v9+)."""
    if not may_on_group(ctx, AclOperation.DESCRIBE, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, [] if topics is None else [
            _answer(name, topic_id, [_partition(i, None, ErrorCode.GROUP_AUTHORIZATION_FAILED) for i in indexes])
            for name, topic_id, indexes in topics]
    if topics is None:
        error, committed = ctx.groups.fetch_offsets(group_id, None, False, *member)
        by_topic: dict[str, list[OffsetFetchResponsePartitions]] = {}
        for (name, index), om in sorted(committed.items()):
            if may_on_topic(ctx, AclOperation.DESCRIBE, name):  # the others are left out, as in Kafka
                by_topic.setdefault(name, []).append(_partition(index, om))
        known = ctx.metadata.topics()
        result: list[OffsetFetchResponseTopics] = []
        for name, partitions in by_topic.items():
            if by_id:
                state = known.get(name)
                if state is None:
                    continue  # no id to name it by any more
                result.append({"topic_id": state.topic_id, "partitions": partitions})
            else:
                result.append({"name": name, "partitions": partitions})
        return error, result
    resolved: list[tuple[WantedTopic, str | None]] = []
    wanted: list[tuple[str, int]] = []
    for topic in topics:
        name, topic_id, indexes = topic
        topic_name: str | None
        if topic_id is not None:
            found = ctx.metadata.topic_by_id(topic_id)
            topic_name = found.name if found is not None else None
        else:
            topic_name = name
        resolved.append((topic, topic_name))
        if topic_name is not None:
            wanted += [(topic_name, index) for index in indexes]
    error, committed = ctx.groups.fetch_offsets(group_id, wanted, require_stable, *member)
    result = []
    for (name, topic_id, indexes), topic_name in resolved:
        if topic_name is None:
            partitions = [_partition(i, None, ErrorCode.UNKNOWN_TOPIC_ID) for i in indexes]
        elif not may_on_topic(ctx, AclOperation.DESCRIBE, topic_name):
            partitions = [_partition(i, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for i in indexes]
        else:
            partitions = [_partition(i, committed.get((topic_name, i))) for i in indexes]
        result.append(_answer(topic_name or name, topic_id, partitions))
    return error, result


async def handle(request: Request[OffsetFetchRequestView], ctx: BrokerContext) -> OffsetFetchResponse:
    body = request.body
    version = request.api_version
    if version >= 8:
        by_id = version >= 10
        groups: list[OffsetFetchResponseGroup] = []
        for group in body.groups:
            wanted_topics = None if group.topics is None else [
                (t.name, t.topic_id if by_id else None, t.partition_indexes) for t in group.topics]
            member = (group.member_id, group.member_epoch) if version >= 9 else (None, -1)
            error, answers = _fetch_group(group.group_id, wanted_topics, by_id, body.require_stable, ctx, member)
            groups.append({"group_id": group.group_id, "topics": [] if error else answers, "error_code": error})
        return {"throttle_time_ms": 0, "groups": groups}
    wanted_v7 = None if body.topics is None else [(t.name, None, t.partition_indexes) for t in body.topics]
    error, found = _fetch_group(body.group_id, wanted_v7, False, version >= 7 and body.require_stable, ctx)
    # Before v8 a topic is always named.
    topics: list[OffsetFetchResponseTopic] = [{"name": t.get("name", ""), "partitions": t["partitions"]} for t in found]
    if error != ErrorCode.NONE and version < 2:
        # v1 has no request-level error: every partition carries it.
        for topic in found:
            for partition in topic["partitions"]:
                partition["error_code"] = error
        return {"throttle_time_ms": 0, "topics": topics}
    return {"throttle_time_ms": 0, "topics": [] if error else topics, "error_code": error}
