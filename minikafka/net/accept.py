"""Opening an accepted client connection: its byte stream (plain, or TLS after the handshake) and
its session, with what security/manager.py decides for the listener (the TLS context, the
principal of a client certificate).

Here, above security/, because the stream is transport and security only decides; Kafka's
network layer builds its channels from its security settings the same way.
"""

from __future__ import annotations

import socket

from minikafka.net.streams import ClientStream, PlainStream, TlsStream
from minikafka.security.manager import BrokerSecurity, OpenFailed
from minikafka.security.session import Session


async def open_connection(security: BrokerSecurity, sock: socket.socket, listener: str,
                          client_host: str) -> tuple[ClientStream, Session]:
    """The stream and session of an accepted socket (OpenFailed if it cannot be served;
    TlsHandshakeFailed when its handshake fails)."""
    session = security.session(listener, client_host)
    context = security.tls_context(listener)
    if context is None:
        return PlainStream(sock), session
    tls = await TlsStream.accept(sock, context)
    try:
        security.authenticate_certificate(listener, session, tls.peer_certificate)
    except OpenFailed:
        tls.close()
        raise
    return tls, session
