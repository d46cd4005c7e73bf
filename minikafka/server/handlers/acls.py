"""CreateAcls, DescribeAcls and DeleteAcls: the authorizer's ACL bindings (security/acl.py),
kept by the security store. Creating and deleting need ALTER on the cluster, describing
DESCRIBE; without an authorizer every answer is SECURITY_DISABLED, as in Kafka. One handler per
API: `create`, `describe` and `delete`."""

from __future__ import annotations

import enum
from typing import TypeVar

from minikafka.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from minikafka.server.context import BrokerContext
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.create_acls import AclCreationResult, CreateAclsRequestView, CreateAclsResponse
from protocol.typed.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsFilterView,
    DeleteAclsRequestView,
    DeleteAclsResponse,
)
from protocol.typed.describe_acls import AclDescription, DescribeAclsRequestView, DescribeAclsResponse

NOT_AUTHORIZED = "Not authorized to {} ACLs (Cluster:kafka-cluster)"


WireEnum = TypeVar("WireEnum", bound=enum.IntEnum)


def _enum(kind: type[WireEnum], value: int) -> WireEnum:
    """An enum value of the wire; a number Kafka does not define reads as UNKNOWN."""
    try:
        return kind(value)
    except ValueError:
        return kind["UNKNOWN"]


def binding_filter(wire: DescribeAclsRequestView | DeleteAclsFilterView) -> AclBindingFilter:
    return AclBindingFilter(_enum(ResourceType, wire.resource_type_filter), wire.resource_name_filter,
                            _enum(PatternType, wire.pattern_type_filter), wire.principal_filter, wire.host_filter,
                            _enum(AclOperation, wire.operation), _enum(AclPermissionType, wire.permission_type))


async def create(request: Request[CreateAclsRequestView], ctx: BrokerContext) -> CreateAclsResponse:
    creations = request.body.creations
    if not ctx.session.allowed_on_cluster(AclOperation.ALTER):
        return {"throttle_time_ms": 0, "results": [
            {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": NOT_AUTHORIZED.format("create")}
            for _ in creations]}
    bindings = [AclBinding(ResourcePattern(_enum(ResourceType, c.resource_type), c.resource_name,
                                           _enum(PatternType, c.resource_pattern_type)),
                           AccessControlEntry(c.principal, c.host, _enum(AclOperation, c.operation),
                                              _enum(AclPermissionType, c.permission_type)))
                for c in creations]
    results = await ctx.security.create_acls(bindings)
    answers: list[AclCreationResult] = [{"error_code": error, "error_message": message} for error, message in results]
    return {"throttle_time_ms": 0, "results": answers}


async def describe(request: Request[DescribeAclsRequestView], ctx: BrokerContext) -> DescribeAclsResponse:
    if not ctx.session.allowed_on_cluster(AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": NOT_AUTHORIZED.format("describe"), "resources": []}
    found = ctx.security.describe_acls(binding_filter(request.body))
    resources: dict[ResourcePattern, list[AclDescription]] = {}
    for binding in found.bindings:
        entry = binding.entry
        resources.setdefault(binding.pattern, []).append(
            {"principal": entry.principal, "host": entry.host, "operation": entry.operation,
             "permission_type": entry.permission})
    return {"throttle_time_ms": 0, "error_code": found.error, "error_message": found.message, "resources": [
        {"resource_type": p.resource_type, "resource_name": p.name, "pattern_type": p.pattern_type, "acls": acls}
        for p, acls in resources.items()]}


async def delete(request: Request[DeleteAclsRequestView], ctx: BrokerContext) -> DeleteAclsResponse:
    filters = request.body.filters
    if not ctx.session.allowed_on_cluster(AclOperation.ALTER):
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": NOT_AUTHORIZED.format("delete"),
             "matching_acls": []} for _ in filters]}
    results = await ctx.security.delete_acls([binding_filter(f) for f in filters])
    answers: list[DeleteAclsFilterResult] = [
        {"error_code": r.error, "error_message": r.message, "matching_acls": [
            {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": b.pattern.resource_type,
             "resource_name": b.pattern.name, "pattern_type": b.pattern.pattern_type,
             "principal": b.entry.principal, "host": b.entry.host, "operation": b.entry.operation,
             "permission_type": b.entry.permission} for b in r.bindings]} for r in results]
    return {"throttle_time_ms": 0, "filter_results": answers}
