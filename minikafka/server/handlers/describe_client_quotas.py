"""DescribeClientQuotas (KIP-546): the client quotas that match a filter.

minikafka enforces no client quotas and offers no AlterClientQuotas, so no user, client id or IP
ever has one: a valid filter matches nothing, as it does on a Kafka cluster where no quota was
set. Kafka's tools ask for quotas before anything else about a user (`kafka-configs --describe
--entity-type users` shows quotas and then SCRAM credentials), so without this API they could
not describe users at all. The filter is still checked as Kafka checks it, so a wrong one is
refused with the reason, not answered with nothing."""

from __future__ import annotations

from collections.abc import Sequence

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.describe_client_quotas import (
    DescribeClientQuotasRequestView,
    DescribeClientQuotasResponse,
)

ENTITY_TYPES = ("user", "client-id", "ip")
# Kafka's ClientQuotaFilterComponent: a named entity, the default entity, any entity of the type.
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def filter_error(components: Sequence[tuple[str, int, str | None]]) -> str | None:
    """Why Kafka would refuse this filter ((entity type, match type, match) per component), or None."""
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


async def handle(request: Request[DescribeClientQuotasRequestView], ctx: BrokerContext
                 ) -> DescribeClientQuotasResponse:
    if not ctx.session.allowed_on_cluster(AclOperation.DESCRIBE_CONFIGS):
        return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    components = [(c.entity_type, c.match_type, c.match) for c in request.body.components]
    error = filter_error(components)
    if error is not None:
        return _refused(ErrorCode.INVALID_REQUEST, error)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": []}


def _refused(error: ErrorCode, message: str) -> DescribeClientQuotasResponse:
    return {"throttle_time_ms": 0, "error_code": error, "error_message": message, "entries": None}
