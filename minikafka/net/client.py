"""A connection from this broker to another one: follower fetches, controller requests.

``BrokerClient`` owns one TCP connection and sends one request at a time (its callers, a
fetcher task or a controller channel, wait for each answer before the next). Any failure
closes the connection and raises ``BrokerUnreachable``; the next request reconnects.
Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
from collections.abc import Mapping
from typing import Any

from minikafka.security.client import PLAINTEXT_CLIENT, REAUTHENTICATE_AT, ClientSecurity, login
from protocol import MalformedResponse, Message, encode_request, parse_response

log = logging.getLogger(__name__)

MAX_RESPONSE_BYTES = 512 * 1024 * 1024


class BrokerUnreachable(Exception):
    """The request did not get an answer (connection refused or lost, timeout, bad frame)."""


class BrokerClient:
    def __init__(self, host: str, port: int, client_id: str, connect_timeout_s: float = 5.0,
                 security: ClientSecurity = PLAINTEXT_CLIENT) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        # The inter-broker listener's TLS and SASL (security/client.py).
        self.security = security
        self._reauthenticate_at: float | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = itertools.count(1)
        self._lock = asyncio.Lock()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def request(self, api_key: int, version: int, body: Mapping[str, Any], timeout_s: float) -> Message:
        async with self._lock:
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation
                # that arrives as the answer does, and a fetcher told to stop would fetch on.
                async with asyncio.timeout(timeout_s):
                    return await self._exchange(api_key, version, body)
            except (TimeoutError, OSError, EOFError, asyncio.IncompleteReadError, MalformedResponse) as exc:
                self.close()
                raise BrokerUnreachable(f"broker at {self.address}: {exc!r}") from exc

    async def _exchange(self, api_key: int, version: int, body: Mapping[str, Any]) -> Message:
        if self._writer is None:
            async with asyncio.timeout(self.connect_timeout_s):
                self._reader, self._writer = await asyncio.open_connection(
                    self.host, self.port, **self.security.connect_arguments(self.host))
                await self._login()
        elif self._reauthenticate_at is not None and asyncio.get_running_loop().time() >= self._reauthenticate_at:
            await self._login()
        return await self._round_trip(api_key, version, body)

    async def _login(self) -> None:
        if self.security.login is None:
            return
        lifetime_ms = await login(self._round_trip, self.security.login)
        self._reauthenticate_at = None if lifetime_ms <= 0 else \
            asyncio.get_running_loop().time() + lifetime_ms * REAUTHENTICATE_AT / 1000

    async def _round_trip(self, api_key: int, version: int, body: Mapping[str, Any]) -> Message:
        assert self._reader is not None and self._writer is not None
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        self._writer.write(encode_request(api_key, version, correlation_id, self.client_id, body))
        await self._writer.drain()
        (size,) = struct.unpack(">i", await self._reader.readexactly(4))
        if not 0 < size <= MAX_RESPONSE_BYTES:
            raise MalformedResponse(f"response frame of {size} bytes")
        answered, response = parse_response(api_key, version, await self._reader.readexactly(size))
        if answered != correlation_id:
            raise MalformedResponse(f"answer to request {answered}, expected {correlation_id}")
        return response

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
