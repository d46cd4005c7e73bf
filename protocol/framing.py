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

    Owned by exactly one connection reader; not thread-safe. After it has raised, the
    stream is out of sync and every later `feed` raises the same kind of error again
    (with no frames): the only sane reaction is to close the connection. Frames that
    were complete before the bad size prefix come with the error (`FrameError.frames`).
    """

    __slots__ = ("max_frame_size", "_buffer", "_failure")

    def __init__(self, max_frame_size: int) -> None:
        if max_frame_size < 0:
            raise ValueError(f"max_frame_size must be >= 0, got {max_frame_size}")
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._failure: FrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet form a complete frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        """Add `data` and return the payloads of all frames now complete, in order."""
        if self._failure is not None:
            raise type(self._failure)(str(self._failure))
        buffer = self._buffer
        buffer += data
        frames: list[bytes] = []
        start = 0
        available = len(buffer)
        # One copy per frame: slices of the view, not of the bytearray.
        with memoryview(buffer) as view:
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
            del buffer[:]
            raise self._failure
        if start:
            del buffer[:start]
        return frames

    def _bad_size(self, size: int, frames: list[bytes]) -> FrameError:
        if size < 0:
            return MalformedFrame(f"negative frame size {size}", frames)
        return FrameTooLarge(f"frame of {size} bytes exceeds the maximum of {self.max_frame_size}", frames)


def frame(payload: bytes) -> bytes:
    """Prefix `payload` with its int32 size."""
    return _SIZE.pack(len(payload)) + payload
