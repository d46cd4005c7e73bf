"""SaslHandshake: the client picks a SASL mechanism of its listener (security/session.py)."""

from __future__ import annotations

from minikafka.server.context import BrokerContext
from protocol import Request
from protocol.typed.sasl_handshake import SaslHandshakeRequestView, SaslHandshakeResponse


async def handle(request: Request[SaslHandshakeRequestView], ctx: BrokerContext) -> SaslHandshakeResponse:
    return ctx.session.handshake(request)
