"""SaslHandshake: the client picks a SASL mechanism of its listener (security/session.py)."""

from __future__ import annotations

from typing import Any

from minikafka.server.context import BrokerContext
from protocol import Request

API_KEY = 17


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    return ctx.session.handshake(request)
