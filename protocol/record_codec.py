"""Individual records of magic v2 batches, and whole uncompressed batches (sans-IO).

The produce and fetch paths never come here: they move batches as opaque bytes
(`protocol.records` reads only batch headers). This codec serves the broker's own
internal topics, whose records the broker writes and reads back itself (the group
coordinator's `__consumer_offsets`), and ListOffsets, which decodes the one batch holding
its answer (`decompress` opens the records section of a batch of any codec Kafka has).

Record layout inside a batch (varints are zigzag-encoded):

    length varint, attributes int8, timestamp_delta varlong, offset_delta varint,
    key_length varint (-1: null), key, value_length varint (-1: null), value,
    header_count varint, then per header: key_length varint, key (UTF-8),
    value_length varint (-1: null), value
"""

from __future__ import annotations

import gzip
import io
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import cramjam
from crc32c import crc32c

from .primitives import DecodeError, read_exact, read_varint, read_varlong, varint_bytes, varlong_bytes
from .record_scan import RecordSpan, record_spans, zigzag_at
from .records import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    CRC_START,
    DELETE_HORIZON_MASK,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TRANSACTIONAL_MASK,
    BatchHeader,
    Buffer,
    CorruptRecordError,
    iter_batches,
    validate_batch,
)

__all__ = [
    "CompressedBatchError",
    "ControlMarker",
    "batch_with_records",
    "decode_control_marker",
    "encode_control_batch",
    "keyless_records",
    "compress",
    "decompress",
    "recompress_batch",
    "NewRecord",
    "Record",
    "decode_batch_records",
    "decode_records",
    "encode_batch",
    "encode_record",
]

_NULL_LENGTH = varint_bytes(-1)


class CompressedBatchError(CorruptRecordError):
    """A compressed batch reached a decoder that only reads uncompressed ones."""


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to encode: offsets and timestamps are given by its batch."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def _length_prefixed(data: bytes | None) -> bytes:
    if data is None:
        return _NULL_LENGTH
    return varint_bytes(len(data)) + data


