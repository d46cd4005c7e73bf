"""AlterClientQuotas (KIP-546): set and remove the client quotas of users, client ids, both, and
their defaults (`kafka-configs --alter --entity-type users|clients`).

Each entry is checked as Kafka checks it (entity types, quota keys, a whole number for a byte
rate) and answered on its own; the quotas are written to the cluster's quota store (ZooKeeper,
with a change notification every broker follows, or the embedded broker's metadata) and are in
force on this broker once the answer is sent."""

from __future__ import annotations

import logging

from minikafka.quota.entity import QuotaError, checked_value, entity_from_wire
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.alter_client_quotas import (
    AlterClientQuotasRequestView,
    AlterClientQuotasResponse,
    RequestEntryDataView,
    ResponseEntryData,
)

log = logging.getLogger(__name__)


async def _alter(entry: RequestEntryDataView, validate_only: bool, ctx: BrokerContext) -> tuple[ErrorCode, str | None]:
    try:
        entity = entity_from_wire((e.entity_type, e.entity_name) for e in entry.entity)
        changes = {op.key: None if op.remove else checked_value(op.key, op.value) for op in entry.ops}
    except QuotaError as exc:
        return ErrorCode.INVALID_REQUEST, str(exc)
    if validate_only:
        return ErrorCode.NONE, None
    await ctx.quota_store.alter(entity, changes)
    ctx.quotas.set_entity(entity, await ctx.quota_store.entity(entity))
    log.info("client quotas of %s changed: %s", entity,
             ", ".join(f"{key}={'(removed)' if value is None else value}" for key, value in changes.items()))
    return ErrorCode.NONE, None


async def handle(request: Request[AlterClientQuotasRequestView], ctx: BrokerContext) -> AlterClientQuotasResponse:
    allowed = ctx.session.allowed_on_cluster(AclOperation.ALTER_CONFIGS)
    entries: list[ResponseEntryData] = []
    for entry in request.body.entries:
        if allowed:
            error, message = await _alter(entry, request.body.validate_only, ctx)
        else:
            error, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        entries.append({"error_code": error, "error_message": message,
                        "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]})
    return {"throttle_time_ms": 0, "entries": entries}
