"""What a log cleaner reads of a batch (record_spans, and record_keys for its map) and writes back (batch_with_records), and
transaction markers, checked with kafka-python's v2 batch builder and reader as the oracle."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from protocol.record_codec import (
    ControlMarker,
    batch_with_records,
    decode_control_marker,
    decompress,
    encode_control_batch,
)
from protocol.record_scan import record_keys, record_spans
from protocol.records import BATCH_HEADER_SIZE, CorruptRecordError, parse_batch_header, validate_batches

CODECS = [0, 1, 2, 3, 4]
RECORDS = [  # key, value, headers
    (b"a", b"first a", []),
    (b"b", None, []),  # a tombstone
    (b"a", b"second a", [("trace", b"\x01")]),
    (None, b"keyless", []),
    (b"c" * 200, b"v" * 1000, [("h", None)]),
]


def _batch(codec: int = 0, base_offset: int = 100, timestamps: tuple[int, ...] = (5000, 5010, 4990, 5020, 5005)
           ) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=42,
                                        producer_epoch=3, base_sequence=17, batch_size=1 << 20)
    for i, ((key, value, headers), ts) in enumerate(zip(RECORDS, timestamps, strict=True)):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    data = bytearray(builder.build())
    data[0:8] = base_offset.to_bytes(8, "big")
    data[12:16] = (7).to_bytes(4, "big")  # partition leader epoch (not under the CRC)
    return bytes(data)


def _section(data: bytes) -> bytes:
    header = parse_batch_header(data)
    return decompress(data[BATCH_HEADER_SIZE:], header.compression)


@pytest.mark.parametrize("codec", CODECS)
def test_spans_read_what_kafka_python_reads(codec: int) -> None:
    data = _batch(codec)
    header = parse_batch_header(data)
    spans = record_spans(_section(data), header)
    oracle = list(DefaultRecordBatch(data))
    assert [(header.base_offset + s.offset_delta, header.base_timestamp + s.timestamp_delta, s.key, s.has_value)
            for s in spans] == [(r.offset, r.timestamp, r.key, r.value is not None) for r in oracle]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("offset_deltas", [(0, 1, 2, 3, 4), (0, 63, 64, 8_191, 70_000)])
def test_keys_read_what_kafka_python_reads(codec: int, offset_deltas: tuple[int, ...]) -> None:
    # One-byte and longer varints alike (a delta of 64 or a key of 200 bytes needs two bytes).
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=42,
                                        producer_epoch=3, base_sequence=17, batch_size=1 << 20)
    for delta, (key, value, headers) in zip(offset_deltas, RECORDS, strict=True):
        builder.append(delta, timestamp=5000 - delta, key=key, value=value, headers=headers)
    data = bytes(builder.build())
    header = parse_batch_header(data)
    assert record_keys(_section(data), header) == [(r.offset, r.key) for r in DefaultRecordBatch(data)]


def test_keys_of_records_of_every_length_read_what_kafka_python_reads() -> None:
    # A record's length in one, two and three bytes (values of 10 B, 1 KiB and 20 KiB).
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for delta, size in enumerate((10, 1024, 20_480, 1024, 10)):
        builder.append(delta * 40, timestamp=5000, key=b"k%d" % delta, value=b"v" * size, headers=[])
    data = bytes(builder.build())
    header = parse_batch_header(data)
    assert record_keys(_section(data), header) == [(r.offset, r.key) for r in DefaultRecordBatch(data)]


def test_keys_of_a_section_that_does_not_hold_its_records_are_corrupt() -> None:
    data = _batch()
    header = parse_batch_header(data)
    section = _section(data)
    for broken in (section[:-3], section + b"\x00", section[:40]):
        with pytest.raises(CorruptRecordError):
            record_keys(broken, header)


@pytest.mark.parametrize("codec", CODECS)
def test_a_rebuilt_batch_keeps_its_offsets_producer_and_codec(codec: int) -> None:
    data = _batch(codec)
    header = parse_batch_header(data)
    section = _section(data)
    spans = record_spans(section, header)
    rebuilt = batch_with_records(header, section, [spans[1], spans[2]])
    (pos, new), = validate_batches(rebuilt, exact_count=False)
    oracle = DefaultRecordBatch(rebuilt)
    assert oracle.validate_crc()
    assert (new.base_offset, new.last_offset, new.records_count, new.compression) == (100, 104, 2, codec)
    assert (new.producer_id, new.producer_epoch, new.base_sequence, new.partition_leader_epoch) == (42, 3, 17, 7)
    assert new.last_sequence == header.last_sequence, "an idempotent producer's next sequence is unchanged"
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in oracle] == [
        (101, 5010, b"b", None, []), (102, 4990, b"a", b"second a", [("trace", b"\x01")])]
    assert new.max_timestamp == 5010 and new.base_timestamp == header.base_timestamp


def test_a_batch_with_every_record_kept_is_rebuilt_byte_for_byte() -> None:
    data = _batch()
    header = parse_batch_header(data)
    section = _section(data)
    assert batch_with_records(header, section, record_spans(section, header)) == data


def test_with_no_record_kept_an_empty_batch_keeps_the_producers_last_sequence() -> None:
    data = _batch(codec=1)
    header = parse_batch_header(data)
    empty = batch_with_records(header, _section(data), [])
    assert len(empty) == BATCH_HEADER_SIZE
    (_, new), = validate_batches(empty, exact_count=False)
    assert (new.records_count, new.compression, new.last_offset, new.last_sequence) == (0, 0, 104, header.last_sequence)
    assert list(DefaultRecordBatch(empty)) == []


def test_a_delete_horizon_becomes_the_base_timestamp_and_record_times_read_the_same() -> None:
    data = _batch(codec=3)
    header = parse_batch_header(data)
    section = _section(data)
    spans = record_spans(section, header)
    assert header.delete_horizon_ms is None
    marked = batch_with_records(header, section, spans[:3], delete_horizon_ms=86_405_000)
    (_, new), = validate_batches(marked, exact_count=False)
    assert new.delete_horizon_ms == 86_405_000 and new.attributes & 0x40
    assert [(r.offset, r.timestamp, r.key) for r in DefaultRecordBatch(marked)] == [
        (100, 5000, b"a"), (101, 5010, b"b"), (102, 4990, b"a")]
    # Cleaned again later: the horizon stays, and so do the record times.
    again = batch_with_records(new, _section(marked), record_spans(_section(marked), new)[2:])
    assert parse_batch_header(again).delete_horizon_ms == 86_405_000
    assert [(r.offset, r.timestamp) for r in DefaultRecordBatch(again)] == [(102, 4990)]


def test_a_section_that_does_not_hold_its_records_is_corrupt() -> None:
    data = _batch()
    header = parse_batch_header(data)
    section = _section(data)
    with pytest.raises(CorruptRecordError):
        record_spans(section[:-3], header)
    with pytest.raises(CorruptRecordError):
        record_spans(section + b"\x00", header)


def test_a_transaction_marker_reads_as_kafka_python_reads_control_batches() -> None:
    for marker in (ControlMarker(aborted=True, coordinator_epoch=7), ControlMarker(False, 0)):
        data = encode_control_batch(marker, 42, 3, 1_700_000_000_000, base_offset=9)
        (_, header), = validate_batches(data)
        assert header.is_control and header.is_transactional
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, -1)
        oracle = DefaultRecordBatch(data)
        assert oracle.validate_crc() and oracle.is_control_batch and oracle.is_transactional
        (record,) = list(oracle)
        assert record.key == (b"\x00\x00\x00\x00" if marker.aborted else b"\x00\x00\x00\x01")
        assert decode_control_marker(data, 0, header) == marker
