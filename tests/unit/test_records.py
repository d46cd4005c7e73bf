"""The v2 batch-header codec against kafka-python's record classes."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from protocol.records import (
    BATCH_HEADER_SIZE,
    INT32_MAX,
    BatchHeader,
    CorruptRecordError,
    UnsupportedMagic,
    iter_batches,
    parse_batch_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batches,
    whole_batches,
)

COMPRESSIONS = [0, 1, 2, 3, 4]


def build(count=3, *, compression=0, timestamp=5_000, magic=2, producer_id=-1, producer_epoch=-1,
          base_sequence=-1, transactional=False) -> bytearray:
    builder = MemoryRecordsBuilder(
        magic, compression, 1 << 20, transactional=transactional, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence,
    )
    for i in range(count):
        builder.append(timestamp + 10 * i, b"key%d" % i, b"value-%d" % i * 20)
    builder.close()
    return bytearray(builder.buffer())


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_header_fields_match_kafka_python(compression):
    buf = build(4, compression=compression, producer_id=77, producer_epoch=3, base_sequence=10,
                transactional=True)
    header = parse_batch_header(buf)
    oracle = DefaultRecordBatch(memoryview(buf))
    assert header.base_offset == oracle.base_offset == 0
    assert header.size == oracle.size_in_bytes == len(buf)
    assert header.magic == 2
    assert header.crc == oracle.crc
    assert header.compression == oracle.compression_type == compression
    assert header.last_offset_delta == oracle.last_offset_delta == 3
    assert header.last_offset == oracle.last_offset == 3
    assert header.base_timestamp == oracle.first_timestamp == 5_000
    assert header.max_timestamp == oracle.max_timestamp == 5_030
    assert header.producer_id == 77
    assert header.producer_epoch == 3
    assert header.base_sequence == 10
    assert header.last_sequence == oracle.last_sequence == 13
    assert header.records_count == 4
    assert header.is_transactional and not header.is_control
    assert header.timestamp_type == 0


def test_last_sequence_wraps_to_zero_and_is_undefined_without_sequence():
    header = BatchHeader(0, 100, 0, 2, 0, 0, 4, 0, 0, 1, 0, INT32_MAX - 1, 5)
    assert header.last_sequence == 2
    header.base_sequence = -1
    assert header.last_sequence == -1


def test_control_flag():
    header = BatchHeader(0, 100, 0, 2, 0, 0x20, 0, 0, 0, 1, 0, 0, 1)
    assert header.is_control and not header.is_transactional


def test_parse_rejects_short_buffer_and_accepts_memoryview_at_offset():
    buf = build(1)
    with pytest.raises(CorruptRecordError):
        parse_batch_header(buf[: BATCH_HEADER_SIZE - 1])
    padded = bytes(7) + bytes(buf)
    assert parse_batch_header(memoryview(padded), 7) == parse_batch_header(bytes(buf))


def test_iter_batches_over_concatenation_stops_at_partial_tail():
    first, second = build(2), build(5, compression=1)
    data = bytes(first + second)
    assert [(pos, h.records_count) for pos, h in iter_batches(data)] == [(0, 2), (len(first), 5)]
    assert [pos for pos, _ in iter_batches(data[:-1])] == [0]
    assert list(iter_batches(data[: BATCH_HEADER_SIZE - 1])) == []


def test_whole_batches_cuts_a_partial_tail_and_tells_the_next_offset():
    first, second = build(3), build(2)
    set_base_offset(first, 0, 10)
    set_base_offset(second, 0, 13)
    joined = memoryview(bytes(first + second))
    for cut in range(len(joined) + 1):
        records, next_offset = whole_batches(joined[:cut])
        if cut < len(first):
            assert (len(records), next_offset) == (0, None)
        elif cut < len(joined):
            assert (len(records), next_offset) == (len(first), 13)
        else:
            assert (len(records), next_offset) == (len(joined), 15)
        assert records.obj is joined.obj  # a view, not a copy


def test_whole_batches_keeps_an_impossible_length_for_validation_to_refuse():
    buf = build(1) + build(1)
    struct.pack_into(">i", buf, len(buf) // 2 + 8, 3)
    records, next_offset = whole_batches(memoryview(buf))
    assert (len(records), next_offset) == (len(buf), 1)
    with pytest.raises(CorruptRecordError):
        validate_batches(records)


def test_iter_batches_rejects_impossible_length():
    buf = build(1)
    struct.pack_into(">i", buf, 8, 3)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(buf))


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_validate_accepts_every_compression(compression):
    data = bytes(build(3, compression=compression) + build(1))
    batches = validate_batches(data)
    assert [h.records_count for _, h in batches] == [3, 1]
    assert batches[1][0] == parse_batch_header(data).size


def test_validate_empty_buffer_is_empty_list():
    assert validate_batches(b"") == []


@pytest.mark.parametrize("cut", [1, 10, 60, 70])
def test_validate_rejects_truncated_batch(cut):
    data = bytes(build(3))
    with pytest.raises(CorruptRecordError):
        validate_batches(data[:-cut] if cut < len(data) else data[:1])


def test_validate_rejects_flipped_payload_byte():
    buf = build(3)
    buf[-5] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batches(buf)


def refresh_crc(buf: bytearray) -> None:
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))


def test_validate_rejects_bad_count_and_negative_count():
    buf = build(3)
    struct.pack_into(">i", buf, 57, 2)
    refresh_crc(buf)
    with pytest.raises(CorruptRecordError, match="spans"):
        validate_batches(bytes(buf))
    # A replicated compacted batch may hold fewer records than offsets, never more.
    assert validate_batches(bytes(buf), exact_count=False)
    struct.pack_into(">i", buf, 57, 4)
    refresh_crc(buf)
    with pytest.raises(CorruptRecordError, match="more records"):
        validate_batches(bytes(buf), exact_count=False)
    struct.pack_into(">i", buf, 57, -1)
    refresh_crc(buf)
    with pytest.raises(CorruptRecordError, match="negative"):
        validate_batches(bytes(buf), exact_count=False)


@pytest.mark.parametrize("magic", [0, 1])
def test_validate_rejects_legacy_magic(magic):
    data = bytes(build(2, magic=magic))
    with pytest.raises(UnsupportedMagic) as info:
        validate_batches(data)
    assert info.value.magic == magic
    assert not isinstance(info.value, CorruptRecordError)


def test_validate_rejects_unknown_magic():
    buf = build(1)
    buf[16] = 3
    with pytest.raises(CorruptRecordError) as info:
        validate_batches(buf)
    assert not isinstance(info.value, UnsupportedMagic)


def test_offset_and_epoch_rewrites_keep_crc_valid():
    buf = build(3, compression=3)
    set_base_offset(buf, 0, 1_234_567_890_123)
    set_partition_leader_epoch(buf, 0, 42)
    validate_batches(buf)
    oracle = DefaultRecordBatch(memoryview(buf))
    assert oracle.validate_crc()
    assert oracle.base_offset == 1_234_567_890_123
    assert oracle.leader_epoch == 42
    assert [r.offset for r in oracle] == [1_234_567_890_123 + i for i in range(3)]


@pytest.mark.parametrize("compression", [0, 4])
def test_log_append_time_rewrites_timestamps_for_consumers(compression):
    first = build(2)
    second = build(3, compression=compression)
    buf = first + second
    set_log_append_time(buf, len(first), 99_999)
    validate_batches(buf)
    batches = list(MemoryRecords(bytes(buf)))
    assert [b.timestamp_type for b in batches] == [0, 1]
    assert batches[1].validate_crc()
    assert [r.timestamp for r in batches[1]] == [99_999] * 3
    assert [r.timestamp for r in batches[0]] == [5_000, 5_010]
    header = parse_batch_header(buf, len(first))
    assert header.timestamp_type == 1 and header.max_timestamp == 99_999
    assert header.compression == compression
