"""Kafka's authorization rules that several handlers share. Not a handler (not in HANDLERS)."""

from __future__ import annotations

from minikafka.security.acl import AclOperation, ResourceType
from minikafka.server.context import BrokerContext


def may_create_topic(ctx: BrokerContext, name: str) -> bool:
    """CREATE on the cluster, or on the topic."""
    return ctx.session.allowed_on_cluster(AclOperation.CREATE) or ctx.session.allowed(
        AclOperation.CREATE, ResourceType.TOPIC, name)


def may_on_topic(ctx: BrokerContext, operation: AclOperation, name: str) -> bool:
    return ctx.session.allowed(operation, ResourceType.TOPIC, name)


def may_on_group(ctx: BrokerContext, operation: AclOperation, group_id: str) -> bool:
    return ctx.session.allowed(operation, ResourceType.GROUP, group_id)


def authorized_operations(ctx: BrokerContext, resource_type: ResourceType, name: str,
                          operations: tuple[AclOperation, ...]) -> int:
    """The bit set of ``operations`` the principal may do on a resource (KIP-430)."""
    return sum(1 << op for op in operations if ctx.session.allowed(op, resource_type, name))


def may_on_transactional_id(ctx: BrokerContext, operation: AclOperation, transactional_id: str) -> bool:
    return ctx.session.allowed(operation, ResourceType.TRANSACTIONAL_ID, transactional_id)


def from_a_broker(ctx: BrokerContext) -> bool:
    """A request only brokers send (the controller's, a follower's fetch): CLUSTER_ACTION."""
    return ctx.session.allowed_on_cluster(AclOperation.CLUSTER_ACTION)
