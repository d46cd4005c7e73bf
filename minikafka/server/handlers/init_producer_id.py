"""InitProducerId: a fresh producer id for an idempotent producer.

Transactions are not supported: a request with a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients report as a fatal, readable error.
"""

from __future__ import annotations

import logging
from typing import Any

from minikafka.security.acl import AclOperation, ResourceType
from minikafka.server.context import BrokerContext
from minikafka.storage.errors import KafkaStorageError
from protocol import Request
from protocol.errors import ErrorCode

API_KEY = 22
log = logging.getLogger(__name__)


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    if request.body.transactional_id is not None:
        log.warning("refused InitProducerId for transactional id %r: transactions are not supported",
                    request.body.transactional_id)
        return {"error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "producer_id": -1, "producer_epoch": -1}
    # IDEMPOTENT_WRITE on the cluster, or (KIP-679) WRITE on some topic.
    if not (ctx.session.allowed_on_cluster(AclOperation.IDEMPOTENT_WRITE)
            or ctx.session.allowed_on_some(AclOperation.WRITE, ResourceType.TOPIC)):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "producer_id": -1, "producer_epoch": -1}
    try:
        producer_id = await ctx.controller.next_producer_id()
    except KafkaStorageError:
        return {"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id, "producer_epoch": 0}
