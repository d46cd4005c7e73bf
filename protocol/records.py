"""Record-batch header codec for magic v2 (sans-IO).

Only the 61-byte batch header is ever decoded here; the records that follow it stay
opaque bytes whatever their compression, because the broker stores and serves whole
batches.  Layout (big-endian), offsets relative to the start of the batch:

    0  base_offset            int64   not covered by the CRC
    8  batch_length           int32   bytes after this field
    12 partition_leader_epoch int32   not covered by the CRC
    16 magic                  int8
    17 crc                    uint32  CRC32C of bytes 21..end
    21 attributes             int16
    23 last_offset_delta      int32
    27 base_timestamp         int64
    35 max_timestamp          int64
    43 producer_id            int64
    51 producer_epoch         int16
    53 base_sequence          int32
    57 records_count          int32
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c

BATCH_HEADER_SIZE = 61
# Bytes before and including batch_length; batch_length counts what follows.
LOG_OVERHEAD = 12
CRC_START = 21
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
# KIP-534: the batch's base timestamp holds when its tombstones may be dropped (set by a cleaner).
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1

# The 61-byte header above, field by field; record_codec packs it too.
HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")

Buffer = bytes | bytearray | memoryview


class CorruptRecordError(ValueError):
    """A record batch that cannot be stored: torn, inconsistent or failing its CRC."""


class UnsupportedMagic(ValueError):
    """A batch in the legacy message format (magic 0 or 1), which this broker does not store.

    Deliberately not a CorruptRecordError: the two map to different Kafka error codes.
    """

    def __init__(self, magic: int, position: int) -> None:
        super().__init__(f"unsupported record batch magic {magic} at position {position}")
        self.magic = magic


@dataclass(slots=True)
class BatchHeader:
    """The decoded 61-byte header of one v2 batch; a plain value, owned by whoever parsed it."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """KIP-534: when a log cleaner may drop this batch's tombstones (None: not decided yet)."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap from INT32_MAX back to 0, not into negative numbers.
        return (self.base_sequence + self.last_offset_delta) % (INT32_MAX + 1)


def parse_batch_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Decode the header of the batch starting at ``pos``; raises CorruptRecordError if cut short."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"record batch header at position {pos} is truncated")
    return BatchHeader(*HEADER_STRUCT.unpack_from(buf, pos))


def _check_length(header: BatchHeader, pos: int) -> None:
    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch at position {pos} has impossible length {header.batch_length}")


def iter_batches(buf: Buffer) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each whole batch in ``buf``.

    Stops quietly at a trailing partial batch (a fetch response may end in one); checks
    neither magic nor CRC.  A length field too small to hold a header is an error, as
    nothing after it can be located.
    """
    pos = 0
    end = len(buf)
    while end - pos >= BATCH_HEADER_SIZE:
        header = BatchHeader(*HEADER_STRUCT.unpack_from(buf, pos))
        _check_length(header, pos)
        if pos + header.batch_length + LOG_OVERHEAD > end:
            return
        yield pos, header
        pos += header.batch_length + LOG_OVERHEAD


def whole_batches(buf: memoryview) -> tuple[memoryview, int | None]:
    """The whole batches at the start of ``buf`` (a fetch response may end in a partial one)
    and the offset after the last of them (None when there is none). Reads two fields per batch,
    checks nothing else: a length too small to hold a header keeps the rest, for the append's
    validation to refuse."""
    pos = 0
    end = len(buf)
    next_offset: int | None = None
    while end - pos >= BATCH_HEADER_SIZE:
        (batch_length,) = _INT32.unpack_from(buf, pos + 8)
        if batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            return buf, next_offset
        if pos + batch_length + LOG_OVERHEAD > end:
            break
        (base_offset,) = _INT64.unpack_from(buf, pos)
        (last_offset_delta,) = _INT32.unpack_from(buf, pos + 23)
        next_offset = base_offset + last_offset_delta + 1
        pos += batch_length + LOG_OVERHEAD
    return buf[:pos], next_offset


def validate_batch(buf: Buffer, pos: int, header: BatchHeader, exact_count: bool = True) -> None:
    """Check one batch whose header was parsed at ``pos``; raises CorruptRecordError.

    ``exact_count`` demands records_count == last_offset_delta + 1, which holds for every
    batch a producer builds; a compacted batch replicated from another broker may hold fewer
    records than its offset range.
    """
    if header.magic != 2:
        if header.magic in (0, 1):
            raise UnsupportedMagic(header.magic, pos)
        raise CorruptRecordError(f"record batch at position {pos} has unknown magic {header.magic}")
    _check_length(header, pos)
    end = pos + header.batch_length + LOG_OVERHEAD
    if end > len(buf):
        raise CorruptRecordError(f"record batch at position {pos} is truncated")
    if header.last_offset_delta < 0:
        raise CorruptRecordError(f"record batch at position {pos} has negative last offset delta")
    if header.records_count < 0:
        raise CorruptRecordError(f"record batch at position {pos} has negative record count")
    if exact_count:
        if header.records_count != header.last_offset_delta + 1:
            raise CorruptRecordError(
                f"record batch at position {pos} holds {header.records_count} records "
                f"but spans {header.last_offset_delta + 1} offsets"
            )
    elif header.records_count > header.last_offset_delta + 1:
        raise CorruptRecordError(f"record batch at position {pos} holds more records than offsets")
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if crc32c(view[pos + CRC_START : end]) != header.crc:
        raise CorruptRecordError(f"record batch at position {pos} fails its CRC check")


def validate_batches(buf: Buffer, exact_count: bool = True) -> list[tuple[int, BatchHeader]]:
    """Parse and check every batch of ``buf``, which must hold nothing but whole v2 batches.

    Returns (position, header) for each batch.  Any defect raises CorruptRecordError, or
    UnsupportedMagic for a legacy batch, before the caller has stored anything.
    """
    batches: list[tuple[int, BatchHeader]] = []
    pos = 0
    end = len(buf)
    while pos < end:
        if end - pos < BATCH_HEADER_SIZE:
            # A legacy message is shorter than a v2 header; report its magic if visible.
            if end - pos > MAGIC_OFFSET and buf[pos + MAGIC_OFFSET] in (0, 1):
                raise UnsupportedMagic(buf[pos + MAGIC_OFFSET], pos)
            raise CorruptRecordError(f"record batch header at position {pos} is truncated")
        header = BatchHeader(*HEADER_STRUCT.unpack_from(buf, pos))
        validate_batch(buf, pos, header, exact_count)
        batches.append((pos, header))
        pos += header.batch_length + LOG_OVERHEAD
    return batches


def set_base_offset(buf: bytearray, pos: int, offset: int) -> None:
    _INT64.pack_into(buf, pos, offset)


def set_partition_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + 12, epoch)


def set_log_append_time(buf: bytearray, pos: int, ts_ms: int) -> None:
    """Mark the batch at ``pos`` as LogAppendTime stamped ``ts_ms`` and refresh its CRC."""
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, ts_ms)
    (batch_length,) = _INT32.unpack_from(buf, pos + 8)
    end = pos + batch_length + LOG_OVERHEAD
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc32c(memoryview(buf)[pos + CRC_START : end]))
