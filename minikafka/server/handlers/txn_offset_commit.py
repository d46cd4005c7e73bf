"""TxnOffsetCommit: a transactional producer commits a group's offsets as part of its
transaction (the group's partition joined it with AddOffsetsToTxn); they count once the
transaction commits. From v3, with the consumer's group metadata, checked like a member's
commit (KIP-447)."""

from __future__ import annotations

from minikafka.coordinator_topic import TxnProducer
from minikafka.group.coordinator import CommitEntry
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group, may_on_topic, may_on_transactional_id
from minikafka.server.handlers.offset_commit import wait_replicated
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.txn_offset_commit import TxnOffsetCommitRequestView, TxnOffsetCommitResponse


async def handle(request: Request[TxnOffsetCommitRequestView], ctx: BrokerContext) -> TxnOffsetCommitResponse:
    body = request.body
    errors: dict[tuple[str, int], ErrorCode] = {}
    wanted: dict[tuple[str, int], CommitEntry] = {}
    # Kafka's checks: WRITE on the transactional id, READ on the group, READ on each topic.
    denied = None
    if not may_on_transactional_id(ctx, AclOperation.WRITE, body.transactional_id):
        denied = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not may_on_group(ctx, AclOperation.READ, body.group_id):
        denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
    for topic in body.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            if denied is not None:
                errors[key] = denied
            elif not may_on_topic(ctx, AclOperation.READ, topic.name):
                errors[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif ctx.metadata.partition(*key) is None:
                errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted[key] = CommitEntry(p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
    if wanted:
        errors.update(ctx.groups.commit_offsets(
            body.group_id, body.generation_id, body.member_id, body.group_instance_id, wanted,
            unknown_group_error=ErrorCode.ILLEGAL_GENERATION, txn=TxnProducer(body.producer_id, body.producer_epoch)))
        await wait_replicated(ctx, body.group_id, errors, wanted)
    return {"throttle_time_ms": 0, "topics": [
        {"name": topic.name, "partitions": [{"partition_index": p.partition_index,
                                             "error_code": errors[(topic.name, p.partition_index)]}
                                            for p in topic.partitions]}
        for topic in body.topics]}
