"""SaslHandshake: the client picks a SASL mechanism of its listener (security/session.py)."""

from __future__ import annotations

from typing import Any

from minikafka.server.context import BrokerContext
from protocol import Request


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    return ctx.session.handshake(request)
