"""DescribeTransactions: the state of transactional ids this broker coordinates."""

from __future__ import annotations

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_topic, may_on_transactional_id
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.describe_transactions import (
    DescribeTransactionsRequestView,
    DescribeTransactionsResponse,
    TransactionState,
)


def _describe(transactional_id: str, ctx: BrokerContext) -> TransactionState:
    error, found = ctx.txns.describe(transactional_id)
    if not may_on_transactional_id(ctx, AclOperation.DESCRIBE, transactional_id):
        error, found = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    if found is None:
        return {"error_code": error, "transactional_id": transactional_id, "transaction_state": "",
                "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                "producer_epoch": -1, "topics": []}
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(found.partitions):
        if may_on_topic(ctx, AclOperation.DESCRIBE, topic):  # the others are left out, as in Kafka
            by_topic.setdefault(topic, []).append(index)
    return {"error_code": ErrorCode.NONE, "transactional_id": transactional_id,
            "transaction_state": found.state.display_name, "transaction_timeout_ms": found.timeout_ms,
            "transaction_start_time_ms": found.start_ms, "producer_id": found.producer_id,
            "producer_epoch": found.producer_epoch,
            "topics": [{"topic": topic, "partitions": indexes} for topic, indexes in by_topic.items()]}


async def handle(request: Request[DescribeTransactionsRequestView], ctx: BrokerContext
                 ) -> DescribeTransactionsResponse:
    return {"throttle_time_ms": 0,
            "transaction_states": [_describe(t, ctx) for t in request.body.transactional_ids]}
