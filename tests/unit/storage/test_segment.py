"""Segment in isolation: files, indexes, slices, truncation and lifecycle."""

from __future__ import annotations

import os

import pytest

from minikafka.storage.dir_io import guard
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.segment import Segment
from protocol.records import set_base_offset, validate_batches
from tests.unit.storage.helpers import count_rebuilds, decode_batches, make_batch


@pytest.fixture
def segment(tmp_path):
    created = Segment.create(str(tmp_path), 1_000, guard(str(tmp_path), LogDirFailureChannel()), 300)
    yield created
    created.close()


def append(segment: Segment, count: int, offset: int, timestamp: int = 0, value_size: int = 100) -> int:
    data = bytearray(make_batch(count, timestamp=timestamp, value_size=value_size))
    set_base_offset(data, 0, offset)
    batches = validate_batches(data)
    for _, header in batches:
        header.base_offset = offset
    segment.append(data, batches, now_ms=timestamp)
    return len(data)


def open_files(path) -> list[str]:
    """Names of the files this process holds open in ``path`` (from /proc)."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # the listing's own fd, closed by now
            continue
        if os.path.dirname(target) == str(path):
            names.append(os.path.basename(target))
    return sorted(names)


def test_files_are_named_after_the_base_offset(segment, tmp_path):
    # A new segment is its .log alone: an index gets its file with its first entry (issue 34).
    assert os.listdir(tmp_path) == ["00000000000000001000.log"]
    assert open_files(tmp_path) == ["00000000000000001000.log"]
    assert segment.next_offset == 1_000 and segment.size == 0 and segment.find(1_000) is None


def test_index_files_come_with_their_first_entry_and_close_when_the_segment_is_sealed(segment, tmp_path):
    first = append(segment, 2, 1_000, timestamp=10)
    second = append(segment, 2, 1_002, timestamp=20)  # the first batch alone is under the index interval
    assert len(segment.offset_index) == 0 and os.listdir(tmp_path) == ["00000000000000001000.log"]
    append(segment, 2, 1_004, timestamp=30)  # two batches past 300 bytes: an entry
    assert len(segment.offset_index) == 1
    every = ["00000000000000001000.index", "00000000000000001000.log", "00000000000000001000.timeindex"]
    assert sorted(os.listdir(tmp_path)) == every == open_files(tmp_path)
    segment.on_become_inactive()
    assert open_files(tmp_path) == ["00000000000000001000.log"]  # sealed: lookups use the memory copies
    assert segment.find(1_005) == segment.find(1_004) == first + second
    assert segment.find_timestamp(25, 0) == (1_004, 30)
    # A follower cutting the segment back below its first entry: no entries, no files.
    segment.truncate_to(1_002)
    assert len(segment.offset_index) == 0 and os.listdir(tmp_path) == ["00000000000000001000.log"]
    assert open_files(tmp_path) == ["00000000000000001000.log"]
    append(segment, 2, 1_002, timestamp=40)
    append(segment, 2, 1_004, timestamp=50)  # written again: the files and their fds come back
    assert sorted(os.listdir(tmp_path)) == every == open_files(tmp_path)
    assert segment.find_timestamp(45, 0) == (1_004, 50)


def reopen(tmp_path, base: int = 1_000) -> Segment:
    return Segment.open(str(tmp_path), base, guard(str(tmp_path), LogDirFailureChannel()), 300)


def test_a_segment_without_index_files_loads_as_one_without_entries(segment, tmp_path, monkeypatch):
    append(segment, 2, 1_000, timestamp=10)
    append(segment, 2, 1_002, timestamp=20)
    segment.on_become_inactive()  # the time index gets the max timestamp; the offset index none
    assert sorted(os.listdir(tmp_path)) == ["00000000000000001000.log", "00000000000000001000.timeindex"]
    segment.close()
    rebuilt = count_rebuilds(monkeypatch)
    reopened = reopen(tmp_path)
    try:
        assert reopened.next_offset == 1_004 and reopened.max_timestamp == 21
        assert reopened.find(1_003) == reopened.find(1_002) > 0
        assert rebuilt == [], "a missing index is an empty one, not a lost one"
        assert sorted(os.listdir(tmp_path)) == ["00000000000000001000.log", "00000000000000001000.timeindex"]
    finally:
        reopened.close()


def test_a_lost_index_of_a_segment_large_enough_to_have_entries_is_rebuilt(segment, tmp_path, monkeypatch):
    offset = 1_000
    for i in range(12):
        append(segment, 2, offset, timestamp=i * 10)
        offset += 2
    segment.on_become_inactive()
    with open(segment.offset_index.file.path, "rb") as handle:
        index_bytes = handle.read()
    segment.close()
    rebuilt = count_rebuilds(monkeypatch)
    reopened = reopen(tmp_path)
    reopened.close()
    assert rebuilt == [], "intact indexes are read, not rebuilt"
    os.unlink(segment.offset_index.file.path)
    reopened = reopen(tmp_path)
    try:
        assert reopened.find(1_010) is not None and rebuilt == [1_000]
        with open(segment.offset_index.file.path, "rb") as handle:
            assert handle.read() == index_bytes
    finally:
        reopened.close()


def test_append_find_and_slice(segment):
    positions = []
    offset = 1_000
    for i in range(12):
        positions.append(segment.size)
        append(segment, 2, offset, timestamp=i * 10)
        offset += 2
    assert segment.next_offset == 1_024
    assert len(segment.offset_index) >= 3  # sparse: roughly one entry per 300 bytes
    for i, position in enumerate(positions):
        assert segment.find(1_000 + 2 * i) == position
        assert segment.find(1_000 + 2 * i + 1) == position
    assert segment.find(1_024) is None
    assert segment.boundary_at_or_below(positions[5] + 1) == positions[5]
    assert segment.boundary_at_or_below(segment.size + 50) == segment.size
    with segment.slice(positions[3], positions[6]) as piece:
        assert [b.base_offset for b in decode_batches(piece.read_bytes())] == [1_006, 1_008, 1_010]
    assert segment.max_timestamp == 111
    assert segment.find_timestamp(35, 0) == (1_008, 40)  # the first record at or after 35
    assert segment.find_timestamp(112, 0) is None


def test_truncate_to_cuts_at_a_batch_boundary_and_trims_indexes(segment):
    offset = 1_000
    for i in range(20):
        append(segment, 2, offset, timestamp=i)
        offset += 2
    entries = len(segment.offset_index)
    removed = segment.truncate_to(1_011)  # inside batch 1010..1011
    assert removed > 0
    assert segment.next_offset == 1_010
    assert len(segment.offset_index) < entries
    assert os.path.getsize(segment.offset_index.file.path) == 8 * len(segment.offset_index)
    assert segment.max_timestamp == 5
    assert append(segment, 1, 1_010) and segment.find(1_010) is not None


def test_recover_on_garbage_keeps_nothing(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"\x00" * 12 + b"\x7f\xff\xff\xff" + b"junk" * 20)
    recovered = Segment.create(str(tmp_path), 0, guard(str(tmp_path), LogDirFailureChannel()), 4096)
    assert recovered.size == 0 and recovered.next_offset == 0
    recovered.close()


def test_inactive_segment_records_its_max_timestamp_and_can_be_deleted(segment, tmp_path):
    append(segment, 1, 1_000, timestamp=50)
    append(segment, 1, 1_001, timestamp=20)
    segment.on_become_inactive()
    assert segment.time_index.last_entry() == (50, 1_000)
    segment.rename_for_delete()
    assert sorted(os.listdir(tmp_path)) == [  # too small for an offset index entry: no .index
        "00000000000000001000.log.deleted", "00000000000000001000.timeindex.deleted",
    ]
    piece = segment.slice(0, segment.size)
    segment.delete()
    assert os.listdir(tmp_path) == []
    assert len(decode_batches(piece.read_bytes())) == 2
    piece.close()
