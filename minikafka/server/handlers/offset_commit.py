"""OffsetCommit: store a group's committed offsets (topics by name, or by id from v10)."""

from __future__ import annotations

from collections.abc import Iterable

from minikafka.group.coordinator import CommitEntry
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group, may_on_topic
from minikafka.server.handlers.find_coordinator import ensure_offsets_topic
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.offset_commit import (
    OffsetCommitRequestTopicView,
    OffsetCommitRequestView,
    OffsetCommitResponse,
)

# How long a commit waits for the ISR of its __consumer_offsets partition (Kafka's
# offsets.commit.timeout.ms default).
COMMIT_TIMEOUT_MS = 5000


async def wait_replicated(ctx: BrokerContext, group_id: str, errors: dict[tuple[str, int], ErrorCode],
                          written: Iterable[tuple[str, int]]) -> None:
    """Answer the commits written as acks=all: each written partition's error becomes that of
    waiting for the group's __consumer_offsets partition's ISR."""
    written = [key for key in written if errors[key] == ErrorCode.NONE]
    if written:
        replicated = await ctx.groups.store.replicated(ctx.groups.partition_for(group_id), COMMIT_TIMEOUT_MS)
        errors.update(dict.fromkeys(written, replicated))


async def handle(request: Request[OffsetCommitRequestView], ctx: BrokerContext) -> OffsetCommitResponse:
    body = request.body
    version = request.api_version
    by_id = version >= 10
    topics = ctx.metadata.topics()
    errors: dict[tuple[str, int], ErrorCode] = {}
    wanted: dict[tuple[str, int], CommitEntry] = {}
    layout: list[tuple[OffsetCommitRequestTopicView, list[tuple[str, int]]]] = []
    group_allowed = may_on_group(ctx, AclOperation.READ, body.group_id)
    for topic in body.topics:
        state = ctx.metadata.topic_by_id(topic.topic_id) if by_id else topics.get(topic.name)
        name = state.name if state is not None else (None if by_id else topic.name)
        missing = ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        denied = None if group_allowed else ErrorCode.GROUP_AUTHORIZATION_FAILED
        if denied is None and name is not None and not may_on_topic(ctx, AclOperation.READ, name):
            denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        slots: list[tuple[str, int]] = []
        for p in topic.partitions:
            key = (name or "", p.partition_index)
            slots.append(key)
            if denied is not None:
                errors[key] = denied
            elif state is None or p.partition_index not in state.partitions:
                errors[key] = missing if state is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted[key] = CommitEntry(p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
        layout.append((topic, slots))
    if wanted:
        await ensure_offsets_topic(ctx)
        errors.update(ctx.groups.commit_offsets(
            body.group_id, body.generation_id_or_member_epoch, body.member_id, body.group_instance_id, wanted,
            retention_ms=body.retention_time_ms if 2 <= version <= 4 else -1,
            unknown_group_error=ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION))
        await wait_replicated(ctx, body.group_id, errors, wanted)
    return {"throttle_time_ms": 0, "topics": [
        {"name": topic.name, "topic_id": topic.topic_id,
         "partitions": [{"partition_index": index, "error_code": errors[(name, index)]} for name, index in slots]}
        for topic, slots in layout]}
