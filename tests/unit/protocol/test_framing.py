"""Size-prefixed framing: any split of the stream gives the same frames."""

from __future__ import annotations

import random
import struct

import pytest

from protocol import FrameDecoder, FrameError, FrameTooLarge, MalformedFrame, frame

PAYLOADS = [b"first", b"", b"\x00" * 3, bytes(range(256)) * 3, b"last"]
STREAM = b"".join(frame(p) for p in PAYLOADS)


def feed_chunks(chunks: list[bytes], max_frame_size: int = 4096) -> list[bytes]:
    decoder = FrameDecoder(max_frame_size)
    frames: list[bytes] = []
    for chunk in chunks:
        frames.extend(decoder.feed(chunk))
    assert decoder.buffered == 0
    return frames


def test_frame_adds_the_size_prefix() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"


def test_whole_stream_at_once() -> None:
    assert feed_chunks([STREAM]) == PAYLOADS


def test_one_byte_at_a_time() -> None:
    assert feed_chunks([STREAM[i : i + 1] for i in range(len(STREAM))]) == PAYLOADS


@pytest.mark.parametrize("cut", range(len(STREAM) + 1))
def test_split_at_every_byte_boundary(cut: int) -> None:
    assert feed_chunks([STREAM[:cut], STREAM[cut:]]) == PAYLOADS


def test_random_chunkings() -> None:
    rng = random.Random(7)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(STREAM)), rng.randint(1, 12)))
        edges = [0, *cuts, len(STREAM)]
        assert feed_chunks([STREAM[a:b] for a, b in zip(edges, edges[1:], strict=False)]) == PAYLOADS


def test_partial_data_is_kept_until_complete() -> None:
    decoder = FrameDecoder(100)
    assert decoder.feed(b"\x00\x00") == []
    assert decoder.feed(b"\x00\x05ab") == []
    assert decoder.buffered == 6
    assert decoder.feed(b"cde\x00") == [b"abcde"]
    assert decoder.buffered == 1


def test_frame_of_exactly_the_maximum_size_is_accepted() -> None:
    assert FrameDecoder(5).feed(frame(b"12345")) == [b"12345"]


def test_oversized_frame_raises_as_soon_as_its_size_is_seen() -> None:
    decoder = FrameDecoder(5)
    assert decoder.feed(b"\x00\x00") == []
    with pytest.raises(FrameTooLarge):
        decoder.feed(b"\x00\x06")
    with pytest.raises(FrameTooLarge):  # the stream stays broken
        decoder.feed(b"anything")


def test_negative_size_is_malformed() -> None:
    with pytest.raises(MalformedFrame):
        FrameDecoder(100).feed(struct.pack(">i", -1))
    with pytest.raises(MalformedFrame):
        FrameDecoder(100).feed(b"\x80\x00\x00\x00")


@pytest.mark.parametrize("bad_prefix", [struct.pack(">i", 5000), struct.pack(">i", -7)])
def test_frames_before_a_bad_prefix_are_not_lost_whatever_the_split(bad_prefix: bytes) -> None:
    stream = STREAM + bad_prefix + b"rest"
    expected_error = FrameTooLarge if bad_prefix[0] == 0 else MalformedFrame
    for cut in range(len(stream) + 1):
        decoder = FrameDecoder(4096)
        frames: list[bytes] = []
        with pytest.raises(FrameError) as caught:
            for chunk in (stream[:cut], stream[cut:]):
                frames.extend(decoder.feed(chunk))
        assert type(caught.value) is expected_error
        assert frames + caught.value.frames == PAYLOADS


def test_negative_maximum_is_refused() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(-1)


@pytest.mark.parametrize("capacity", [1, 5, 16, 1 << 16])
@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_read_into_the_decoder_as_a_socket_does(capacity: int, chunk: int) -> None:
    decoder = FrameDecoder(4096, capacity=capacity)
    frames: list[bytes] = []
    views = []  # a socket read may still hold the view it wrote into when the next one is asked for
    pos = 0
    while pos < len(STREAM):
        room = decoder.writable()
        views.append(room)
        count = min(len(room), chunk, len(STREAM) - pos)
        room[:count] = STREAM[pos:pos + count]
        frames += decoder.wrote(count)
        pos += count
    assert frames == PAYLOADS and decoder.buffered == 0


def test_the_buffer_is_reused_from_one_read_to_the_next() -> None:
    decoder = FrameDecoder(4096, capacity=1024)
    first = decoder.writable()
    first[:len(STREAM)] = STREAM
    assert decoder.wrote(len(STREAM)) == PAYLOADS
    assert decoder.writable().obj is first.obj


def test_a_large_frame_does_not_keep_its_memory() -> None:
    decoder = FrameDecoder(1 << 20, capacity=1024)
    assert decoder.feed(frame(bytes(100_000))) == [bytes(100_000)]
    assert len(decoder.writable()) == 1024
