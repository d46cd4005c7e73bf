"""The byte stream of one client connection: a plain socket, or TLS on it.

``Connection`` reads and writes through one of these. ``PlainStream`` uses asyncio's socket
calls and lets the connection send record data with os.sendfile (``zero_copy``). ``TlsStream``
drives a non-blocking ``ssl.SSLSocket`` itself (asyncio's socket calls refuse one): OpenSSL
reads from and writes to the socket directly, so TLS costs one copy each way beyond the
encryption, and record data, which sendfile cannot encrypt, is read from the segment file into
one reused buffer and encrypted from there. Both are owned by their connection's two tasks (the
reader and the writer), which may wait on the socket at the same time.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
# Record data read from a segment file per TLS write (OpenSSL cuts it into 16 KiB records).
REGION_CHUNK = 256 * 1024


class ClientStream(Protocol):
    zero_copy: bool

    async def recv_into(self, buffer: memoryview) -> int: ...

    async def sendall(self, data: bytes | bytearray | memoryview) -> None: ...

    async def send_region(self, region: Any) -> None: ...

    def fileno(self) -> int: ...

    def shutdown(self) -> None: ...

    def close(self) -> None: ...


class PlainStream:
    """A plaintext client socket; record data goes out with os.sendfile (the connection's)."""

    zero_copy = True

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    async def recv_into(self, buffer: memoryview) -> int:
        return await asyncio.get_running_loop().sock_recv_into(self.sock, buffer)

    async def sendall(self, data: bytes | bytearray | memoryview) -> None:
        await asyncio.get_running_loop().sock_sendall(self.sock, data)

    async def send_region(self, region: Any) -> None:
        raise NotImplementedError("a plaintext connection sends record data with os.sendfile")

    def fileno(self) -> int:
        return self.sock.fileno()

    def shutdown(self) -> None:
        _shutdown(self.sock)

    def close(self) -> None:
        self.shutdown()
        self.sock.close()


class TlsHandshakeFailed(ConnectionError):
    """The client did not complete a TLS handshake (not TLS at all, an untrusted or expired
    certificate, no common protocol or cipher)."""


class TlsStream:
    """A TLS client socket in non-blocking mode. The reader and the writer task may both be
    waiting for the socket; OpenSSL calls are made on the event loop thread only."""

    zero_copy = False

    def __init__(self, sock: ssl.SSLSocket) -> None:
        self.sock = sock
        loop = asyncio.get_running_loop()
        fd = sock.fileno()
        self._readable = _Readiness(fd, loop.add_reader, loop.remove_reader)
        self._writable = _Readiness(fd, loop.add_writer, loop.remove_writer)
        self._region_buffer: bytearray | None = None

    @classmethod
    async def accept(cls, raw: socket.socket, context: ssl.SSLContext) -> TlsStream:
        """Wrap an accepted socket and run the server side of the handshake."""
        tls = context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        stream = cls(tls)
        try:
            await stream._retry(tls.do_handshake)
        except (ssl.SSLError, OSError) as exc:
            stream.close()
            raise TlsHandshakeFailed(_handshake_reason(exc)) from None
        return stream

    @property
    def peer_certificate(self) -> dict[str, Any] | None:
        """The client's verified certificate (``ssl.SSLSocket.getpeercert``), None without one."""
        return self.sock.getpeercert() or None

    async def _retry(self, operation: Callable[..., T], *args: Any) -> T:
        """An OpenSSL call, retried once the socket is ready for what OpenSSL waits on."""
        while True:
            try:
                return operation(*args)
            except ssl.SSLWantReadError:
                await self._readable.wait()
            except ssl.SSLWantWriteError:
                await self._writable.wait()

    async def recv_into(self, buffer: memoryview) -> int:
        """Decrypted bytes straight into ``buffer``: at least one (0 at the end of the stream),
        and whatever more is at hand, as OpenSSL hands out one 16 KiB record per read."""
        try:
            total = await self._retry(self.sock.recv_into, buffer)
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            return 0
        while 0 < total < len(buffer):
            try:
                more = self.sock.recv_into(buffer[total:])
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, ssl.SSLZeroReturnError, ssl.SSLEOFError):
                break
            if not more:
                break
            total += more
        return total

    async def sendall(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            sent = await self._retry(self.sock.send, view)
            view = view[sent:]

    async def send_region(self, region: Any) -> None:
        """Record data of a segment file: read into one reused buffer, encrypted from there."""
        if self._region_buffer is None:
            self._region_buffer = bytearray(REGION_CHUNK)
        buffer = memoryview(self._region_buffer)
        position, remaining = region.position, region.size
        while remaining > 0:
            count = os.preadv(region.fd, [buffer[:min(remaining, REGION_CHUNK)]], position)
            if count == 0:  # the file shrank under us (truncation); the client will re-fetch
                raise ConnectionError("segment file ended before the fetched range")
            await self.sendall(buffer[:count])
            position += count
            remaining -= count

    def fileno(self) -> int:
        return self.sock.fileno()

    def shutdown(self) -> None:
        self._readable.cancel()
        self._writable.cancel()
        _shutdown(self.sock)

    def close(self) -> None:
        self.shutdown()
        self.sock.close()


class _Readiness:
    """The tasks waiting for one socket to become readable (or writable). asyncio keeps one
    callback per file descriptor and direction, so the waiters share it."""

    def __init__(self, fd: int, add: Callable[..., None], remove: Callable[[int], Any]) -> None:
        self._fd = fd
        self._add = add
        self._remove = remove
        self._waiters: list[asyncio.Future[None]] = []

    async def wait(self) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self._waiters:
            self._add(self._fd, self._wake)
        self._waiters.append(future)
        try:
            await future
        finally:
            if future in self._waiters:
                self._waiters.remove(future)
                if not self._waiters:
                    self._remove(self._fd)

    def _wake(self) -> None:
        self._remove(self._fd)
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    def cancel(self) -> None:
        """The socket is closing: waiters end with a connection error."""
        if self._waiters:
            self._remove(self._fd)
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_exception(ConnectionAbortedError("connection closed"))


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


# OpenSSL's reasons a handshake fails for, in an operator's words (the constant stays in brackets,
# for a search).
_TLS_REASONS = {
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": "client certificate missing: this listener requires one "
                                         "(ssl.client.auth=required) [PEER_DID_NOT_RETURN_A_CERTIFICATE]",
    "TLSV1_ALERT_UNKNOWN_CA": "the client does not trust this broker's certificate: its authority is not in the "
                              "client's trust store [TLSV1_ALERT_UNKNOWN_CA]",
    "SSLV3_ALERT_BAD_CERTIFICATE": "the client refused this broker's certificate [SSLV3_ALERT_BAD_CERTIFICATE]",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": "the client refused this broker's certificate (not trusted, or not valid "
                                       "for the name it connected to) [SSLV3_ALERT_CERTIFICATE_UNKNOWN]",
    "NO_SHARED_CIPHER": "no cipher suite in common with the client (ssl.cipher.suites) [NO_SHARED_CIPHER]",
    "UNSUPPORTED_PROTOCOL": "no TLS version in common with the client (ssl.enabled.protocols) "
                            "[UNSUPPORTED_PROTOCOL]",
    "VERSION_TOO_LOW": "the client's TLS version is older than ssl.enabled.protocols allows [VERSION_TOO_LOW]",
}


def _handshake_reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"client certificate refused: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or str(exc)
        if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL"):
            return f"not a TLS client ({reason}; a plaintext client on a TLS listener?)"
        return _TLS_REASONS.get(reason, f"TLS handshake failed: {reason}")
    return f"connection lost ({exc})"
