"""Relaying an admin request that only the controller can answer (a broker that is not the
controller forwards it on the inter-broker listener, as Kafka's brokers forward to theirs)."""

from __future__ import annotations

import logging

from minikafka.net.client import BrokerClient, BrokerUnreachable
from minikafka.server.context import BrokerContext
from protocol import Message, Request

log = logging.getLogger(__name__)


async def to_controller(api_key: int, request: Request, ctx: BrokerContext, timeout_s: float) -> Message | None:
    """The controller's answer to ``request`` as received, or None when no controller is
    known or it did not answer."""
    controller = ctx.metadata.broker(ctx.metadata.controller_id, ctx.inter_broker_listener)
    if controller is None:
        return None
    client = BrokerClient(controller.host, controller.port, client_id=f"broker-{ctx.broker_id}",
                          security=ctx.security.client)
    try:
        return await client.request(api_key, request.api_version, request.body, timeout_s)
    except BrokerUnreachable as exc:
        log.warning("could not forward API %d to controller %d: %s", api_key, controller.broker_id, exc)
        return None
    finally:
        client.close()
