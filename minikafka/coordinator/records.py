"""What the two coordinators' records share (Kafka 4's coordinator-common): keys and values of
__consumer_offsets and __transaction_state are an int16 version followed by that version's
schema, and a key (group id, transactional id) picks its partition with Java's String.hashCode,
so a Kafka tool agrees on where it lives.

Immutable, built at import time; any caller may use it.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from construct import Compiled

from protocol.primitives import Message
from protocol.schema import Field, message_struct, parse_versions

_VERSION = struct.Struct(">h")


class RecordFormatError(ValueError):
    """Bytes that are not a known version of the expected record schema."""


class VersionedSchema:
    """A schema whose encoded form is an int16 version followed by the body of that version.

    Compiles each version on first use and keeps it; immutable apart from that cache.
    """

    def __init__(self, name: str, versions: str, flexible: str, fields: Sequence[Field]) -> None:
        self.name = name
        self.versions = parse_versions(versions)
        self.flexible = parse_versions(flexible)
        self.fields = tuple(fields)
        self._compiled: dict[int, Compiled] = {}

    def supports(self, version: int) -> bool:
        return self.versions is not None and self.versions[0] <= version <= self.versions[1]

    def compiled(self, version: int) -> Compiled:
        schema = self._compiled.get(version)
        if schema is None:
            flexible = self.flexible is not None and self.flexible[0] <= version <= self.flexible[1]
            schema = self._compiled[version] = message_struct(self.name, self.fields, version, flexible).compile()
        return schema

    def encode(self, version: int, body: Mapping[str, Any]) -> bytes:
        if not self.supports(version):
            raise ValueError(f"{self.name} has no version {version}")
        return _VERSION.pack(version) + self.compiled(version).build(body)

    def decode_body(self, version: int, stream: io.BytesIO) -> Message:
        if not self.supports(version):
            raise RecordFormatError(f"unknown {self.name} version {version}")
        try:
            return self.compiled(version).parse_stream(stream)
        except Exception as exc:  # construct and our primitives raise several kinds
            raise RecordFormatError(f"unreadable {self.name} v{version}: {exc}") from exc


def read_version(data: bytes, what: str) -> tuple[int, io.BytesIO]:
    """A record's version and the stream of its body (RecordFormatError if it has no version)."""
    if len(data) < 2:
        raise RecordFormatError(f"{what} of {len(data)} bytes has no version")
    stream = io.BytesIO(data)
    (version,) = _VERSION.unpack(stream.read(2))
    return version, stream


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition_for(group_id: str, partition_count: int) -> int:
    """The __consumer_offsets partition of a group, as Kafka computes it (so a Kafka tool agrees)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partition_count
