"""A Fetch response read in place: the follower's fast path (sans-IO).

``parse_fetch_response`` walks the payload of a flexible Fetch response (v12 and later) held
in a buffer and returns, per partition, the few fields a follower uses with its records as a
memoryview into that same buffer: no bytes object is made for the records, so a response of
many MiB is copied once (by the socket read) before the follower writes it to its log. The
construct schema in protocol/apis/fetch.py stays the reference: the unit tests check this
reader against it for every version it accepts, and at every truncation point.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from .messages import MalformedResponse

FIRST_VERSION = 12  # the first flexible one: compact lengths and tagged fields throughout
TOPIC_IDS_FROM = 13  # topics named by id rather than by name

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
# partition_index, error_code, high_watermark, last_stable_offset, log_start_offset
_PARTITION_HEAD = struct.Struct(">ihqqq")
_ABORTED_TRANSACTION_SIZE = 16  # producer_id int64, first_offset int64


@dataclass(slots=True)
class FetchedPartition:
    """One partition of a Fetch response; ``records`` is a view into the response's buffer,
    valid as long as that buffer is (None when the leader sent null)."""

    topic: str | None  # None from v13 on, where the topic is named by ``topic_id``
    topic_id: uuid.UUID | None
    partition: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: memoryview | None


@dataclass(slots=True)
class FetchResponseView:
    error_code: int
    partitions: list[FetchedPartition]


class _Cursor:
    __slots__ = ("view", "pos")

    def __init__(self, view: memoryview) -> None:
        self.view = view
        self.pos = 0

    def need(self, size: int, what: str) -> int:
        start = self.pos
        if size < 0 or start + size > len(self.view):
            raise MalformedResponse(f"Fetch response: truncated {what} at byte {start}")
        self.pos = start + size
        return start

    def fixed(self, layout: struct.Struct, what: str) -> tuple[int, ...]:
        return layout.unpack_from(self.view, self.need(layout.size, what))

    def uvarint(self, what: str) -> int:
        result = shift = 0
        while True:
            byte = self.view[self.need(1, what)]
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7
            if shift > 28:
                raise MalformedResponse(f"Fetch response: {what} longer than 5 bytes at byte {self.pos}")

    def compact_length(self, what: str) -> int:
        """A compact length (stored plus one); -1 for null."""
        return self.uvarint(what) - 1

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint("tagged field count")):
            self.uvarint("tag")
            self.need(self.uvarint("tagged field size"), "tagged field")

    def compact_string(self, what: str) -> str:
        length = self.compact_length(what)
        if length < 0:
            raise MalformedResponse(f"Fetch response: null {what}")
        start = self.need(length, what)
        try:
            return str(self.view[start:self.pos], "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedResponse(f"Fetch response: {what} is not UTF-8") from exc


def parse_fetch_response(payload: memoryview, version: int) -> FetchResponseView:
    """Read a Fetch response of ``version`` (>= 12): ``payload`` is its frame without the size
    prefix, from the response header (correlation id, tagged fields) on. Raises
    MalformedResponse for anything that does not decode."""
    if version < FIRST_VERSION:
        raise ValueError(f"Fetch v{version} is not flexible; read it with protocol.parse_response")
    cursor = _Cursor(payload)
    cursor.fixed(_I32, "correlation id")
    cursor.skip_tagged_fields()
    cursor.fixed(_I32, "throttle time")
    (error_code,) = cursor.fixed(_I16, "error code")
    cursor.fixed(_I32, "session id")
    partitions: list[FetchedPartition] = []
    for _ in range(_count(cursor, "topic count")):
        topic: str | None = None
        topic_id: uuid.UUID | None = None
        if version >= TOPIC_IDS_FROM:
            start = cursor.need(16, "topic id")
            topic_id = uuid.UUID(bytes=bytes(payload[start:start + 16]))
        else:
            topic = cursor.compact_string("topic name")
        for _ in range(_count(cursor, "partition count")):
            index, error, high_watermark, _last_stable, log_start = cursor.fixed(_PARTITION_HEAD, "partition")
            for _ in range(max(cursor.compact_length("aborted transaction count"), 0)):
                cursor.need(_ABORTED_TRANSACTION_SIZE, "aborted transaction")
                cursor.skip_tagged_fields()
            cursor.fixed(_I32, "preferred read replica")
            size = cursor.compact_length("records length")
            records = None
            if size >= 0:
                start = cursor.need(size, "records")
                records = payload[start:start + size]
            cursor.skip_tagged_fields()
            partitions.append(FetchedPartition(topic, topic_id, index, error, high_watermark, log_start, records))
        cursor.skip_tagged_fields()
    cursor.skip_tagged_fields()
    if cursor.pos != len(payload):
        raise MalformedResponse(f"Fetch v{version} response: {len(payload) - cursor.pos} bytes left after the body")
    return FetchResponseView(error_code, partitions)


def _count(cursor: _Cursor, what: str) -> int:
    count = cursor.compact_length(what)
    if count < 0:
        raise MalformedResponse(f"Fetch response: null {what}")
    return count
