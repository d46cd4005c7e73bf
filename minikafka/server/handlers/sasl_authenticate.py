"""SaslAuthenticate: one token of the SASL exchange (security/session.py)."""

from __future__ import annotations

from minikafka.server.context import BrokerContext
from protocol import Request
from protocol.typed.sasl_authenticate import SaslAuthenticateRequestView, SaslAuthenticateResponse


async def handle(request: Request[SaslAuthenticateRequestView], ctx: BrokerContext
                 ) -> SaslAuthenticateResponse:
    return await ctx.session.authenticate(request)
