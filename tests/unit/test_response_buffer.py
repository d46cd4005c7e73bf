"""The receive buffer of a broker-to-broker connection, fed as a socket would feed it: frames
split at every boundary, frames larger than the buffer, frames handed out as views that stay
intact until released, and impossible sizes."""

from __future__ import annotations

import struct

import pytest

from minikafka.net.client import ResponseBuffer
from protocol import MalformedResponse


def framed(*payloads: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def feed(buffer: ResponseBuffer, data: bytes, chunk: int) -> list[bytes]:
    """Write ``data`` in chunks of at most ``chunk`` bytes (less when the buffer offers less),
    taking every frame as it completes."""
    frames: list[bytes] = []
    pos = 0
    while pos < len(data):
        room = buffer.writable()
        count = min(chunk, len(room), len(data) - pos)
        room[:count] = data[pos:pos + count]
        buffer.wrote(count)
        pos += count
        while (frame := buffer.frame()) is not None:
            frames.append(bytes(frame))
            buffer.release()
    return frames


@pytest.mark.parametrize("chunk", [1, 3, 4, 5, 17, 4096, 1 << 20])
def test_frames_split_anywhere_come_out_whole_and_in_order(chunk: int) -> None:
    payloads = [b"a" * 10, b"b", bytes(range(256)) * 700, b"c" * 5]  # the third is larger than the buffer
    assert feed(ResponseBuffer(64 * 1024), framed(*payloads), chunk) == payloads


def test_a_frame_handed_out_stays_intact_until_released() -> None:
    buffer = ResponseBuffer(64 * 1024)
    data = framed(b"first", b"second")
    buffer.writable()[:len(data)] = data
    buffer.wrote(len(data))
    first = buffer.frame()
    assert first is not None
    with pytest.raises(RuntimeError, match="not released"):
        buffer.frame()
    assert bytes(first) == b"first"
    buffer.release()
    second = buffer.frame()
    assert second is not None and bytes(second) == b"second"


def test_the_buffer_is_reused_not_reallocated() -> None:
    buffer = ResponseBuffer(64 * 1024)
    first = feed(buffer, framed(b"x" * 1000), 1 << 20)
    room = buffer.writable()
    feed(buffer, framed(b"y" * 1000), 1 << 20)
    assert first == [b"x" * 1000] and room.obj is buffer.writable().obj


@pytest.mark.parametrize("size", [-1, 0, 1 << 30])
def test_an_impossible_size_is_a_malformed_response(size: int) -> None:
    buffer = ResponseBuffer(64 * 1024, max_frame_bytes=1 << 29)
    buffer.writable()[:4] = struct.pack(">i", size)
    buffer.wrote(4)
    with pytest.raises(MalformedResponse, match=f"frame of {size} bytes"):
        buffer.frame()
