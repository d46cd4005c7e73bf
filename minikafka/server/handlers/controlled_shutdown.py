"""ControlledShutdown (broker -> controller): move a stopping broker's leaderships elsewhere."""

from __future__ import annotations

import logging

from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import from_a_broker
from minikafka.server.handlers.controller_requests import on_a_broker_listener
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.controlled_shutdown import ControlledShutdownRequestView, ControlledShutdownResponse

log = logging.getLogger(__name__)


async def handle(request: Request[ControlledShutdownRequestView], ctx: BrokerContext
                 ) -> ControlledShutdownResponse:
    body = request.body
    controller = ctx.cluster_controller
    if not on_a_broker_listener(ctx) or not from_a_broker(ctx):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    if controller is None or not controller.active:
        return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
    remaining = await controller.controlled_shutdown(body.broker_id, body.broker_epoch)
    if remaining is None:
        log.warning("refused a controlled shutdown of broker %d (epoch %d): no live broker of that epoch",
                    body.broker_id, body.broker_epoch)
        return {"error_code": ErrorCode.STALE_BROKER_EPOCH, "remaining_partitions": []}
    return {"error_code": ErrorCode.NONE, "remaining_partitions": [
        {"topic_name": topic, "partition_index": index} for topic, index in remaining]}
