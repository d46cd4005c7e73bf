"""AddOffsetsToTxn: a group's __consumer_offsets partition joins a producer's transaction, so
the offsets the producer then commits for the group (TxnOffsetCommit) end with it."""

from __future__ import annotations

from minikafka.controller.topics import OFFSETS_TOPIC
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.add_partitions_to_txn import fenced_error
from minikafka.server.handlers.authorization import may_on_group, may_on_transactional_id
from minikafka.server.handlers.find_coordinator import ensure_offsets_topic
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.add_offsets_to_txn import AddOffsetsToTxnRequestView, AddOffsetsToTxnResponse


async def handle(request: Request[AddOffsetsToTxnRequestView], ctx: BrokerContext) -> AddOffsetsToTxnResponse:
    body = request.body
    if not may_on_transactional_id(ctx, AclOperation.WRITE, body.transactional_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not may_on_group(ctx, AclOperation.READ, body.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    await ensure_offsets_topic(ctx)
    error = await ctx.txns.add_partitions(body.transactional_id, body.producer_id, body.producer_epoch,
                                          [(OFFSETS_TOPIC, ctx.groups.partition_for(body.group_id))],
                                          fenced_error(request.api_version))
    return {"throttle_time_ms": 0, "error_code": error}
