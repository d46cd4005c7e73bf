"""Log: offsets, reads, rolling, retention and leader epochs, checked with kafka-python's decoder."""

from __future__ import annotations

import os
import random
import struct

import pytest
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.storage.errors import (
    CorruptRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnsupportedMagic,
)
from minikafka.storage.log import LogConfig, parse_partition_dir
from tests.unit.storage.helpers import (
    COMPRESSIONS,
    decode_batches,
    decode_records,
    make_batch,
    open_log,
    read_all,
)


def segment_files(log) -> list[str]:
    return sorted(name for name in os.listdir(log.dir_path) if name.endswith(".log"))


@pytest.mark.parametrize("compression", sorted(COMPRESSIONS.values()))
def test_offsets_are_assigned_from_the_log_end_and_records_decode(make_log, compression):
    log = make_log()
    first = log.append_as_leader(make_batch(3, compression=compression, tag=b"a"), 0, 10)
    second = log.append_as_leader(make_batch(2, compression=compression, tag=b"b"), 0, 11)
    assert (first.base_offset, first.last_offset, first.records_count) == (0, 2, 3)
    assert (second.base_offset, second.last_offset) == (3, 4)
    assert not first.duplicate and first.log_append_time_ms == -1
    assert log.log_end_offset == 5
    records = decode_records(read_all(log))
    assert [offset for offset, _, _ in records] == [0, 1, 2, 3, 4]
    assert [value[:4] for _, _, value in records] == [b"a-0-", b"a-1-", b"a-2-", b"b-0-", b"b-1-"]
    assert [ts for _, ts, _ in records] == [1000, 1001, 1002, 1000, 1001]


def test_segment_file_on_disk_is_plain_kafka_batches(make_log):
    log = make_log()
    for i in range(4):
        log.append_as_leader(make_batch(2, tag=b"%d" % i), 7, 0)
    with open(os.path.join(log.dir_path, "00000000000000000000.log"), "rb") as handle:
        batches = decode_batches(handle.read())
    assert [(b.base_offset, b.last_offset, b.leader_epoch) for b in batches] == [
        (0, 1, 7), (2, 3, 7), (4, 5, 7), (6, 7, 7)
    ]


def test_several_batches_in_one_append(make_log):
    log = make_log()
    result = log.append_as_leader(make_batch(2) + make_batch(3, compression=1) + make_batch(1), 0, 0)
    assert (result.base_offset, result.last_offset, result.records_count) == (0, 5, 6)
    assert [(b.base_offset, b.last_offset) for b in decode_batches(read_all(log))] == [(0, 1), (2, 4), (5, 5)]


def test_log_append_time_stamps_batches(make_log):
    log = make_log(LogConfig(message_timestamp_type="LogAppendTime"))
    result = log.append_as_leader(make_batch(3, compression=2), 0, 123_456)
    assert result.log_append_time_ms == 123_456
    (batch,) = decode_batches(read_all(log))
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch] == [123_456] * 3


def test_reads_across_several_segments(make_log):
    log = make_log(LogConfig(segment_bytes=1_000))
    for i in range(40):
        log.append_as_leader(make_batch(2, tag=b"%d" % i), 0, i)
    assert len(log.segments) > 3
    assert segment_files(log)[0] == "00000000000000000000.log"
    assert segment_files(log)[1] == f"{log.segments[1].base_offset:020d}.log"
    records = decode_records(read_all(log))
    assert [offset for offset, _, _ in records] == list(range(80))
    for offset in range(80):
        result = log.read(offset, 1 << 20)
        batches = decode_batches(result.records.read_bytes())
        result.records.close()
        assert batches[0].base_offset <= offset <= batches[0].last_offset
        segment = log.segments[max(i for i, s in enumerate(log.segments) if s.base_offset <= offset)]
        # A read never leaves the segment holding the fetch offset.
        assert batches[-1].last_offset < segment.next_offset


