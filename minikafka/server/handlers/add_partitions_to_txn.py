"""AddPartitionsToTxn: partitions join a producer's transaction at its coordinator (v0-3, from
clients); from v4, several transactions per request, and verify_only asks whether partitions
are already in the transaction (KIP-890: a partition leader's check before it takes a
transaction's first batch)."""

from __future__ import annotations

from collections.abc import Sequence

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import from_a_broker, may_on_topic, may_on_transactional_id
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequestView,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
    AddPartitionsToTxnTopicView,
)

TopicPartition = tuple[str, int]


def fenced_error(version: int) -> ErrorCode:
    """What a fenced producer is told: PRODUCER_FENCED from v2 (KIP-588), before it
    INVALID_PRODUCER_EPOCH, which older clients know."""
    return ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "partition_error_code": error})
    return [{"name": name, "results_by_partition": results} for name, results in by_topic.items()]


async def _add(ctx: BrokerContext, transactional_id: str, producer_id: int, epoch: int,
               topics: Sequence[AddPartitionsToTxnTopicView],
               verify_only: bool, fenced: ErrorCode) -> dict[TopicPartition, ErrorCode]:
    wanted = [(topic.name, index) for topic in topics for index in topic.partitions]
    if not verify_only:
        # Kafka's checks: WRITE on the transactional id, then on each topic; nothing is added
        # unless everything may be.
        if not may_on_transactional_id(ctx, AclOperation.WRITE, transactional_id):
            return dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        denied = {tp for tp in wanted if not may_on_topic(ctx, AclOperation.WRITE, tp[0])}
        if denied:
            return {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp in denied else ErrorCode.OPERATION_NOT_ATTEMPTED
                    for tp in wanted}
    unknown = {tp for tp in wanted if ctx.metadata.partition(*tp) is None}
    if verify_only:
        return ctx.txns.verify(transactional_id, producer_id, epoch, wanted)
    if unknown:  # nothing is added unless everything can be
        return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in wanted}
    error = await ctx.txns.add_partitions(transactional_id, producer_id, epoch, wanted, fenced)
    return dict.fromkeys(wanted, error)


async def handle(request: Request[AddPartitionsToTxnRequestView], ctx: BrokerContext
                 ) -> AddPartitionsToTxnResponse:
    body = request.body
    version = request.api_version
    fenced = fenced_error(version)
    if version <= 3:
        errors = await _add(ctx, body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                            body.v3_and_below_producer_epoch, body.v3_and_below_topics, False, fenced)
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _topic_results(errors)}
    if not from_a_broker(ctx):  # v4+ comes from partition leaders verifying (KIP-890)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results_by_transaction": []}
    results: list[AddPartitionsToTxnResult] = []
    for txn in body.transactions:
        errors = await _add(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                            txn.verify_only, fenced)
        results.append({"transactional_id": txn.transactional_id, "topic_results": _topic_results(errors)})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": results}
