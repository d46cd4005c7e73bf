"""The loops over every record of a batch that a log cleaner runs: where each record lies
(``record_spans``) and the keys it maps (``record_keys``). Sans-IO, like the rest of protocol/.

This module is compiled to C by mypyc when minikafka is installed on a machine with a C compiler
(setup.py): a clean reads every record of the dirty part of its log, and compiled these loops
run about ten times faster. Without a compiler it runs as the Python it is, with the same results;
so it keeps to what mypyc compiles (annotated locals, ``bytes`` in, no dynamic attributes).
"""

from __future__ import annotations

from dataclasses import dataclass

from .primitives import DecodeError
from .records import BatchHeader, CorruptRecordError

__all__ = ["RecordSpan", "record_keys", "record_spans", "zigzag_at"]


@dataclass(frozen=True, slots=True)
class RecordSpan:
    """Where one record lies in a batch's uncompressed records section, and what a log cleaner
    reads of it: its offset and timestamp deltas, its key and whether it has a value (a record
    without one is a tombstone). The record's bytes, ``section[start:end]``, are kept as they are."""

    start: int
    end: int
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    has_value: bool


def zigzag_at(buf: bytes, pos: int) -> tuple[int, int]:
    """The zigzag varint/varlong at ``pos`` and the position after it."""
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint longer than 10 bytes")


def record_spans(section: bytes, header: BatchHeader) -> list[RecordSpan]:
    """Every record of an (uncompressed) records section, read only as far as its value length.

    Raises CorruptRecordError when the section does not hold exactly ``records_count`` records."""
    spans: list[RecordSpan] = []
    pos = 0
    try:
        for _ in range(header.records_count):
            length, body = zigzag_at(section, pos)
            end = body + length
            if length < 1 or end > len(section):
                raise DecodeError(f"record length {length} does not fit the batch")
            timestamp_delta, cursor = zigzag_at(section, body + 1)  # after the attributes byte
            offset_delta, cursor = zigzag_at(section, cursor)
            key_length, cursor = zigzag_at(section, cursor)
            key = None
            if key_length >= 0:
                key = section[cursor:cursor + key_length]
                cursor += key_length
            elif key_length != -1:
                raise DecodeError(f"negative record key length {key_length}")
            value_length, cursor = zigzag_at(section, cursor)
            if cursor > end or value_length < -1:
                raise DecodeError("record fields run past the record")
            spans.append(RecordSpan(pos, end, offset_delta, timestamp_delta, key, value_length >= 0))
            pos = end
    except (DecodeError, IndexError) as exc:
        raise CorruptRecordError(f"record batch at offset {header.base_offset}: {exc}") from exc
    if pos != len(section):
        raise CorruptRecordError(f"record batch at offset {header.base_offset} has bytes after its records")
    return spans


def record_keys(section: bytes, header: BatchHeader) -> list[tuple[int, bytes | None]]:
    """(offset delta, key) of every record of an (uncompressed) records section: what a log
    cleaner maps, read with less work than ``record_spans`` (no span objects, the timestamp
    delta skipped, nothing read past the key).

    Raises CorruptRecordError when the section does not hold exactly ``records_count`` records."""
    keys: list[tuple[int, bytes | None]] = []
    pos = 0
    size = len(section)
    try:
        for _ in range(header.records_count):
            length, body = zigzag_at(section, pos)
            end = body + length
            if length < 1 or end > size:
                raise DecodeError(f"record length {length} does not fit the batch")
            cursor = body + 1  # after the attributes byte
            while section[cursor] & 0x80:  # the timestamp delta, skipped
                cursor += 1
            offset_delta, cursor = zigzag_at(section, cursor + 1)
            key_length, cursor = zigzag_at(section, cursor)
            if key_length >= 0:
                if cursor + key_length > end:
                    raise DecodeError("record key runs past the record")
                keys.append((offset_delta, section[cursor:cursor + key_length]))
            elif key_length == -1:
                keys.append((offset_delta, None))
            else:
                raise DecodeError(f"negative record key length {key_length}")
            pos = end
    except (DecodeError, IndexError) as exc:
        raise CorruptRecordError(f"record batch at offset {header.base_offset}: {exc}") from exc
    if pos != size:
        raise CorruptRecordError(f"record batch at offset {header.base_offset} has bytes after its records")
    return keys