def test_bytes_below_an_offset_are_what_a_replica_fetching_from_it_holds(make_log):
    log = make_log(LogConfig(segment_bytes=1_000))
    sizes = []
    for i in range(40):
        log.append_as_leader(make_batch(2, tag=b"%d" % i), 0, i)
        sizes.append(log.size_bytes)
    assert len(log.segments) > 3
    assert log.bytes_below(-1) == log.bytes_below(0) == 0
    # Offsets 2i and 2i+1 are batch i: below its first offset lie the batches before it.
    for i in range(1, 40):
        assert log.bytes_below(2 * i) == sizes[i - 1]
    assert log.bytes_below(log.log_end_offset) == log.size_bytes


def test_read_caps(make_log):
    log = make_log()
    sizes = []
    for i in range(10):
        data = make_batch(2, tag=b"%d" % i)
        sizes.append(len(data))
        log.append_as_leader(data, 0, 0)

    def offsets(result):
        if result.records is None:
            return None
        with result.records as records:
            return [(b.base_offset, b.last_offset) for b in decode_batches(records.read_bytes())]

    # max_bytes: whole batches only, never more than asked.
    assert offsets(log.read(0, sizes[0] * 3 + 5)) == [(0, 1), (2, 3), (4, 5)]
    assert offsets(log.read(0, sizes[0] * 3)) == [(0, 1), (2, 3), (4, 5)]
    assert offsets(log.read(0, sizes[0] * 3 - 1)) == [(0, 1), (2, 3)]
    # A fetch offset inside a batch starts at that batch.
    assert offsets(log.read(3, sizes[0]))[0] == (2, 3)
    # At least one batch even when it alone exceeds max_bytes, unless told otherwise.
    assert offsets(log.read(4, 10)) == [(4, 5)]
    assert offsets(log.read(4, 10, min_one_batch=False)) is None
    # max_offset (the high watermark) excludes any batch reaching it.
    assert offsets(log.read(0, 1 << 20, max_offset=6)) == [(0, 1), (2, 3), (4, 5)]
    assert offsets(log.read(0, 1 << 20, max_offset=5)) == [(0, 1), (2, 3)]
    assert offsets(log.read(4, 1 << 20, max_offset=5)) is None
    assert offsets(log.read(4, 1 << 20, max_offset=4)) is None
    # Fetching at the log end returns nothing; beyond it or below the start is an error.
    result = log.read(20, 100)
    assert result.records is None and result.log_end_offset == 20
    with pytest.raises(OffsetOutOfRangeError):
        log.read(21, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_fetch_at_the_log_end_does_no_io(make_log, monkeypatch):
    log = make_log()
    for _ in range(50):
        log.append_as_leader(make_batch(1, value_size=200), 0, 0)

    def no_pread(*args):
        raise AssertionError("read touched record data")

    monkeypatch.setattr(os, "pread", no_pread)
    assert log.read(log.log_end_offset, 1 << 20).records is None
    # Near the end too: the active segment's unindexed tail is held in memory.
    result = log.read(log.log_end_offset - 3, 1 << 20, max_offset=log.log_end_offset - 1)
    monkeypatch.undo()
    assert [b.base_offset for b in decode_batches(result.records.read_bytes())] == [47, 48]
    result.records.close()


def test_index_lookups_on_a_big_log(make_log):
    log = make_log(LogConfig(segment_bytes=300_000, index_interval_bytes=1024))
    rng = random.Random(7)
    templates = [make_batch(n, value_size=rng.choice((5, 40, 300))) for n in (1, 2, 3, 5) for _ in range(3)]
    for i in range(6_000):
        log.append_as_leader(templates[i % len(templates)], 0, 0)
    assert len(log.segments) >= 3
    expected = {}
    for batch in decode_batches(read_all(log)):
        for offset in range(batch.base_offset, batch.last_offset + 1):
            expected[offset] = batch.base_offset
    assert len(expected) == log.log_end_offset
    assert len(log.segments[0].offset_index) > 100
    probes = rng.sample(range(log.log_end_offset), 1500) + [0, log.log_end_offset - 1]
    for offset in probes:
        result = log.read(offset, 1)
        header = decode_batches(result.records.read_bytes())
        result.records.close()
        assert header[0].base_offset == expected[offset], offset
    # The index files are Kafka's: 8-byte (relative offset, position) entries, increasing.
    segment = log.segments[1]
    with open(segment.offset_index.file.path, "rb") as handle:
        raw = handle.read()
    entries = list(struct.iter_unpack(">ii", raw))
    assert len(entries) == len(segment.offset_index) > 10
    with open(segment.log_path, "rb") as handle:
        data = handle.read()
    for rel, position in entries:
        batch = decode_batches(data[position:])[0]
        assert batch.last_offset == segment.base_offset + rel
    with open(segment.time_index.file.path, "rb") as handle:
        times = list(struct.iter_unpack(">qi", handle.read()))
    assert times and all(a[0] < b[0] for a, b in zip(times, times[1:], strict=False))


def test_lookups_after_reopen_use_the_index_files(make_log, log_dir):
    log = make_log(LogConfig(segment_bytes=20_000, index_interval_bytes=512))
    for i in range(600):
        log.append_as_leader(make_batch(2, value_size=30, tag=b"%d" % i), 0, 0)
    expected = decode_records(read_all(log))
    log.flush()
    log.close()
    reopened = open_log(log.dir_path, LogConfig(segment_bytes=20_000, index_interval_bytes=512), clean=True)
    assert reopened.log_end_offset == 1200
    assert decode_records(read_all(reopened)) == expected
    assert decode_records(read_all(reopened, start=777))[0][0] == 776
    reopened.close()


def test_roll_by_size_and_by_time(make_log):
    log = make_log(LogConfig(segment_bytes=500, segment_ms=1_000))
    batch = make_batch(1, value_size=100)
    log.append_as_leader(batch, 0, 0)
    log.append_as_leader(batch, 0, 1)
    assert len(log.segments) == 1
    while len(log.segments) == 1:
        log.append_as_leader(batch, 0, 2)
    assert all(s.size <= 500 for s in log.segments)
    assert log.segments[1].base_offset == log.segments[0].next_offset
    count = len(log.segments)
    log.append_as_leader(batch, 0, 500)
    assert len(log.segments) == count
    log.append_as_leader(batch, 0, 1_200)  # active segment started at 2
    assert len(log.segments) == count + 1
    assert log.segments[-1].size == len(batch)
    # Each roll leaves a producer-state snapshot named after the new segment.
    assert f"{log.segments[-1].base_offset:020d}.snapshot" in os.listdir(log.dir_path)


def test_append_larger_than_limits_is_rejected(make_log):
    log = make_log(LogConfig(max_message_bytes=300, segment_bytes=1_000))
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(make_batch(1, value_size=400), 0, 0)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(b"".join(make_batch(1, value_size=200) for _ in range(6)), 0, 0)
    assert log.log_end_offset == 0 and log.size_bytes == 0


def test_corrupt_batch_rejects_the_whole_append(make_log):
    log = make_log()
    log.append_as_leader(make_batch(2), 0, 0)
    good = make_batch(2)
    bad = bytearray(make_batch(3))
    bad[-3] ^= 0x55
    for records, error in [
        (good + bytes(bad), CorruptRecordError),
        (good + good[:-1], CorruptRecordError),
        (b"", CorruptRecordError),
    ]:
        with pytest.raises(error):
            log.append_as_leader(records, 0, 0)
    from kafka.record.memory_records import MemoryRecordsBuilder

    legacy = MemoryRecordsBuilder(1, 0, 1 << 10)
    legacy.append(0, None, b"old")
    legacy.close()
    with pytest.raises(UnsupportedMagic):
        log.append_as_leader(good + bytes(legacy.buffer()), 0, 0)
    assert log.log_end_offset == 2
    assert [b.base_offset for b in decode_batches(read_all(log))] == [0]


def test_retention_by_time_never_deletes_the_active_segment(make_log):
    log = make_log(LogConfig(segment_bytes=400, retention_ms=10_000, file_delete_delay_ms=0))
    for i in range(12):
        log.append_as_leader(make_batch(1, value_size=150, timestamp=i * 1_000), 0, 0)
    segments = len(log.segments)
    assert segments >= 4
    assert log.enforce_retention(5_000) == 0
    deleted = log.enforce_retention(14_500)
    # Segments whose newest timestamp is older than now - retention.ms go.
    assert deleted >= 1
    assert all(14_500 - s.largest_timestamp <= 10_000 for s in log.segments[:-1])
    assert log.log_start_offset == log.segments[0].base_offset
    assert segment_files(log)[0] == f"{log.log_start_offset:020d}.log"
    old_segments = len(log.segments) - 1
    assert old_segments > 0
    assert log.enforce_retention(10**9) == old_segments
    assert len(log.segments) == 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert decode_records(read_all(log))[-1][0] == 11


def test_retention_by_bytes(make_log):
    log = make_log(LogConfig(segment_bytes=600, retention_bytes=1_500, retention_ms=-1, file_delete_delay_ms=0))
    for _ in range(30):
        log.append_as_leader(make_batch(1, value_size=150), 0, 0)
    before = log.size_bytes
    deleted = log.enforce_retention(0)
    assert deleted > 0
    assert log.size_bytes >= 1_500 - 600 and log.size_bytes < before
    assert log.size_bytes - log.segments[0].size < 1_500
    assert read_all(log)


def test_delete_records_before_moves_start_and_drops_whole_segments(make_log):
    log = make_log(LogConfig(segment_bytes=500, file_delete_delay_ms=0))
    for _ in range(20):
        log.append_as_leader(make_batch(2, value_size=100), 0, 0)
    log.high_watermark = log.log_end_offset
    second_base = log.segments[1].base_offset
    assert log.delete_records_before(second_base + 1) == second_base + 1
    assert log.segments[0].base_offset == second_base
    assert log.log_start_offset == second_base + 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(second_base, 100)
    # Reading at the new start returns the batch containing it.
    assert decode_batches(read_all(log))[0].base_offset <= second_base + 1
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(log.high_watermark + 1)
    assert log.delete_records_before(0) == second_base + 1


def test_deleted_segment_files_linger_for_the_delay(make_log):
    log = make_log(LogConfig(segment_bytes=300, retention_ms=0, file_delete_delay_ms=1_000))
    for i in range(6):
        log.append_as_leader(make_batch(1, value_size=150, timestamp=i), 0, 0)
    assert log.enforce_retention(100) > 0
    names = os.listdir(log.dir_path)
    assert any(name.endswith(".log.deleted") for name in names)
    log.enforce_retention(1_200)
    assert not any(name.endswith(".deleted") for name in os.listdir(log.dir_path))


def test_file_slice_survives_segment_deletion(make_log):
    log = make_log(LogConfig(segment_bytes=300, file_delete_delay_ms=0, retention_ms=0))
    for i in range(6):
        log.append_as_leader(make_batch(1, value_size=150, tag=b"%d" % i), 0, 0)
    result = log.read(0, 1 << 20)
    assert log.enforce_retention(10**6) > 0
    assert not os.path.exists(os.path.join(log.dir_path, "00000000000000000000.log"))
    data = result.records.read_bytes()
    result.records.close()
    assert decode_records(data)[0][2].startswith(b"0-0-")
    with pytest.raises(ValueError):
        result.records.read_bytes()


def test_offset_for_timestamp(make_log):
    log = make_log(LogConfig(segment_bytes=800, index_interval_bytes=100))
    for i in range(30):
        log.append_as_leader(make_batch(2, timestamp=1_000 * i, value_size=60), 0, 0)
    assert len(log.segments) > 3
    # The first RECORD with a timestamp >= the target, as Kafka answers (batches hold two records).
    assert log.offset_for_timestamp(0) == (0, 0)
    assert log.offset_for_timestamp(1) == (1, 1)
    assert log.offset_for_timestamp(2) == (2, 1_000)
    assert log.offset_for_timestamp(14_500) == (30, 15_000)
    assert log.offset_for_timestamp(29_001) == (59, 29_001)
    assert log.offset_for_timestamp(29_002) is None
    log.high_watermark = log.log_end_offset
    log.delete_records_before(31)
    assert log.offset_for_timestamp(0) == (31, 15_001)


@pytest.mark.parametrize("compression", sorted(COMPRESSIONS.values()))
def test_offset_for_timestamp_inside_a_batch(make_log, compression):
    # Every codec Kafka has is decoded (kafka-python's snappy is xerial-framed, LZ4 frames).
    log = make_log()
    log.append_as_leader(make_batch(5, timestamp=100, compression=compression), 0, 0)
    assert log.offset_for_timestamp(102) == (2, 102)
    assert log.offset_for_timestamp(104) == (4, 104)
    assert log.offset_for_timestamp(105) is None


@pytest.mark.parametrize("compression", sorted(COMPRESSIONS.values()))
def test_max_timestamp_is_the_record_not_its_batch(make_log, compression):
    log = make_log()
    log.append_as_leader(make_batch(3, timestamp=10), 0, 0)
    builder = MemoryRecordsBuilder(2, compression, 1 << 20)
    for timestamp in (500, 900, 700, 900, 600):  # the largest first at offset 3+1
        builder.append(timestamp, b"k", b"v")
    builder.close()
    log.append_as_leader(bytes(builder.buffer()), 0, 0)
    log.append_as_leader(make_batch(2, timestamp=800), 0, 0)
    assert log.max_timestamp_offset() == (4, 900)


def test_leader_epochs(make_log):
    log = make_log()
    log.assign_epoch(0, 0)
    log.append_as_leader(make_batch(3), 0, 0)
    log.append_as_leader(make_batch(2), 2, 0)  # a new epoch is learned from the append itself
    log.assign_epoch(5, log.log_end_offset)
    log.append_as_leader(make_batch(1), 5, 0)
    assert log.leader_epochs.entries == [(0, 0), (2, 3), (5, 5)]
    assert log.end_offset_for_epoch(0) == (0, 3)
    assert log.end_offset_for_epoch(1) == (0, 3)
    assert log.end_offset_for_epoch(2) == (2, 5)
    assert log.end_offset_for_epoch(4) == (2, 5)
    assert log.end_offset_for_epoch(5) == (5, 6)
    assert log.end_offset_for_epoch(6) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    with open(os.path.join(log.dir_path, "leader-epoch-checkpoint")) as handle:
        assert handle.read() == "0\n3\n0 0\n2 3\n5 5\n"
    assert [b.leader_epoch for b in decode_batches(read_all(log))] == [0, 2, 5]


def test_truncate_to_and_follower_append(make_log):
    log = make_log(LogConfig(segment_bytes=500))
    for epoch in (0, 0, 1, 1, 1, 2, 2, 2, 2, 2):
        log.append_as_leader(make_batch(2, value_size=100), epoch, 0)
    assert len(log.segments) > 2
    log.high_watermark = 20
    log.truncate_to(7)
    assert log.log_end_offset == 6  # offset 7 sat inside batch 6..7, which goes entirely
    assert log.high_watermark == 6
    assert log.leader_epochs.entries == [(0, 0), (1, 4)]
    assert [b.last_offset for b in decode_batches(read_all(log))][-1] == 5
    assert not any(s.base_offset > 6 for s in log.segments)
    # A follower appends the leader's batches as they are.
    leader = make_log(topic="leader")
    for epoch in (3, 3, 4):
        leader.append_as_leader(make_batch(2, value_size=100), epoch, 0)
    fetched = leader.read(0, 1 << 20).records
    follower = make_log(topic="follower")
    result = follower.append_as_follower(fetched.read_bytes())
    fetched.close()
    assert (result.base_offset, result.last_offset) == (0, 5)
    assert follower.leader_epochs.entries == [(3, 0), (4, 4)]
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(read_all(leader))
    # Truncating below the log start restarts the log, empty, at that offset.
    follower.high_watermark = 6
    follower.delete_records_before(4)
    follower.truncate_to(2)
    assert (follower.log_start_offset, follower.log_end_offset) == (2, 2)
    assert follower.leader_epochs.entries == []
    assert follower.append_as_leader(make_batch(1), 9, 0).base_offset == 2
    with pytest.raises(ValueError):
        follower.truncate_to(-1)


def test_lookups_beyond_the_remembered_recent_batches(make_log):
    log = make_log(LogConfig(index_interval_bytes=2048))
    batch = make_batch(1, value_size=1)
    for _ in range(9_000):
        log.append_as_leader(batch, 0, 0)
    assert len(log.segments) == 1
    segment = log.segments[0]
    for offset in list(range(0, 9_000, 7)) + [8_999]:
        position = segment.find(offset)
        assert position == offset * len(batch)
        assert segment.boundary_at_or_below(position + len(batch) - 1) == position
    result = log.read(10, 3 * len(batch) + 2)
    assert [b.base_offset for b in decode_batches(result.records.read_bytes())] == [10, 11, 12]
    result.records.close()


def test_update_config_applies_to_next_roll(make_log):
    log = make_log()
    batch = make_batch(1, value_size=200)
    for _ in range(5):
        log.append_as_leader(batch, 0, 0)
    assert len(log.segments) == 1
    log.update_config(LogConfig(segment_bytes=600))
    log.append_as_leader(batch, 0, 0)
    assert len(log.segments) == 2


def test_partition_dir_names():
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("t-0.abc-delete") is None
    assert parse_partition_dir("t-x") is None
    assert parse_partition_dir("meta.properties") is None


def test_max_timestamp_offset_and_epoch_for_offset(make_log):
    log = make_log(LogConfig(segment_bytes=500))
    assert log.max_timestamp_offset() is None
    for epoch, timestamp in [(0, 100), (0, 900), (3, 400), (3, 900), (5, 200)]:
        log.append_as_leader(make_batch(2, value_size=100, timestamp=timestamp), epoch, 0)
    assert len(log.segments) > 2
    assert log.max_timestamp_offset() == (3, 901)  # the first batch to reach the maximum
    assert [log.epoch_for_offset(o) for o in (0, 3, 4, 7, 8, 9)] == [0, 0, 3, 3, 5, 5]
    assert make_log(topic="empty").epoch_for_offset(0) == -1


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_compression_type_recompresses_batches_without_changing_records(make_log, target):
    log = make_log(LogConfig(compression_type=target))
    sent = make_batch(4, timestamp=100, compression=COMPRESSIONS["gzip" if target != "gzip" else "none"])
    log.append_as_leader(sent, 0, 0)
    (stored,) = decode_batches(read_all(log))
    assert stored.compression_type == COMPRESSIONS["none" if target == "uncompressed" else target]
    assert decode_records(read_all(log)) == decode_records(sent)
    assert log.offset_for_timestamp(102) == (2, 102)


def test_timestamps_outside_the_topic_window_are_refused(make_log):
    log = make_log(LogConfig(timestamp_before_max_ms=1_000, timestamp_after_max_ms=500))
    now = 10_000
    with pytest.raises(InvalidTimestampError, match="message.timestamp.before.max.ms=1000"):
        log.append_as_leader(make_batch(1, timestamp=now - 1_001), 0, now)
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(make_batch(1, timestamp=now + 501), 0, now)
    log.append_as_leader(make_batch(2, timestamp=now - 1_000), 0, now)  # the edges are allowed
    assert log.log_end_offset == 2
    append_time = make_log(LogConfig(message_timestamp_type="LogAppendTime", timestamp_before_max_ms=1), partition=1)
    append_time.append_as_leader(make_batch(1, timestamp=1), 0, now)  # the broker's time counts there
