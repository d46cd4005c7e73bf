"""Reopening a log after a crash (kill -9 keeps the page cache; torn or corrupt tails are cut)."""

from __future__ import annotations

import os

from minikafka.storage.log import LogConfig
from minikafka.storage.segment import Segment
from tests.unit.storage.helpers import (
    count_rebuilds,
    decode_batches,
    decode_records,
    make_batch,
    open_log,
    read_all,
)

SMALL = LogConfig(segment_bytes=1_200, index_interval_bytes=200)


def fill(log, batches: int, **kwargs) -> list[bytes]:
    sent = []
    for i in range(batches):
        data = make_batch(2, value_size=60, tag=b"%d" % i, **kwargs)
        sent.append(data)
        log.append_as_leader(data, 0, i)
    return sent


def test_torn_tail_keeps_every_whole_batch(make_log):
    log = make_log()
    fill(log, 10)
    expected = decode_records(read_all(log))
    log.close()  # a crash: no flush, no clean-shutdown marker
    path = os.path.join(log.dir_path, "00000000000000000000.log")
    size = os.path.getsize(path)
    last_batch = decode_batches(open(path, "rb").read())[-1].size_in_bytes
    with open(path, "r+b") as handle:
        handle.truncate(size - last_batch // 2)  # the last batch is torn
        handle.seek(0, os.SEEK_END)
        handle.write(b"\x00\x13garbage" * 20)
    reopened = open_log(log.dir_path, recovery_point=0)
    assert reopened.log_end_offset == 18
    assert decode_records(read_all(reopened)) == expected[:-2]
    assert os.path.getsize(path) == size - last_batch
    assert reopened.append_as_leader(make_batch(1), 0, 0).base_offset == 18
    with open(path, "rb") as handle:
        assert [b.base_offset for b in decode_batches(handle.read())][-2:] == [16, 18]
    reopened.close()


def test_corrupt_batch_mid_log_truncates_there_and_drops_later_segments(make_log):
    log = make_log(SMALL)
    fill(log, 40)
    assert len(log.segments) >= 4
    victim = log.segments[1]
    second_batch = victim.find(victim.base_offset + 2)
    log.close()
    with open(victim.log_path, "r+b") as handle:
        handle.seek(second_batch + 70)
        byte = handle.read(1)
        handle.seek(second_batch + 70)
        handle.write(bytes([byte[0] ^ 0xFF]))
    reopened = open_log(log.dir_path, SMALL, recovery_point=0)
    assert reopened.log_end_offset == victim.base_offset + 2
    assert len(reopened.segments) == 2
    assert sorted(n for n in os.listdir(log.dir_path) if n.endswith(".log")) == [
        "00000000000000000000.log", f"{victim.base_offset:020d}.log"
    ]
    assert [r[0] for r in decode_records(read_all(reopened))] == list(range(victim.base_offset + 2))
    reopened.close()


def test_recovery_starts_at_the_recovery_point(make_log, monkeypatch):
    log = make_log(SMALL)
    fill(log, 40)
    recovery_point = log.segments[-2].base_offset + 1
    log.close()
    recovered = []
    original = Segment.recover

    def spy(segment):
        recovered.append(segment.base_offset)
        return original(segment)

    monkeypatch.setattr(Segment, "recover", spy)
    reopened = open_log(log.dir_path, SMALL, recovery_point=recovery_point)
    assert recovered == [s.base_offset for s in reopened.segments[-2:]]
    assert reopened.recovery_point == recovery_point
    recovered.clear()
    reopened.flush()
    reopened.close()
    clean = open_log(log.dir_path, SMALL, clean=True)
    assert recovered == []
    assert clean.log_end_offset == 80
    clean.close()


def test_missing_or_broken_index_files_are_rebuilt(make_log):
    log = make_log(SMALL)
    fill(log, 30)
    expected = decode_records(read_all(log))
    first = log.segments[0]
    with open(first.offset_index.file.path, "rb") as handle:
        index_bytes = handle.read()
    log.flush()
    log.close()
    os.unlink(first.offset_index.file.path)
    with open(log.segments[1].time_index.file.path, "ab") as handle:
        handle.write(b"\x01\x02\x03")  # not a whole entry
    reopened = open_log(log.dir_path, SMALL, clean=True)
    assert decode_records(read_all(reopened)) == expected
    with open(first.offset_index.file.path, "rb") as handle:
        assert handle.read() == index_bytes
    assert os.path.getsize(log.segments[1].time_index.file.path) % 12 == 0
    reopened.close()


def test_stale_files_are_discarded_on_load(make_log):
    log = make_log()
    fill(log, 3)
    log.close()
    for name in ("00000000000000000099.index", "00000000000000000001.log.deleted", "x.snapshot.tmp"):
        open(os.path.join(log.dir_path, name), "wb").close()
    reopened = open_log(log.dir_path)
    names = os.listdir(log.dir_path)
    assert "00000000000000000099.index" not in names
    assert not any(n.endswith((".deleted", ".tmp")) for n in names)
    assert reopened.log_end_offset == 6
    reopened.close()


def test_topic_id_survives_reopen(make_log, topic_id):
    log = make_log()
    with open(os.path.join(log.dir_path, "partition.metadata")) as handle:
        assert handle.read() == "version: 0\ntopic_id: ehxrLj9NTlqbjA0eLzpLXA\n"
    log.close()
    assert open_log(log.dir_path).topic_id == topic_id


def test_a_new_partitions_metadata_torn_by_a_crash_is_written_again(make_log, topic_id):
    # In a dir made just now partition.metadata is written in place, without a temporary file
    # and a rename (issue 34: file creation is the cost of a new partition); a crash before its
    # fsync can leave it empty.
    log = make_log()
    assert sorted(os.listdir(log.dir_path)) == ["00000000000000000000.log", "partition.metadata"]
    log.close()
    path = os.path.join(log.dir_path, "partition.metadata")
    open(path, "wb").close()
    reopened = open_log(log.dir_path, topic_id=topic_id)
    reopened.close()
    assert reopened.topic_id == topic_id
    with open(path) as handle:
        assert handle.read() == "version: 0\ntopic_id: ehxrLj9NTlqbjA0eLzpLXA\n"
    again = make_log()  # its dir exists: the file is replaced as ever, atomically
    assert again.topic_id == topic_id and again.log_end_offset == 0


def test_a_new_partitions_leader_epochs_are_written_in_place_then_replaced(make_log):
    log = make_log(partition=1)
    log.append_as_leader(make_batch(1), 3, 0)  # epoch 3's entry: the first write, in place
    log.append_as_leader(make_batch(1), 4, 0)  # later ones replace the file atomically
    assert sorted(os.listdir(log.dir_path)) == ["00000000000000000000.log", "leader-epoch-checkpoint",
                                                "partition.metadata"]
    log.close()
    reopened = open_log(log.dir_path)
    reopened.close()
    assert reopened.leader_epochs.entries == [(3, 0), (4, 1)]
    with open(log.leader_epochs.path, "wb"):
        pass  # what a crash before the first write's fsync may leave: read as no epochs
    reopened = open_log(log.dir_path)
    reopened.close()
    assert reopened.leader_epochs.entries == []


def test_restarts_leave_segments_without_index_entries_without_index_files(make_log, monkeypatch):
    # An index with no entries has no file (issue 34): after a clean stop or a kill -9, a missing
    # index is read as empty, and a segment holding index entries is not rebuilt for it.
    config = LogConfig(segment_bytes=1_200, index_interval_bytes=300)
    log = make_log(config)
    fill(log, 4)  # the first segment: past the index interval, it has entries
    log.roll()
    for _ in range(3):  # small segments: a batch each, under the interval
        fill(log, 1)
        log.roll()
    fill(log, 1)
    expected = decode_records(read_all(log))
    indexed = {s.base_offset for s in log.segments if len(s.offset_index)}
    assert indexed == {0}
    log.flush()
    recovery_point = log.recovery_point
    log.close()

    def index_files() -> list[str]:
        return sorted(n for n in os.listdir(log.dir_path) if n.endswith(".index"))

    assert index_files() == ["00000000000000000000.index"]
    rebuilt = count_rebuilds(monkeypatch)
    for kwargs in ({"clean": True}, {"recovery_point": recovery_point}):
        reopened = open_log(log.dir_path, config, **kwargs)
        try:
            assert decode_records(read_all(reopened)) == expected
            assert reopened.append_as_leader(make_batch(1), 0, 0).base_offset == reopened.log_end_offset - 1
            reopened.truncate_to(reopened.log_end_offset - 1)
        finally:
            reopened.close()
        assert index_files() == ["00000000000000000000.index"]
        if kwargs.get("clean"):
            assert rebuilt == [], "nothing lost, nothing rebuilt"
        else:  # kill -9: only the active segment, above the recovery point, is scanned again
            assert rebuilt == [reopened.segments[-1].base_offset]
        rebuilt.clear()
