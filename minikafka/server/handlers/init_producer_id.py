"""InitProducerId: a fresh producer id for an idempotent producer; for a transactional one
(a transactional id), its id and a bumped epoch from the transaction coordinator, which fences
every older instance of that transactional id (KIP-98, KIP-360)."""

from __future__ import annotations

import logging

from minikafka.security.acl import AclOperation, ResourceType
from minikafka.server.context import BrokerContext
from minikafka.storage.errors import KafkaStorageError
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.init_producer_id import InitProducerIdRequestView, InitProducerIdResponse

log = logging.getLogger(__name__)


async def handle(request: Request[InitProducerIdRequestView], ctx: BrokerContext) -> InitProducerIdResponse:
    body = request.body
    if request.api_version >= 6 and body.enable2_pc:
        # KIP-939's two-phase commit with an external coordinator is not offered.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "producer_id": -1, "producer_epoch": -1}
    # A transactional producer needs WRITE on its transactional id; an idempotent one
    # IDEMPOTENT_WRITE on the cluster, or (KIP-679) WRITE on some topic.
    if body.transactional_id is not None:
        if not ctx.session.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "producer_id": -1, "producer_epoch": -1}
    elif not (ctx.session.allowed_on_cluster(AclOperation.IDEMPOTENT_WRITE)
              or ctx.session.allowed_on_some(AclOperation.WRITE, ResourceType.TOPIC)):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "producer_id": -1,
                "producer_epoch": -1}
    try:
        if body.transactional_id is not None:
            result = await ctx.txns.init_producer_id(body.transactional_id, body.transaction_timeout_ms,
                                                     body.producer_id, body.producer_epoch)
            return {"throttle_time_ms": 0, "error_code": result.error, "producer_id": result.producer_id,
                    "producer_epoch": result.producer_epoch}
        producer_id = await ctx.controller.next_producer_id()
    except KafkaStorageError as exc:  # the producer id block could not be recorded
        log.error("no producer id for %s: %s", body.transactional_id or "an idempotent producer", exc)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.KAFKA_STORAGE_ERROR, "producer_id": -1,
                "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id, "producer_epoch": 0}
