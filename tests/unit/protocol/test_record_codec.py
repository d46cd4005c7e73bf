"""protocol.record_codec against kafka-python's v2 record batch reader and builder."""

from __future__ import annotations

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from protocol.record_codec import (
    CompressedBatchError,
    NewRecord,
    decode_records,
    encode_batch,
)
from protocol.records import CorruptRecordError, parse_batch_header, validate_batches

SAMPLES = [
    NewRecord(b"key-1", b"value-1"),
    NewRecord(None, b"no key"),
    NewRecord(b"tombstone", None),
    NewRecord(b"", b""),
    NewRecord(b"h", b"with headers", (("trace", b"\x00\x01"), ("empty", None), ("\u00fcml", b"x" * 300))),
    NewRecord(b"big" * 100, bytes(range(256)) * 20),
]


def test_kafka_python_reads_our_batch() -> None:
    data = encode_batch(SAMPLES, 1_700_000_000_123, base_offset=40)
    validate_batches(data)
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    assert (batch.base_offset, batch.records_count, batch.compression_type) == (40, len(SAMPLES), 0)
    assert (batch.producer_id, batch.base_sequence) == (-1, -1)
    read = list(batch)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in read] == [
        (40 + i, 1_700_000_000_123, s.key, s.value) for i, s in enumerate(SAMPLES)]
    assert [list(r.headers) for r in read] == [list(s.headers) for s in SAMPLES]


def _kafka_python_batch(base_offset: int, timestamps: list[int]) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, (sample, ts) in enumerate(zip(SAMPLES, timestamps, strict=False)):
        builder.append(i, timestamp=ts, key=sample.key, value=sample.value, headers=list(sample.headers))
    data = bytearray(builder.build())
    data[0:8] = base_offset.to_bytes(8, "big")
    return bytes(data)


def test_we_read_kafka_python_batches_back_to_back() -> None:
    first = _kafka_python_batch(0, [1000 + 7 * i for i in range(len(SAMPLES))])
    second = _kafka_python_batch(len(SAMPLES), [5000, 4000, 6000])
    decoded = list(decode_records(first + second + second[:30]))  # a partial batch at the end is ignored
    assert len(decoded) == 2
    (h1, r1), (h2, r2) = decoded
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in r1] == [
        (i, 1000 + 7 * i, s.key, s.value, list(s.headers)) for i, s in enumerate(SAMPLES)]
    assert [(r.offset, r.timestamp) for r in r2] == [(6, 5000), (7, 4000), (8, 6000)]
    assert h2.base_offset == len(SAMPLES)


def test_round_trip_keeps_everything() -> None:
    (header, records), = decode_records(encode_batch(SAMPLES, 42, base_offset=7))
    assert header.records_count == len(SAMPLES) and header.last_offset == 7 + len(SAMPLES) - 1
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (7 + i, 42, s.key, s.value, tuple(s.headers)) for i, s in enumerate(SAMPLES)]


def test_compressed_batches_are_refused() -> None:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=1, is_transactional=False,  # gzip
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=1, key=None, value=b"compressible " * 200, headers=[])
    data = bytes(builder.build())
    assert parse_batch_header(data).compression == 1
    with pytest.raises(CompressedBatchError):
        list(decode_records(data))


def test_corruption_is_detected() -> None:
    data = bytearray(encode_batch(SAMPLES, 42))
    data[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        list(decode_records(bytes(data)))


def test_record_length_mismatch_inside_a_valid_crc_is_refused() -> None:
    data = bytearray(encode_batch([NewRecord(b"k", b"v")], 42))
    data[61] += 2  # the record claims two more bytes than it has; re-seal the CRC
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    assert parse_batch_header(bytes(data)).records_count == 1
    with pytest.raises(CorruptRecordError):
        list(decode_records(bytes(data)))


def test_empty_batch_cannot_be_encoded() -> None:
    with pytest.raises(ValueError):
        encode_batch([], 0)
