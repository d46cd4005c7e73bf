"""The broker's .log segment files are Kafka's format: kafka-python's record decoder
(kafka.record.MemoryRecords) reads every record from them, batches keep the producer's codec,
offsets are contiguous across segments, and each file is named after its first offset."""

from __future__ import annotations

import re

import pytest
from kafka.record.memory_records import MemoryRecords

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import confluent_produce, create_topic, kafka_python_produce

pytestmark = pytest.mark.integration

TOPIC = "segments"
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
SEGMENT_BYTES = 64 * 1024


@pytest.fixture
def small_segment_broker(broker_factory) -> BrokerProcess:
    return broker_factory(overrides={"log.segment.bytes": str(SEGMENT_BYTES)})


def test_segments_decode_with_kafka_python(small_segment_broker: BrokerProcess) -> None:
    broker = small_segment_broker
    create_topic(broker.bootstrap, TOPIC, 1)
    sent: dict[bytes, tuple[bytes, str, int]] = {}  # key -> (value, codec, acked offset)
    for codec in CODEC_IDS:
        records = [(f"ck-{codec}-{i}".encode(), (f"{codec} {i} " + "payload " * 30).encode()) for i in range(400)]
        # Batches well under the segment size: a batch larger than a segment is refused.
        acks = confluent_produce(broker.bootstrap, TOPIC, records, partition=0, compression_type=codec,
                                 batch_size=16_384)
        sent.update({k: (v, codec, off) for (k, v), (_p, off) in zip(records, acks, strict=True)})
    for codec in ("none", "gzip", "lz4", "zstd"):
        records = [(f"kp-{codec}-{i}".encode(), (f"{codec} {i} " + "python " * 30).encode()) for i in range(300)]
        acks = kafka_python_produce(broker.bootstrap, TOPIC, records, partition=0, batch_size=16_384,
                                    compression_type=None if codec == "none" else codec)
        sent.update({k: (v, codec, off) for (k, v), (_p, off) in zip(records, acks, strict=True)})

    assert broker.stop() == 0, broker.describe_failure("unclean stop")

    partition_dir = broker.partition_dirs()[f"{TOPIC}-0"] / f"{TOPIC}-0"
    segments = sorted(partition_dir.glob("*.log"))
    assert len(segments) > 1, f"expected several segments of {SEGMENT_BYTES} bytes, found {segments}"
    found: dict[bytes, tuple[bytes, str, int]] = {}
    offsets: list[int] = []
    for segment in segments:
        assert re.fullmatch(r"\d{20}\.log", segment.name), segment.name
        data = segment.read_bytes()
        records = MemoryRecords(data)
        assert records.valid_bytes() == len(data), f"{segment.name}: trailing bytes after the last whole batch"
        first_batch = True
        while records.has_next():
            batch = records.next_batch()
            assert batch.magic == 2, f"{segment.name}: batch magic {batch.magic}"
            assert batch.validate_crc(), f"{segment.name}: CRC mismatch in batch at {batch.base_offset}"
            if first_batch:
                assert int(segment.stem) == batch.base_offset, (
                    f"{segment.name} starts with batch at offset {batch.base_offset}")
                first_batch = False
            batch_offsets = []
            for record in batch:
                key = bytes(record.key)
                codec = next(c for c in CODEC_IDS if key.decode().split("-")[1] == c)
                if key.startswith(b"ck-lz4"):
                    # librdkafka may send these raw; test_librdkafka_lz4_batches_are_stored_compressed
                    assert batch.compression_type in (0, CODEC_IDS["lz4"])
                else:
                    assert batch.compression_type == CODEC_IDS[codec], (
                        f"record {key!r} stored with codec {batch.compression_type}, produced with {codec}")
                found[key] = (bytes(record.value), codec, record.offset)
                batch_offsets.append(record.offset)
            assert batch_offsets == list(range(batch.base_offset, batch.last_offset + 1)), (
                f"{segment.name}: batch at {batch.base_offset} holds offsets {batch_offsets[:3]}...")
            offsets += batch_offsets
    assert offsets == list(range(len(offsets))), "offsets in the segments are not contiguous from 0"
    assert found == sent


def _stored_codecs(broker: BrokerProcess, partition_name: str) -> set[int]:
    partition_dir = broker.partition_dirs()[partition_name] / partition_name
    codecs = set()
    for segment in sorted(partition_dir.glob("*.log")):
        records = MemoryRecords(segment.read_bytes())
        while records.has_next():
            codecs.add(records.next_batch().compression_type)
    return codecs


def test_librdkafka_lz4_batches_are_stored_compressed(broker: BrokerProcess) -> None:
    """librdkafka enables LZ4 only when ApiVersions lists FindCoordinator (its sign of a broker
    newer than 0.8.2); without it every LZ4 batch silently goes out uncompressed."""
    create_topic(broker.bootstrap, "lz4-check", 1)
    records = [(f"lz4-{i}".encode(), b"compressible " * 40) for i in range(200)]
    confluent_produce(broker.bootstrap, "lz4-check", records, partition=0, compression_type="lz4")
    assert _stored_codecs(broker, "lz4-check-0") == {CODEC_IDS["lz4"]}, (
        "confluent-kafka's LZ4 batches reached the log uncompressed; does ApiVersions list FindCoordinator "
        f"(key 10)? advertised keys: {sorted(broker.advertised_versions())}")
