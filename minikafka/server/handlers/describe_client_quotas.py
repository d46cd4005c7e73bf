"""DescribeClientQuotas (KIP-546): the client quotas of the entities that match a filter.

A filter component names an entity type (user, client-id, ip) and matches a name exactly, the
default entity, or any entity of the type (defaults included). An entity matches when every
component matches its part of that type; with `strict` it must have no other part, without it
an entity with more parts matches too (a user filter finds the user's per-client quotas). The
filter is checked as Kafka checks it, so a wrong one is refused with the reason. Kafka's tools ask
for quotas before anything else about a user (`kafka-configs --describe --entity-type users`
shows quotas and then SCRAM credentials). minikafka keeps no IP quotas, so an ip filter matches
nothing."""

from __future__ import annotations

from collections.abc import Sequence

from minikafka.quota.entity import CLIENT_ID, DEFAULT, USER, QuotaEntity
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.describe_client_quotas import (
    DescribeClientQuotasRequestView,
    DescribeClientQuotasResponse,
    EntryData,
)

ENTITY_TYPES = ("user", "client-id", "ip")
# Kafka's ClientQuotaFilterComponent: a named entity, the default entity, any entity of the type.
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
Component = tuple[str, int, str | None]  # (entity type, match type, match)


def filter_error(components: Sequence[Component]) -> str | None:
    """Why Kafka would refuse this filter, or None."""
    seen: set[str] = set()
    for entity_type, match_type, match in components:
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            return f"Unexpected match type: {match_type}"
        if match_type == MATCH_EXACT and match is None:
            return f"The {entity_type} filter component of an exact match needs a name to match"
        if not entity_type:
            return "Unexpected empty filter component entity type"
        if entity_type in seen:
            return f"Duplicate {entity_type} filter component entity type"
        if entity_type not in ENTITY_TYPES:
            return f"Custom entity type '{entity_type}' not supported"
        seen.add(entity_type)
    if "ip" in seen and seen & {"user", "client-id"}:
        return ("Invalid entity filter component combination, IP filter component should not be used "
                "with user or clientId filter component.")
    return None


def matches(entity: QuotaEntity, components: Sequence[Component], strict: bool) -> bool:
    """Whether a (valid) filter matches the entity."""
    by_type = {entity_type: (match_type, match) for entity_type, match_type, match in components}
    if "ip" in by_type:
        return False
    for entity_type, name in ((USER, entity.user), (CLIENT_ID, entity.client_id)):
        wanted = by_type.get(entity_type)
        if wanted is None:
            if name is not None and strict:
                return False
            continue
        match_type, match = wanted
        if name is None or match_type == MATCH_DEFAULT and name != DEFAULT \
                or match_type == MATCH_EXACT and name != match:
            return False
    return True


async def handle(request: Request[DescribeClientQuotasRequestView],
                 ctx: BrokerContext) -> DescribeClientQuotasResponse:
    if not ctx.session.allowed_on_cluster(AclOperation.DESCRIBE_CONFIGS):
        return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    components = [(c.entity_type, c.match_type, c.match) for c in request.body.components]
    error = filter_error(components)
    if error is not None:
        return _refused(ErrorCode.INVALID_REQUEST, error)
    quotas = await ctx.quota_store.all()
    entries: list[EntryData] = [
        {"entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity.wire()],
         "values": [{"key": key, "value": value} for key, value in sorted(values.items())]}
        for entity, values in sorted(quotas.items(), key=lambda found: found[0].path)
        if matches(entity, components, request.body.strict)]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": entries}


def _refused(error: ErrorCode, message: str) -> DescribeClientQuotasResponse:
    return {"throttle_time_ms": 0, "error_code": error, "error_message": message, "entries": None}
