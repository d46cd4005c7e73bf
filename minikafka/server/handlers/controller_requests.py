"""Who may send the controller's requests (LeaderAndIsr, UpdateMetadata, StopReplica).

Not a handler: the shared gate of those three. They are accepted only by a cluster broker, on
its control-plane listener when it has one (control.plane.listener.name, KIP-291), else on its
inter-broker listener when that is a separate one, from the newest controller epoch it has
heard, and addressed to this registration of the broker or the one it is completing (its broker
epoch, not an earlier one)."""

from __future__ import annotations

import logging

from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import from_a_broker
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# What a control-plane listener serves: the controller's requests, the brokers' requests to the
# controller (Kafka's brokers send ControlledShutdown, AlterPartition, AllocateProducerIds and
# AssignReplicasToDirs to the controller's control-plane listener when one is named), and what a
# connection needs before them (ApiVersions, SASL authentication).
CONTROL_PLANE_APIS = frozenset({4, 5, 6, 7, 56, 67, 73, 17, 18, 36})


def on_a_broker_listener(ctx: BrokerContext) -> bool:
    """Whether the request came on a listener brokers use to reach each other: the inter-broker
    listener, or the control-plane one. A broker's requests to the controller come on either."""
    return ctx.listener_name in (ctx.inter_broker_listener, ctx.control_plane_listener)


def refusal(api_key: int, ctx: BrokerContext, controller_id: int, controller_epoch: int,
            broker_epoch: int) -> ErrorCode | None:
    """None if the request may change this broker, else the error to answer it with."""
    if ctx.commands is None:
        log.warning("refused %s from %s: this embedded broker is its own controller", type_name(api_key),
                    ctx.client_host)
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    expected = ctx.control_plane_listener or ctx.inter_broker_listener
    if ctx.listener_name != expected:
        log.warning("refused %s from %s on listener %s: controller requests come on %s", type_name(api_key),
                    ctx.client_host, ctx.listener_name, expected)
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if not from_a_broker(ctx):
        log.warning("refused %s from %s: %s may not act as a broker (CLUSTER_ACTION on the cluster; brokers "
                    "authenticate as super users)", type_name(api_key), ctx.client_host, ctx.session.principal)
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # The broker epoch (the zxid of this broker's registration) is known only to the controller
    # that read it from ZooKeeper: a request without it is not the controller's, and one for an
    # earlier registration is stale (meant for this broker before it restarted or lost its
    # session). A newer one is this broker's own new registration, which the controller's watch
    # can read before the broker's write returns (at startup, or registering again after its
    # session expired): accepted, as Kafka's brokers do (KafkaApis.isBrokerEpochStale).
    own_epoch = ctx.broker_epoch()
    if broker_epoch < 0:
        log.warning("refused %s of controller %d: it carries no broker epoch", type_name(api_key), controller_id)
        return ErrorCode.STALE_BROKER_EPOCH
    if broker_epoch < own_epoch:
        log.warning("refused %s of controller %d: it was meant for broker epoch %d, an earlier registration of "
                    "this broker (now %d)", type_name(api_key), controller_id, broker_epoch, own_epoch)
        return ErrorCode.STALE_BROKER_EPOCH
    error = ctx.commands.accept(controller_id, controller_epoch)
    return None if error == ErrorCode.NONE else error


def type_name(api_key: int) -> str:
    return {4: "LeaderAndIsr", 5: "StopReplica", 6: "UpdateMetadata"}.get(api_key, str(api_key))
