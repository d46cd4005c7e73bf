"""EndTxn: commit or abort a producer's transaction. The coordinator records the decision, answers,
then writes the markers to every partition of the transaction."""

from __future__ import annotations

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.add_partitions_to_txn import fenced_error
from minikafka.server.handlers.authorization import may_on_transactional_id
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.end_txn import EndTxnRequestView, EndTxnResponse


async def handle(request: Request[EndTxnRequestView], ctx: BrokerContext) -> EndTxnResponse:
    body = request.body
    if not may_on_transactional_id(ctx, AclOperation.WRITE, body.transactional_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": body.producer_id, "producer_epoch": body.producer_epoch}
    error = await ctx.txns.end_txn(body.transactional_id, body.producer_id, body.producer_epoch, body.committed,
                                   fenced_error(request.api_version))
    # v5 (KIP-890's second part) gives back the producer's id and epoch: unchanged, as this
    # coordinator bumps no epoch per transaction.
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": body.producer_id,
            "producer_epoch": body.producer_epoch}
