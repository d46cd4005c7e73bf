"""FindCoordinator: a group's coordinator is the leader of its __consumer_offsets partition, a
transactional id's the leader of its __transaction_state partition; either topic is created on
its first lookup."""

from __future__ import annotations

import logging

from minikafka.metadata.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from minikafka.security.acl import AclOperation, ResourceType
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.find_coordinator import Coordinator, FindCoordinatorRequestView, FindCoordinatorResponse

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
log = logging.getLogger(__name__)


# How long the first lookup waits for the coordinator topic it created to be led. Kafka answers
# COORDINATOR_NOT_AVAILABLE at once, and some clients then never retry (librdkafka's
# send_offsets_to_transaction for a group no consumer has joined waits for ever); a few seconds
# is well inside every client's request timeout.
NEW_TOPIC_LEADER_WAIT_S = 5.0


async def ensure_internal_topic(ctx: BrokerContext, topic: str) -> None:
    """Create __consumer_offsets or __transaction_state on first use, as Kafka does, and wait a
    bounded time for its partitions to be led; also when another lookup created it a moment
    before (this broker knows the topic with none of its partitions led yet: answered then,
    the lookup was COORDINATOR_NOT_AVAILABLE, which librdkafka's committed() does not retry)."""
    found = ctx.metadata.topic(topic)
    if found is not None and any(p.available for p in found.partitions.values()):
        return
    if found is None:
        result = await ctx.controller.create_internal_topic(topic)
        if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.error("could not create %s: %s %s", topic, result.error.name, result.message or "")
            return

    def led() -> bool:
        found = ctx.metadata.topic(topic)
        return found is not None and bool(found.partitions) and all(
            p.available for p in found.partitions.values())

    if not await ctx.metadata.wait_until(led, NEW_TOPIC_LEADER_WAIT_S):
        log.warning("%s was created but not all its partitions were led within %.0f s", topic,
                    NEW_TOPIC_LEADER_WAIT_S)


async def ensure_offsets_topic(ctx: BrokerContext) -> None:
    await ensure_internal_topic(ctx, OFFSETS_TOPIC)


def _lookup(key: str, key_type: int, ctx: BrokerContext) -> Coordinator:
    node = None
    message: str | None
    if key_type == GROUP_KEY_TYPE and not may_on_group(ctx, AclOperation.DESCRIBE, key):
        error, message = ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
    elif key_type == TRANSACTION_KEY_TYPE and not ctx.session.allowed(AclOperation.DESCRIBE,
                                                                      ResourceType.TRANSACTIONAL_ID, key):
        error, message = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed."
    elif key_type in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
        coordinator = ctx.groups if key_type == GROUP_KEY_TYPE else ctx.txns
        topic = OFFSETS_TOPIC if key_type == GROUP_KEY_TYPE else TRANSACTION_STATE_TOPIC
        error, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, f"the {topic} partition of {key!r} is unavailable"
        state = ctx.metadata.partition(topic, coordinator.partition_for(key))
        if state is not None and state.available:
            node = ctx.metadata.broker(state.leader, ctx.listener_name)
        if node is not None:
            # The leader as this broker's metadata has it, even itself while its coordinator loads
            # the partition or has just given it up (its ZooKeeper session ended): as Kafka's, the
            # group or transaction request then answers COORDINATOR_LOAD_IN_PROGRESS or
            # NOT_COORDINATOR, which clients follow. A NOT_COORDINATOR here, which Kafka never
            # answers, left librdkafka's send_offsets_to_transaction waiting for ever.
            error, message = ErrorCode.NONE, None
    else:
        error, message = ErrorCode.INVALID_REQUEST, f"unsupported coordinator key type {key_type}"
    if error != ErrorCode.NONE or node is None:
        return {"key": key, "error_code": error, "error_message": message, "node_id": -1, "host": "", "port": -1}
    return {"key": key, "error_code": ErrorCode.NONE, "error_message": None, "node_id": node.broker_id,
            "host": node.host, "port": node.port}


async def handle(request: Request[FindCoordinatorRequestView], ctx: BrokerContext) -> FindCoordinatorResponse:
    body = request.body
    if body.key_type == GROUP_KEY_TYPE:
        await ensure_offsets_topic(ctx)
    elif body.key_type == TRANSACTION_KEY_TYPE:
        await ensure_internal_topic(ctx, TRANSACTION_STATE_TOPIC)
    if request.api_version >= 4:
        return {"throttle_time_ms": 0,
                "coordinators": [_lookup(key, body.key_type, ctx) for key in body.coordinator_keys]}
    found = _lookup(body.key, body.key_type, ctx)
    return {"throttle_time_ms": 0, "error_code": found["error_code"], "error_message": found["error_message"],
            "node_id": found["node_id"], "host": found["host"], "port": found["port"]}
