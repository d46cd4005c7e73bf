"""Batch builders and decoders for the storage tests; kafka-python is the format oracle."""

from __future__ import annotations

import os

from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from minikafka.storage.dir_io import DirGuard
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import Log, LogConfig
from minikafka.storage.segment import Segment

COMPRESSIONS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def make_batch(
    count: int = 1,
    *,
    timestamp: int = 1_000,
    value_size: int = 10,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    tag: bytes = b"",
) -> bytes:
    builder = MemoryRecordsBuilder(
        2, compression, 1 << 24, transactional=transactional, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence,
    )
    for i in range(count):
        value = (tag + b"-%d-" % i).ljust(value_size, b"x")
        assert builder.append(timestamp + i, b"k%d" % i, value) is not None
    builder.close()
    return bytes(builder.buffer())


def decode_batches(data: bytes) -> list:
    """kafka-python's view of every batch (validating each CRC)."""
    batches = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc(), "kafka-python rejects the CRC of a stored batch"
        batches.append(batch)
    return batches


def decode_records(data: bytes) -> list[tuple[int, int, bytes]]:
    """(offset, timestamp, value) of every record, decompressing as a consumer would."""
    return [(r.offset, r.timestamp, r.value) for batch in decode_batches(data) for r in batch]


def read_all(log: Log, start: int | None = None, max_offset: int | None = None) -> bytes:
    """Everything from ``start`` to the log end, following segment boundaries."""
    offset = log.log_start_offset if start is None else start
    parts = []
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 30, max_offset)
        if result.records is None:
            break
        with result.records as records:
            data = records.read_bytes()
        parts.append(data)
        offset = decode_batches(data)[-1].last_offset + 1
    return b"".join(parts)


def open_log(dir_path: str, config: LogConfig | None = None, *, clean: bool = False,
             channel: LogDirFailureChannel | None = None, **kwargs) -> Log:
    log_dir = os.path.dirname(dir_path)
    guard = DirGuard(log_dir, channel or LogDirFailureChannel())
    return Log.load(log_dir, dir_path, config or LogConfig(), guard, clean=clean, **kwargs)


def count_rebuilds(monkeypatch) -> list[int]:
    """The base offsets of the segments whose indexes get rebuilt from their .log from now on."""
    rebuilt: list[int] = []
    original = Segment._rebuild

    def counted(segment: Segment, validate: bool) -> int:
        rebuilt.append(segment.base_offset)
        return original(segment, validate)

    monkeypatch.setattr(Segment, "_rebuild", counted)
    return rebuilt
