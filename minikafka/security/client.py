"""How this broker connects to other brokers: TLS, and a SASL login on the connection.

``ClientSecurity`` is built from the inter-broker listener's settings (manager.py); the
connections to other brokers (net/client.py) open with its TLS context and run ``login`` before
their first request, and again before their session expires (KIP-368).
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from minikafka.security.sasl import SaslLogin
from minikafka.security.scram import ScramError
from protocol import Message

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
# Re-authenticate once this share of the session's lifetime has passed (Kafka's clients: 85-95%).
REAUTHENTICATE_AT = 0.85

Exchange = Callable[[int, int, Mapping[str, Any]], Awaitable[Message]]
# A request to send (api key, version, body); the generator is sent each answer.
LoginSteps = Generator[tuple[int, int, Mapping[str, Any]], Message, int]


class SaslLoginFailed(ConnectionError):
    """The other broker refused this broker's credentials (or did not prove it knew them)."""


@dataclass(frozen=True)
class ClientSecurity:
    tls: ssl.SSLContext | None = None
    login: SaslLogin | None = None

    def connect_arguments(self, host: str) -> dict[str, Any]:
        """asyncio.open_connection's TLS arguments for a broker at ``host``."""
        return {} if self.tls is None else {"ssl": self.tls, "server_hostname": host}


PLAINTEXT_CLIENT = ClientSecurity()


async def login(exchange: Exchange, credentials: SaslLogin) -> int:
    """Authenticate on a connection (SaslHandshake v1, then SaslAuthenticate); the session's
    lifetime in ms (0: it does not expire)."""
    steps = login_steps(credentials)
    try:
        request = next(steps)
        while True:
            request = steps.send(await exchange(*request))
    except StopIteration as done:
        return int(done.value)


def login_steps(credentials: SaslLogin) -> LoginSteps:
    """The requests of a login, each given its answer (sans-IO: blocking and asyncio clients
    drive it); returns the session's lifetime in ms."""
    handshake = yield SASL_HANDSHAKE, 1, {"mechanism": credentials.mechanism}
    if handshake.error_code:
        raise SaslLoginFailed(f"SASL mechanism {credentials.mechanism} refused (error {handshake.error_code}; the "
                              f"listener enables {', '.join(handshake.mechanisms)})")
    tokens = credentials.tokens()
    token: bytes | None = tokens.first()
    lifetime = 0
    while token is not None:
        answer = yield SASL_AUTHENTICATE, 1, {"auth_bytes": token}
        if answer.error_code:
            raise SaslLoginFailed(f"authentication of {credentials.username} ({credentials.mechanism}) failed: "
                                  f"{answer.error_message}")
        lifetime = answer.session_lifetime_ms
        try:
            token = tokens.next(bytes(answer.auth_bytes))
        except ScramError as exc:
            raise SaslLoginFailed(str(exc)) from None
    return int(lifetime)
