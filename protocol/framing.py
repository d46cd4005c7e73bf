"""Size-prefixed framing of the Kafka byte stream.

Every Kafka request and response travels as an int32 big-endian size followed by that
many bytes. `FrameDecoder` turns an arbitrarily split byte stream back into those
payloads; it does no I/O, so the connection that owns it feeds whatever it read.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class ProtocolError(Exception):
    """Base of every error the `protocol` package raises: bytes that are not valid Kafka
    wire data, or values that cannot be written as such."""


class FrameError(ProtocolError):
    """The byte stream cannot be split into frames any more.

    `frames` holds the payloads that were complete before the bad size prefix in the
    same `feed` call, so that no request is lost whichever way the stream was split.
    """

    def __init__(self, message: str, frames: list[bytes] | None = None) -> None:
        super().__init__(message)
        self.frames: list[bytes] = frames if frames is not None else []


class FrameTooLarge(FrameError):
    """A size prefix announced more bytes than the decoder's `max_frame_size`."""


class MalformedFrame(FrameError):
    """A size prefix that no frame can have (negative)."""


class FrameDecoder:
    """Reassembles frames from one connection's byte stream.

    Owned by exactly one connection reader; not thread-safe. Bytes come either through ``feed``
    or, without a copy of their own, straight from the socket: ``writable`` is where the next
    ones go (``sock.recv_into`` it) and ``wrote`` says how many came. The buffer is kept from
    one read to the next, grown for a frame larger than it (and shrunk back after). After it
    has raised, the stream is out of sync and every later call raises the same kind of error
    again (with no frames): the only sane reaction is to close the connection. Frames that were
    complete before the bad size prefix come with the error (`FrameError.frames`).
    """

    __slots__ = ("max_frame_size", "_capacity", "_buffer", "_start", "_filled", "_failure")

    def __init__(self, max_frame_size: int, capacity: int = 256 * 1024) -> None:
        if max_frame_size < 0:
            raise ValueError(f"max_frame_size must be >= 0, got {max_frame_size}")
        self.max_frame_size = max_frame_size
        self._capacity = capacity
        self._buffer = bytearray(capacity)
        self._start = 0  # where the first incomplete frame begins
        self._filled = 0  # bytes received up to here
        self._failure: FrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet form a complete frame."""
        return self._filled - self._start

    def writable(self) -> memoryview:
        """Room for the next bytes from the stream (never empty)."""
        self._check_failed()
        if self._filled == len(self._buffer):
            pending = self._buffer[self._start:self._filled]
            # A frame larger than the buffer gets a new one (never resized in place: the
            # views handed out before may still be alive).
            if self._start == 0:
                self._buffer = bytearray(max(self._pending_frame_end() or 0, 2 * len(self._buffer)))
            self._buffer[:len(pending)] = pending  # the incomplete frame moves to the front
            self._start, self._filled = 0, len(pending)
        return memoryview(self._buffer)[self._filled:]

    def wrote(self, count: int) -> list[bytes]:
        """``count`` bytes were written into ``writable()``; the payloads of the frames now
        complete, in order."""
        self._check_failed()
        self._filled += count
        frames: list[bytes] = []
        start, available = self._start, self._filled
        # One copy per frame: slices of the view, not of the bytearray.
        with memoryview(self._buffer) as view:
            while available - start >= 4:
                (size,) = _SIZE.unpack_from(view, start)
                if size < 0 or size > self.max_frame_size:
                    self._failure = self._bad_size(size, frames)
                    break
                end = start + 4 + size
                if end > available:
                    break
                frames.append(bytes(view[start + 4 : end]))
                start = end
        if self._failure is not None:
            self._start = self._filled = 0
            raise self._failure
        if start == available:  # nothing pending: the next read starts at the front
            start = self._filled = 0
            if len(self._buffer) > 4 * self._capacity:  # a large frame does not keep its memory
                self._buffer = bytearray(self._capacity)
        self._start = start
        return frames

    def feed(self, data: bytes) -> list[bytes]:
        """Add `data` and return the payloads of all frames now complete, in order."""
        frames: list[bytes] = []
        view = memoryview(data)
        while True:
            room = self.writable()
            count = min(len(room), len(view))
            room[:count] = view[:count]
            frames += self.wrote(count)
            view = view[count:]
            if not view:
                return frames

    def _pending_frame_end(self) -> int | None:
        """Where the incomplete frame ends in the buffer, once its size prefix is in."""
        if self.buffered < 4:
            return None
        (size,) = _SIZE.unpack_from(self._buffer, self._start)
        return self._start + 4 + max(size, 0)

    def _check_failed(self) -> None:
        if self._failure is not None:
            raise type(self._failure)(str(self._failure))

    def _bad_size(self, size: int, frames: list[bytes]) -> FrameError:
        if size < 0:
            return MalformedFrame(f"negative frame size {size}", frames)
        return FrameTooLarge(f"frame of {size} bytes exceeds the maximum of {self.max_frame_size}", frames)


def frame(payload: bytes) -> bytes:
    """Prefix `payload` with its int32 size."""
    return _SIZE.pack(len(payload)) + payload
