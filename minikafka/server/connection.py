"""One client connection: frames in, handler calls, responses out in request order.

A connection owns its stream (a socket, plain or TLS: streams.py). The reader task splits the
byte stream into frames and starts a handler task per request right away (so appends happen in
request order); the writer task sends the responses in the order the requests came, record data
straight from segment files with os.sendfile (on TLS, through the stream's buffer). A broken
frame closes this connection only; pending work is failed with that cause.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from minikafka.net.streams import ClientStream
from minikafka.replica.waits import CURRENT_SCOPE, WaitScope
from minikafka.server import metrics
from protocol import (
    ProtocolError,
    Request,
    UnsupportedVersion,
    encode_api_versions_fallback,
    encode_response,
    parse_request,
)
from protocol.framing import FrameDecoder

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
RECV_SIZE = 256 * 1024
ResponseParts = Sequence[Any]


class UnhandledApi(ProtocolError):
    """A request the protocol layer can parse but no handler serves; the connection closes."""


class Connection:
    """Serves the requests of one client socket. Touched only by its own two tasks."""

    def __init__(self, stream: ClientStream, peer: str, dispatch: Callable[[Request], Awaitable[Any]],
                 max_frame_size: int, max_in_flight: int) -> None:
        self.stream = stream
        self.peer = peer
        self._dispatch = dispatch
        self._decoder = FrameDecoder(max_frame_size, RECV_SIZE)
        self._pending: asyncio.Queue[asyncio.Future[ResponseParts] | None] = asyncio.Queue(max_in_flight)
        self.close_reason: str | None = None
        self._waits = WaitScope()
        # SASL (minikafka/security/session.py): frames that are bare tokens, not requests, after a
        # v0 SaslHandshake; and a refused authentication, whose answer is the last thing sent.
        self.raw_frames: Callable[[bytes], Coroutine[Any, Any, ResponseParts]] | None = None
        self._close_after: asyncio.Future[ResponseParts] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._muted_until = 0.0  # event-loop time

    def stop_reading(self) -> None:
        """Broker shutdown: read no further request, answer those already read, then close.
        A producer waiting on a leadership this broker has just handed over gets its
        NOT_LEADER_OR_FOLLOWER, with the new leader, instead of a dropped connection."""
        if self._reader is not None:
            self._reader.cancel()

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        CURRENT_SCOPE.set(self._waits)  # inherited by every request task started below
        writer = loop.create_task(self._write_loop())
        reader = self._reader = loop.create_task(self._read_loop())
        try:
            try:
                await reader
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                self.close_reason = "broker shutting down"  # stop_reading: the answers still go out
        except (ConnectionError, OSError) as exc:
            self.close_reason = f"connection error: {exc}"
        except ProtocolError as exc:
            self.close_reason = f"bad frame: {exc}"
            log.warning("closing connection from %s: %s", self.peer, self.close_reason)
        except asyncio.CancelledError:  # broker shutdown: drop what is in flight
            self.close_reason = "broker shutting down"
            writer.cancel()
            self._drain_pending()
            raise
        finally:
            # The requests already received are answered (waits end at once), then the socket closes.
            self.close_reason = self.close_reason or "closed by client"
            self._waits.release_all()
            if not writer.done():
                await self._pending.put(None)
            await asyncio.gather(writer, return_exceptions=True)
            self._close_socket()

    async def _read_loop(self) -> None:
        while True:
            await self._unmuted()
            # Straight into the decoder's buffer, kept from one read to the next.
            count = await self.stream.recv_into(self._decoder.writable())
            if not count:
                return
            for payload in self._decoder.wrote(count):
                await self._unmuted()
                await self._pending.put(self._start(payload))

    async def _unmuted(self) -> None:
        """Wait out a client quota's throttle: no request of the connection is taken meanwhile."""
        loop = asyncio.get_running_loop()
        while (left := self._muted_until - loop.time()) > 0:
            await asyncio.sleep(left)

    def _throttle(self, body: Any) -> None:
        """A response with a throttle time (a client quota exceeded, KIP-219) mutes the connection
        for that long, so a client that does not back off by itself is held back too."""
        throttle_ms = body.get("throttle_time_ms", 0) if isinstance(body, dict) else 0
        if throttle_ms > 0:
            loop = asyncio.get_running_loop()
            self._muted_until = max(self._muted_until, loop.time() + throttle_ms / 1000)

    def limit_frames(self, max_frame_size: int) -> None:
        """A larger frame from now on closes the connection."""
        self._decoder.max_frame_size = max_frame_size

    def close_after_response(self) -> None:
        """Called by a request's handler: close once its response is sent."""
        self._close_after = asyncio.current_task()

    def _start(self, payload: bytes) -> asyncio.Future[ResponseParts]:
        """Parse one frame and start its handler; the future yields the framed response parts."""
        loop = asyncio.get_running_loop()
        if self.raw_frames is not None:
            return loop.create_task(self.raw_frames(payload))
        try:
            request = parse_request(payload)
        except UnsupportedVersion as exc:
            header = exc.header
            if header is None:
                raise ProtocolError(str(exc)) from exc
            if header.api_key == API_VERSIONS_KEY:
                return _done(loop, [encode_api_versions_fallback(header.correlation_id)])
            raise ProtocolError(f"unsupported version {header.api_version} of api {header.api_key}") from exc
        started = time.perf_counter()
        return loop.create_task(self._handle(request, self._dispatch(request), started))

    async def _handle(self, request: Request, handling: Awaitable[Any], started: float) -> ResponseParts:
        name = metrics.api_name(request.api_key)
        body = await handling
        self._throttle(body)
        metrics.REQUESTS.labels(name).inc()
        metrics.REQUEST_VERSIONS.labels(name, str(request.api_version)).inc()
        metrics.LATENCY.labels(name).observe(time.perf_counter() - started)
        if body is None:  # produce with acks=0 sends no response
            return []
        return encode_response(request.api_key, request.api_version, request.correlation_id, body)

    async def _write_loop(self) -> None:
        while True:
            future = await self._pending.get()
            if future is None:
                return
            try:
                parts = await future
            except Exception as exc:  # a handler bug must not reach the wire
                log.exception("request from %s failed; closing the connection", self.peer)
                self.close_reason = f"handler error: {exc!r}"
                self._shutdown_socket()
                self._drain_pending()
                return
            try:
                await self._send(parts)
            finally:
                _close_regions(parts)
            if future is self._close_after:
                self.close_reason = "authentication failed"
                self._shutdown_socket()
                self._drain_pending()
                return

    def _drain_pending(self) -> None:
        while not self._pending.empty():
            future = self._pending.get_nowait()
            if future is None:
                continue
            if future.done() and not future.cancelled() and future.exception() is None:
                _close_regions(future.result())
            future.cancel()

    async def _send(self, parts: ResponseParts) -> None:
        buffered: list[bytes | bytearray | memoryview] = []
        for part in parts:
            if isinstance(part, bytes | bytearray | memoryview):
                buffered.append(part)
                continue
            if buffered:
                await self.stream.sendall(b"".join(buffered))
                buffered = []
            if self.stream.zero_copy:
                await self._sendfile(part)
            else:
                await self.stream.send_region(part)
        if buffered:
            await self.stream.sendall(b"".join(buffered))

    async def _sendfile(self, region: Any) -> None:
        """Zero-copy: the kernel moves record bytes from the segment file to the socket."""
        loop = asyncio.get_running_loop()
        offset, remaining = region.position, region.size
        out_fd = self.stream.fileno()
        while remaining > 0:
            try:
                sent = os.sendfile(out_fd, region.fd, offset, remaining)
            except BlockingIOError:
                await _writable(loop, out_fd)
                continue
            if sent == 0:  # the file shrank under us (truncation); the client will re-fetch
                raise ConnectionError("segment file ended before the fetched range")
            offset += sent
            remaining -= sent

    def _shutdown_socket(self) -> None:
        self.stream.shutdown()

    def _close_socket(self) -> None:
        self.stream.close()


def _close_regions(parts: ResponseParts) -> None:
    for part in parts:
        if not isinstance(part, bytes | bytearray | memoryview):
            part.close()


def _done(loop: asyncio.AbstractEventLoop, parts: ResponseParts) -> asyncio.Future[ResponseParts]:
    future: asyncio.Future[ResponseParts] = loop.create_future()
    future.set_result(parts)
    return future


async def _writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    future: asyncio.Future[None] = loop.create_future()
    loop.add_writer(fd, _settle, future)
    try:
        await future
    finally:
        loop.remove_writer(fd)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
