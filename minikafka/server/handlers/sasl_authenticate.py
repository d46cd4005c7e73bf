"""SaslAuthenticate: one token of the SASL exchange (security/session.py)."""

from __future__ import annotations

from typing import Any

from minikafka.server.context import BrokerContext
from protocol import Request


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    return await ctx.session.authenticate(request)
