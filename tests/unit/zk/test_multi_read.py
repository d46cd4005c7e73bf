"""ZooKeeper's multiRead request and response, as bytes (the layout of ZooKeeper's
MultiOperationRecord and MultiResponse)."""

from __future__ import annotations

import struct

import pytest

from minikafka.zk.multi_read import NO_NODE, MultiRead


def _header(op_type: int, done: bool, err: int) -> bytes:
    return struct.pack("!iBi", op_type, done, err)


def _string(text: str) -> bytes:
    return struct.pack("!i", len(text)) + text.encode()


STAT = tuple(range(1, 12))  # czxid mzxid ctime mtime version cversion aversion ephemeralOwner dataLength numChildren pzxid
STAT_BYTES = struct.pack("!qqqqiiiqiiq", *STAT)


def test_the_request_is_a_getdata_per_path_then_the_end_header() -> None:
    request = MultiRead(["/a", "/b/c"])
    assert request.type == 22
    assert request.serialize() == (
        _header(4, False, -1) + _string("/a") + b"\x00"
        + _header(4, False, -1) + _string("/b/c") + b"\x00"
        + _header(-1, True, -1))


def test_the_response_gives_each_read_its_data_or_its_error() -> None:
    response = (b"ignored" + _header(4, False, 0) + struct.pack("!i", 3) + b"xyz" + STAT_BYTES
                + _header(-1, False, NO_NODE) + struct.pack("!i", NO_NODE)
                + _header(4, False, 0) + struct.pack("!i", -1) + STAT_BYTES  # a znode without data
                + _header(-1, True, -1))
    results = MultiRead(["/a", "/missing", "/empty"]).deserialize(response, len(b"ignored"))
    assert results[0] == (b"xyz", STAT) and results[1] == NO_NODE and results[2] == (None, STAT)
    assert results[0][1].version == 5


def test_a_response_of_another_length_or_operation_is_refused() -> None:
    one = _header(4, False, 0) + struct.pack("!i", 0) + STAT_BYTES
    with pytest.raises(ValueError, match="1 reads of 2"):
        MultiRead(["/a", "/b"]).deserialize(one + _header(-1, True, -1), 0)
    with pytest.raises(ValueError, match="type 5"):
        MultiRead(["/a"]).deserialize(_header(5, False, 0) + STAT_BYTES + _header(-1, True, -1), 0)
