"""AllocateProducerIds (broker -> controller): a broker asks for a block of producer ids
(Kafka's and minikafka's brokers from inter.broker.protocol.version 3.0-IV0; below it they
claim their blocks in ZooKeeper themselves)."""

from __future__ import annotations

from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import from_a_broker
from minikafka.server.handlers.controller_requests import on_a_broker_listener
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.allocate_producer_ids import AllocateProducerIdsRequestView, AllocateProducerIdsResponse


async def handle(request: Request[AllocateProducerIdsRequestView], ctx: BrokerContext
                 ) -> AllocateProducerIdsResponse:
    body = request.body
    controller = ctx.cluster_controller
    block = range(0)
    if not on_a_broker_listener(ctx) or not from_a_broker(ctx):
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif controller is None or not controller.active:
        error = ErrorCode.NOT_CONTROLLER
    else:
        error, block = await controller.allocate_producer_ids(body.broker_id, body.broker_epoch)
    return {"throttle_time_ms": 0, "error_code": error,
            "producer_id_start": block.start if block else -1, "producer_id_len": len(block)}
