"""A connection from this broker to another one: follower fetches, controller requests.

``BrokerClient`` owns one TCP connection. Responses are read straight into one preallocated
buffer (an asyncio BufferedProtocol: the socket read is the only copy), and a caller may take a
response frame as a memoryview into that buffer instead of a parsed message: the follower's
fetch path parses the records in place and writes them to its log from there. ``request`` sends
one request and parses its answer (callers that share a client, the controller channels, take
turns); ``send`` and ``receive`` are the fetcher's two halves of the same, for the one task that
owns its client. Any failure closes the connection and raises ``BrokerUnreachable``; the next
request reconnects. A connection to a secured listener opens with its TLS and logs in (SASL)
before its first request, and again, with no request in flight, before its session expires
(security/client.py). Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, cast

from minikafka.security.client import PLAINTEXT_CLIENT, REAUTHENTICATE_AT, ClientSecurity, login
from protocol import MalformedResponse, Message, encode_request, parse_response

log = logging.getLogger(__name__)

MAX_RESPONSE_BYTES = 512 * 1024 * 1024
_SIZE = struct.Struct(">i")
_RESPONSE_CORRELATION = struct.Struct(">i")


class BrokerUnreachable(Exception):
    """The request did not get an answer (connection refused or lost, timeout, bad frame)."""


class ResponseBuffer:
    """Reassembles size-prefixed frames in one buffer that the socket reads into (sans-IO).

    ``writable`` is where the next bytes go, ``wrote`` says how many came; ``frame`` hands out
    the payload of the first complete frame as a view into the buffer, valid until ``release``,
    which drops it. The buffer is replaced by a larger one only when a frame does not fit, and
    never while a frame is handed out (its reader keeps the old buffer alive through its view).
    Owned by one connection's protocol.
    """

    def __init__(self, capacity: int, max_frame_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray(max(capacity, 64 * 1024))
        self._filled = 0  # bytes received, from the start of the buffer
        self._held = 0  # bytes of the frame handed out (size prefix included), 0 if none

    @property
    def holding(self) -> bool:
        return self._held > 0

    def writable(self) -> memoryview:
        """Where the next received bytes go: never empty, never over a frame handed out."""
        needed = self._frame_end()
        if needed is not None and needed > len(self._buffer):
            self._resize(needed)
        if self._filled == len(self._buffer):
            self._resize(len(self._buffer) * 2)
        return memoryview(self._buffer)[self._filled:]

    def wrote(self, count: int) -> None:
        self._filled += count

    def frame(self) -> memoryview | None:
        """The payload of the first complete frame (without its size prefix), if one is here."""
        if self._held:
            raise RuntimeError("the previous frame was not released")
        end = self._frame_end()
        if end is None or end > self._filled:
            return None
        self._held = end
        return memoryview(self._buffer)[4:end]

    def release(self) -> None:
        """The frame handed out is no longer read: bytes after it move to the front."""
        held, self._held = self._held, 0
        left = self._filled - held
        if left:
            self._buffer[:left] = self._buffer[held:self._filled]
        self._filled = left

    def _frame_end(self) -> int | None:
        if self._filled < 4:
            return None
        (size,) = _SIZE.unpack_from(self._buffer, 0)
        if not 0 < size <= self.max_frame_bytes:
            raise MalformedResponse(f"response frame of {size} bytes")
        return 4 + size

    def _resize(self, capacity: int) -> None:
        if self._held:
            raise RuntimeError("cannot grow the buffer while a frame is handed out")
        grown = bytearray(capacity)
        grown[:self._filled] = memoryview(self._buffer)[:self._filled]
        self._buffer = grown


class _ResponseProtocol(asyncio.BufferedProtocol):
    """Feeds a ResponseBuffer from the socket; stops reading while a frame is handed out, so
    the kernel keeps what comes next until the reader is done with it."""

    def __init__(self, buffer: ResponseBuffer) -> None:
        self.buffer = buffer
        self.transport: asyncio.Transport | None = None
        self.failure: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is one without the subclassing

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer.writable()

    def buffer_updated(self, nbytes: int) -> None:
        self.buffer.wrote(nbytes)
        self._wake()

    def eof_received(self) -> bool:
        self._fail(EOFError("the broker closed the connection"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or EOFError("connection closed"))

    def _fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def next_frame(self) -> memoryview:
        while True:
            frame = self.buffer.frame()
            if frame is not None:
                if self.transport is not None and not self.transport.is_closing():
                    self.transport.pause_reading()
                return frame
            if self.failure is not None:
                raise self.failure
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def release(self) -> None:
        if self.buffer.holding:
            self.buffer.release()
            if self.transport is not None and not self.transport.is_closing():
                self.transport.resume_reading()


class BrokerClient:
    """One connection to another broker, with its receive buffer. Owned by one fetcher task (which
    uses ``send``/``receive``), or shared by a controller channel's requests taking turns through
    ``request``."""

    def __init__(self, host: str, port: int, client_id: str, connect_timeout_s: float = 5.0,
                 receive_buffer_bytes: int = 64 * 1024, security: ClientSecurity = PLAINTEXT_CLIENT) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self.receive_buffer_bytes = receive_buffer_bytes
        # The inter-broker listener's TLS and SASL (security/client.py).
        self.security = security
        self._login_again_at: float | None = None
        self._protocol: _ResponseProtocol | None = None
        self._correlation = itertools.count(1)
        self._lock = asyncio.Lock()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def request(self, api_key: int, version: int, body: Mapping[str, Any], timeout_s: float) -> Message:
        """Send one request and parse its answer."""
        async with self._lock:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation
            # that arrives as the answer does, and a fetcher told to stop would fetch on.
            async with self._failures(timeout_s):
                await self.connect()
                return await self._exchange(api_key, version, body)

    async def connect(self) -> None:
        """Connect, unless connected; a connection the broker closed meanwhile is replaced. With
        SASL, log in (again when the session is about to expire: no request may be in flight)."""
        if self._protocol is not None and (self._protocol.failure is not None or self._protocol.transport is None
                                           or self._protocol.transport.is_closing()):
            self.close()
        if self._protocol is None:
            async with self._failures(self.connect_timeout_s):
                _, protocol = await asyncio.get_running_loop().create_connection(
                    lambda: _ResponseProtocol(ResponseBuffer(self.receive_buffer_bytes)), self.host, self.port,
                    **self.security.connect_arguments(self.host))
                self._protocol = protocol
                await self._login()
        elif self.login_due:
            async with self._failures(self.connect_timeout_s):
                await self._login()

    @property
    def login_due(self) -> bool:
        """The SASL session is about to expire: the next request waits for a new login."""
        return self._login_again_at is not None and asyncio.get_running_loop().time() >= self._login_again_at

    async def _login(self) -> None:
        if self.security.login is None:
            return
        lifetime_ms = await login(self._exchange, self.security.login)
        self._login_again_at = None if lifetime_ms <= 0 else \
            asyncio.get_running_loop().time() + lifetime_ms * REAUTHENTICATE_AT / 1000

    async def _exchange(self, api_key: int, version: int, body: Mapping[str, Any]) -> Message:
        """One request and its parsed answer on the open connection (the login's)."""
        correlation_id = self.send(api_key, version, body)
        payload = await self._receive(correlation_id)
        try:
            return parse_response(api_key, version, payload)[1]
        finally:
            self.release()

    def send(self, api_key: int, version: int, body: Mapping[str, Any]) -> int:
        """Write a request on the connected socket (``connect`` first); its correlation id."""
        protocol = self._protocol
        if protocol is None or protocol.transport is None or protocol.transport.is_closing():
            raise BrokerUnreachable(f"broker at {self.address}: not connected")
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        protocol.transport.write(encode_request(api_key, version, correlation_id, self.client_id, body))
        return correlation_id

    async def receive(self, correlation_id: int, timeout_s: float) -> memoryview:
        """The answer to request ``correlation_id`` (the next one on this connection), its header
        included, as a view into the receive buffer: valid until ``release``, which must come
        before the next ``receive``."""
        async with self._failures(timeout_s):
            return await self._receive(correlation_id)

    async def _receive(self, correlation_id: int) -> memoryview:
        if self._protocol is None:
            raise EOFError("not connected")
        payload = await self._protocol.next_frame()
        (answered,) = _RESPONSE_CORRELATION.unpack_from(payload, 0) if len(payload) >= 4 else (None,)
        if answered != correlation_id:
            self._protocol.release()
            raise MalformedResponse(f"answer to request {answered}, expected {correlation_id}")
        return payload

    def release(self) -> None:
        """The last response received is no longer read; the connection reads on."""
        if self._protocol is not None:
            self._protocol.release()

    @contextlib.asynccontextmanager
    async def _failures(self, timeout_s: float) -> AsyncIterator[None]:
        """Within ``timeout_s``; any failure closes the connection and becomes BrokerUnreachable."""
        try:
            async with asyncio.timeout(timeout_s):
                yield
        except (TimeoutError, OSError, EOFError, MalformedResponse) as exc:
            self.close()
            raise BrokerUnreachable(f"broker at {self.address}: {exc!r}") from exc

    def close(self) -> None:
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()
        self._protocol = None


class BrokerConnections:
    """One BrokerClient per other broker, made on first use by ``connect`` (None: the broker's
    address is not known) and kept until ``close``; for the callers that talk to whichever
    broker leads something (the transaction coordinator's markers and verifications)."""

    def __init__(self, connect: Callable[[int], BrokerClient | None]) -> None:
        self.connect = connect
        self._clients: dict[int, BrokerClient] = {}

    def get(self, broker_id: int) -> BrokerClient | None:
        client = self._clients.get(broker_id)
        if client is None:
            client = self.connect(broker_id)
            if client is not None:
                self._clients[broker_id] = client
        return client

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
