"""ElectLeaders: give partitions back to their preferred (first) replica, through any broker.

The controller decides; a broker that is not the controller forwards the request to it on
the inter-broker listener and relays its answer."""

from __future__ import annotations

import logging
from typing import Any

from minikafka.net.client import BrokerClient, BrokerUnreachable
from minikafka.server.context import BrokerContext
from protocol import Request
from protocol.errors import ErrorCode

API_KEY = 43
PREFERRED, UNCLEAN = 0, 1
log = logging.getLogger(__name__)


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    body = request.body
    wanted = None if body.topic_partitions is None else [
        (t.topic, p) for t in body.topic_partitions for p in t.partitions]
    election = body.get("election_type", PREFERRED)
    if election != PREFERRED:
        return _answer(wanted or [], (ErrorCode.INVALID_REQUEST, "only preferred leader election is served"))
    controller = ctx.cluster_controller
    if controller is None:
        # The embedded broker is the only replica of everything: it is every preferred leader.
        return _answer(wanted or [], (ErrorCode.ELECTION_NOT_NEEDED, "the only replica leads already"))
    if controller.active:
        results = await controller.elect_preferred(wanted)
        return _respond(results)
    return await _forward(request, ctx, wanted)


def _answer(wanted: list[tuple[str, int]], outcome: tuple[ErrorCode, str | None]) -> dict[str, Any]:
    return _respond(dict.fromkeys(wanted, outcome))


def _respond(results: dict[tuple[str, int], tuple[ErrorCode, str | None]]) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), (error, message) in sorted(results.items()):
        by_topic.setdefault(topic, []).append({"partition_id": index, "error_code": error, "error_message": message})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "replica_election_results": [
        {"topic": topic, "partition_result": partitions} for topic, partitions in by_topic.items()]}


async def _forward(request: Request, ctx: BrokerContext, wanted: list[tuple[str, int]] | None) -> dict[str, Any]:
    controller = ctx.metadata.broker(ctx.metadata.controller_id, ctx.inter_broker_listener)
    if controller is None:
        return _answer(wanted or [], (ErrorCode.NOT_CONTROLLER, "no controller is known yet"))
    client = BrokerClient(controller.host, controller.port, client_id=f"broker-{ctx.broker_id}")
    topics: dict[str, list[int]] = {}
    for topic, index in wanted or []:
        topics.setdefault(topic, []).append(index)
    try:
        response = await client.request(API_KEY, request.api_version, {
            "election_type": PREFERRED, "timeout_ms": request.body.timeout_ms,
            "topic_partitions": None if wanted is None else [
                {"topic": t, "partitions": ps} for t, ps in topics.items()]}, request.body.timeout_ms / 1000)
    except BrokerUnreachable as exc:
        log.warning("could not forward ElectLeaders to controller %d: %s", controller.broker_id, exc)
        return _answer(wanted or [], (ErrorCode.NOT_CONTROLLER, "the controller did not answer"))
    finally:
        client.close()
    return {"throttle_time_ms": 0, "error_code": response.get("error_code", ErrorCode.NONE),
            "replica_election_results": [
                {"topic": r.topic, "partition_result": [
                    {"partition_id": p.partition_id, "error_code": p.error_code, "error_message": p.error_message}
                    for p in r.partition_result]}
                for r in response.replica_election_results]}
