"""Checkpoint files, the leader-epoch cache, the failure channel and the I/O guard."""

from __future__ import annotations

import errno
import os
import uuid

import pytest

from minikafka.storage.checkpoints import (
    CorruptCheckpointError,
    parse_properties,
    read_offset_checkpoint,
    uuid_from_base64,
    uuid_to_base64,
    write_offset_checkpoint,
)
from minikafka.storage.dir_io import guard
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.leader_epoch import LeaderEpochCache


@pytest.fixture
def io(tmp_path):
    return guard(str(tmp_path), LogDirFailureChannel())


def test_offset_checkpoint_round_trip_and_format(tmp_path, io):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    assert read_offset_checkpoint(path, io) == {}
    offsets = {("orders", 2): 1234, ("my-topic.v2", 0): 0}
    write_offset_checkpoint(path, offsets, io)
    with open(path) as handle:
        assert handle.read() == "0\n2\nmy-topic.v2 0 0\norders 2 1234\n"
    assert read_offset_checkpoint(path, io) == offsets
    assert not os.path.exists(path + ".tmp")


def test_an_empty_checkpoint_file_as_kafka_creates_it_is_empty(tmp_path, io):
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text("")
    assert read_offset_checkpoint(str(path), io) == {}
    (tmp_path / "leader-epoch-checkpoint").write_text("")
    assert LeaderEpochCache(str(tmp_path), io).entries == []


@pytest.mark.parametrize("text", ["0\n", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n"])
def test_corrupt_offset_checkpoint_is_reported(tmp_path, io, text):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError):
        read_offset_checkpoint(str(path), io)


def test_uuid_base64_matches_kafka_text_form():
    value = uuid.UUID("00000000-0000-0000-0000-000000000001")
    assert uuid_to_base64(value) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert uuid_from_base64("AAAAAAAAAAAAAAAAAAAAAQ") == value
    with pytest.raises(ValueError):
        uuid_from_base64("AAAA")


def test_properties_parsing():
    text = "#\n#Mon\nversion=1\n broker.id = 4\ncluster.id=a=b\n\n!comment\nnode.id: 9\n"
    assert parse_properties(text) == {"version": "1", "broker.id": "4", "cluster.id": "a=b", "node.id": "9"}


def test_leader_epoch_cache_assign_and_persist(tmp_path, io):
    cache = LeaderEpochCache(str(tmp_path), io)
    cache.assign(1, 0)
    cache.assign(1, 5)  # same epoch later: nothing new
    cache.assign(3, 10)
    cache.assign(2, 12)  # an older epoch after a newer one is stale
    assert cache.entries == [(1, 0), (3, 10)]
    cache.assign(4, 7)  # a new leader whose log ends before epoch 3 started: 3 was divergent
    assert cache.entries == [(1, 0), (4, 7)]
    cache.assign(4, 6)  # the same epoch learned to start earlier
    assert cache.entries == [(1, 0), (4, 6)]
    assert LeaderEpochCache(str(tmp_path), io).entries == [(1, 0), (4, 6)]
    with open(tmp_path / "leader-epoch-checkpoint") as handle:
        assert handle.read() == "0\n2\n1 0\n4 6\n"


def test_leader_epoch_end_offsets(tmp_path, io):
    cache = LeaderEpochCache(str(tmp_path), io)
    assert cache.end_offset_for(0, 10) == (-1, -1)
    for epoch, start in [(2, 5), (4, 9), (7, 20)]:
        cache.assign(epoch, start)
    assert cache.end_offset_for(1, 30) == (1, 5)  # before the first known epoch
    assert cache.end_offset_for(2, 30) == (2, 9)
    assert cache.end_offset_for(3, 30) == (2, 9)
    assert cache.end_offset_for(6, 30) == (4, 20)
    assert cache.end_offset_for(7, 30) == (7, 30)
    assert cache.end_offset_for(8, 30) == (-1, -1)
    assert cache.epoch_for_offset(10) == 4


def test_leader_epoch_truncation(tmp_path, io):
    cache = LeaderEpochCache(str(tmp_path), io)
    for epoch, start in [(2, 5), (4, 9), (7, 20)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(20)
    assert cache.entries == [(2, 5), (4, 9)]
    cache.truncate_from_start(12)
    assert cache.entries == [(4, 12)]
    cache.truncate_from_start(3)
    assert cache.entries == [(4, 12)]


def test_a_truncation_to_no_epoch_leaves_the_file_for_the_next_assignment(tmp_path, io):
    # A restart of an empty partition cuts its (epoch, 0) at log end 0: rewriting the file for
    # that cost every partition a file written and fsynced. The file's entries all start at
    # or past the log end, so a load cuts them again, and the next epoch writes the file.
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(str(tmp_path), io)
    cache.assign(3, 0)
    written = path.stat()
    cache.truncate_from_end(0)
    assert cache.entries == []
    assert path.stat().st_ino == written.st_ino and path.read_text() == "0\n1\n3 0\n"
    reloaded = LeaderEpochCache(str(tmp_path), io)
    reloaded.truncate_from_end(0)
    assert reloaded.entries == []
    reloaded.assign(5, 0)
    assert LeaderEpochCache(str(tmp_path), io).entries == [(5, 0)]


def test_corrupt_epoch_checkpoint_starts_empty(tmp_path, io):
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n5\n1 0\n")
    assert LeaderEpochCache(str(tmp_path), io).entries == []


def test_failure_channel_reports_once_to_every_listener():
    channel = LogDirFailureChannel()
    seen: list[tuple[str, str]] = []
    channel.add_listener(lambda d, e: seen.append((d, "first")))
    channel.add_listener(lambda d, e: seen.append((d, "second")))
    channel.report("/a", OSError("x"))
    channel.report("/a", OSError("y"))
    assert seen == [("/a", "first"), ("/a", "second")]
    assert channel.offline_dirs == {"/a"} and channel.is_offline("/a") and not channel.is_offline("/b")


def test_guard_turns_os_errors_into_storage_errors_naming_the_dir():
    channel = LogDirFailureChannel()
    gate = guard("/data/d1", channel, "t-3")
    with pytest.raises(KafkaStorageError) as info:
        with gate:
            raise OSError(errno.EIO, "boom")
    assert "/data/d1" in str(info.value) and "t-3" in str(info.value)
    assert info.value.cause.errno == errno.EIO
    assert channel.is_offline("/data/d1")
    with pytest.raises(ValueError):
        with guard("/data/d2", channel):
            raise ValueError("not an I/O problem")
    assert not channel.is_offline("/data/d2")
    with pytest.raises(KafkaStorageError, match="offline"):
        with gate:
            pass