def encode_record(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> bytes:
    """One record, length prefix included."""
    parts = [b"\x00", varlong_bytes(timestamp_delta), varint_bytes(offset_delta),
             _length_prefixed(key), _length_prefixed(value), varint_bytes(len(headers))]
    for header_key, header_value in headers:
        parts.append(_length_prefixed(header_key.encode("utf-8")))
        parts.append(_length_prefixed(header_value))
    body = b"".join(parts)
    return varint_bytes(len(body)) + body


def encode_batch(
    records: Sequence[NewRecord], timestamp_ms: int, *, base_offset: int = 0, partition_leader_epoch: int = -1,
    producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1, base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
) -> bytes:
    """An uncompressed v2 batch with CreateTime `timestamp_ms` on every record (``transactional``:
    part of its producer's transaction).

    The broker's log assigns the real base offset and leader epoch on append; the values
    given here only matter to a reader of the bytes as they are.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    body = b"".join(encode_record(delta, 0, r.key, r.value, r.headers) for delta, r in enumerate(records))
    batch_length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body)
    buf = bytearray(BATCH_HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        buf, 0, base_offset, batch_length, partition_leader_epoch, 2, 0, TRANSACTIONAL_MASK if transactional else 0,
        len(records) - 1, timestamp_ms, timestamp_ms, producer_id, producer_epoch, base_sequence, len(records),
    )
    buf += body
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[CRC_START:]))
    return bytes(buf)


def _read_bytes(stream: io.BytesIO, what: str) -> bytes | None:
    length = read_varint(stream)
    if length < 0:
        if length != -1:
            raise DecodeError(f"negative {what} length {length}")
        return None
    return read_exact(stream, length, what)


def decode_batch_records(buf: Buffer, pos: int, header: BatchHeader) -> list[Record]:
    """The records of the (already validated) uncompressed batch at `pos`."""
    if header.compression:
        raise CompressedBatchError(
            f"record batch at offset {header.base_offset} is compressed (codec {header.compression})")
    return decode_records_section(bytes(buf[pos + BATCH_HEADER_SIZE : pos + header.size]), header)


NO_COMPRESSION, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
# Java's snappy-java (Kafka's producer) frames snappy blocks after this header.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16


def decompress(section: bytes, codec: int) -> bytes:
    """A batch's records section, uncompressed (Kafka's codecs: gzip, snappy raw or
    xerial-framed, LZ4 frames, zstd). Raises CorruptRecordError for data that does not decode."""
    try:
        if codec == NO_COMPRESSION:
            return section
        if codec == GZIP:
            return gzip.decompress(section)
        if codec == SNAPPY:
            return _snappy(section)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(section))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(section))
    except (OSError, EOFError, ValueError, cramjam.DecompressionError, struct.error) as exc:
        raise CorruptRecordError(f"records compressed with codec {codec} do not decompress: {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec {codec}")


CODECS = {"uncompressed": NO_COMPRESSION, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
_XERIAL_BLOCK = 32 * 1024


def compress(section: bytes, codec: int) -> bytes:
    """A records section compressed as Kafka's clients write it (snappy: xerial-framed blocks, as
    Java producers do and every client reads; LZ4: frames)."""
    if codec == NO_COMPRESSION:
        return section
    if codec == GZIP:
        return gzip.compress(section)
    if codec == SNAPPY:
        out = bytearray(_XERIAL_MAGIC + struct.pack(">ii", 1, 1))
        for start in range(0, len(section), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(section[start:start + _XERIAL_BLOCK]))
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(section))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(section))
    raise ValueError(f"unknown compression codec {codec}")


def recompress_batch(buf: Buffer, pos: int, header: BatchHeader, codec: int) -> bytes:
    """The batch at ``pos`` with its records section stored with ``codec`` instead (every
    other header field kept; batch length and CRC recomputed). The records are not decoded."""
    section = decompress(bytes(buf[pos + BATCH_HEADER_SIZE:pos + header.size]), header.compression)
    body = compress(section, codec)
    attributes = (header.attributes & ~COMPRESSION_MASK) | codec
    out = bytearray(BATCH_HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        out, 0, header.base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body), header.partition_leader_epoch,
        header.magic, 0, attributes, header.last_offset_delta, header.base_timestamp, header.max_timestamp,
        header.producer_id, header.producer_epoch, header.base_sequence, header.records_count)
    out += body
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def _snappy(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    position = _XERIAL_HEADER_SIZE
    while position < len(data):
        (length,) = struct.unpack_from(">i", data, position)
        position += 4
        out += bytes(cramjam.snappy.decompress_raw(data[position:position + length]))
        position += length
    return bytes(out)


def decode_records_section(section: bytes, header: BatchHeader) -> list[Record]:
    """The records of a batch from its (uncompressed) records section, the bytes after the header."""
    stream = io.BytesIO(section)
    records: list[Record] = []
    try:
        for _ in range(header.records_count):
            length = read_varint(stream)
            start = stream.tell()
            stream.read(1)  # attributes: unused by v2 records
            timestamp_delta = read_varlong(stream)
            offset_delta = read_varint(stream)
            key = _read_bytes(stream, "record key")
            value = _read_bytes(stream, "record value")
            header_count = read_varint(stream)
            if header_count < 0:
                raise DecodeError(f"negative header count {header_count}")
            headers = []
            for _ in range(header_count):
                raw_key = _read_bytes(stream, "header key")
                if raw_key is None:
                    raise DecodeError("null header key")
                headers.append((raw_key.decode("utf-8"), _read_bytes(stream, "header value")))
            if stream.tell() - start != length:
                raise DecodeError(f"record length {length} does not match its fields")
            records.append(Record(header.base_offset + offset_delta, header.base_timestamp + timestamp_delta,
                                  key, value, tuple(headers)))
    except (DecodeError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"record batch at offset {header.base_offset}: {exc}") from exc
    if stream.tell() != len(section):
        raise CorruptRecordError(f"record batch at offset {header.base_offset} has bytes after its records")
    return records


# Control records (transaction markers): key = version int16 (0) + type int16 (0 abort, 1 commit),
# value = version int16 (0) + coordinator epoch int32; Kafka's ControlRecordType and
# EndTransactionMarker.
_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")
ABORT_MARKER, COMMIT_MARKER = 0, 1


@dataclass(frozen=True, slots=True)
class ControlMarker:
    """What a transaction marker says: the transaction was aborted (else committed), and by which
    epoch of its coordinator."""

    aborted: bool
    coordinator_epoch: int


def encode_control_batch(marker: ControlMarker, producer_id: int, producer_epoch: int, timestamp_ms: int,
                         *, base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """A transaction marker: a control batch of one record, transactional, uncompressed."""
    key = _CONTROL_KEY.pack(0, ABORT_MARKER if marker.aborted else COMMIT_MARKER)
    value = _MARKER_VALUE.pack(0, marker.coordinator_epoch)
    body = encode_record(0, 0, key, value)
    out = bytearray(BATCH_HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        out, 0, base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body), partition_leader_epoch, 2, 0,
        TRANSACTIONAL_MASK | CONTROL_MASK, 0, timestamp_ms, timestamp_ms, producer_id, producer_epoch, NO_SEQUENCE, 1)
    out += body
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def decode_control_marker(buf: Buffer, pos: int, header: BatchHeader) -> ControlMarker | None:
    """The transaction marker of the control batch at ``pos`` (None: another kind of control
    record, which a broker passes on untouched)."""
    section = decompress(bytes(buf[pos + BATCH_HEADER_SIZE:pos + header.size]), header.compression)
    return control_marker(header, decode_records_section(section, header))


def control_marker(header: BatchHeader, records: list[Record]) -> ControlMarker | None:
    """The transaction marker of a control batch, from its decoded records (None: another kind
    of control record)."""
    key = records[0].key if records else None
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError(f"control batch at offset {header.base_offset} has no control record key")
    _, kind = _CONTROL_KEY.unpack_from(key)
    if kind not in (ABORT_MARKER, COMMIT_MARKER):
        return None
    value = records[0].value
    if value is None or len(value) < _MARKER_VALUE.size:
        raise CorruptRecordError(f"transaction marker at offset {header.base_offset} has no coordinator epoch")
    return ControlMarker(kind == ABORT_MARKER, _MARKER_VALUE.unpack_from(value)[1])


def keyless_records(buf: Buffer, pos: int, header: BatchHeader) -> list[int]:
    """Indexes (within the batch) of the records without a key of the validated batch at ``pos``,
    whatever its codec: a compacted topic refuses such a batch, as Kafka's LogValidator does."""
    section = decompress(bytes(buf[pos + BATCH_HEADER_SIZE:pos + header.size]), header.compression)
    return [i for i, span in enumerate(record_spans(section, header)) if span.key is None]


def _with_timestamp_delta(record: bytes, timestamp_delta: int) -> bytes:
    """A record's bytes (length prefix included) with another timestamp delta."""
    length, body = zigzag_at(record, 0)
    _, rest = zigzag_at(record, body + 1)
    new_body = record[body:body + 1] + varlong_bytes(timestamp_delta) + record[rest:]
    return varint_bytes(len(new_body)) + new_body


def batch_with_records(header: BatchHeader, section: bytes, kept: Sequence[RecordSpan],
                       delete_horizon_ms: int | None = None) -> bytes:
    """The batch rebuilt with only the ``kept`` records of its uncompressed ``section``, as a log
    cleaner writes it: base offset, last offset delta, producer id, epoch and base sequence,
    partition leader epoch and codec are kept, so offsets and idempotent producers' sequences
    read as before. With no record kept, an empty batch (header only, uncompressed), which keeps a
    producer's last sequence. ``delete_horizon_ms`` (KIP-534) becomes the base timestamp, with its
    attribute set, and every kept record's timestamp delta is re-encoded against it."""
    base_timestamp = header.base_timestamp
    attributes = header.attributes
    if delete_horizon_ms is not None:
        base_timestamp, attributes = delete_horizon_ms, attributes | DELETE_HORIZON_MASK
    if not kept:
        body = b""
        attributes &= ~COMPRESSION_MASK
        max_timestamp = header.max_timestamp
    else:
        if delete_horizon_ms is None:
            records = b"".join(section[span.start:span.end] for span in kept)
        else:
            shift = header.base_timestamp - base_timestamp
            records = b"".join(_with_timestamp_delta(section[span.start:span.end], span.timestamp_delta + shift)
                               for span in kept)
        body = compress(records, header.compression)
        max_timestamp = header.max_timestamp if header.timestamp_type else max(
            header.base_timestamp + span.timestamp_delta for span in kept)
    out = bytearray(BATCH_HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        out, 0, header.base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body), header.partition_leader_epoch,
        header.magic, 0, attributes, header.last_offset_delta, base_timestamp, max_timestamp, header.producer_id,
        header.producer_epoch, header.base_sequence, len(kept))
    out += body
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def decode_records(buf: Buffer) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Every whole batch of `buf` with its records; a trailing partial batch is ignored.

    Each batch is checked (magic, CRC) before its records are read; a defect raises
    CorruptRecordError, a compressed batch CompressedBatchError.
    """
    for pos, header in iter_batches(buf):
        validate_batch(buf, pos, header, exact_count=False)
        yield header, decode_batch_records(buf, pos, header)
