"""Moves between log dirs in storage: future logs, the crash-safe swap, startup after a crash at
every step of it, placement by free room and log.dir.min.free.bytes, and the kernel copy of files."""

from __future__ import annotations

import errno
import json
import os
import shutil
import uuid

import pytest

from minikafka.storage import future_log as future_log_module
from minikafka.storage import log_manager as log_manager_module
from minikafka.storage.errors import InconsistentMetadataError, KafkaStorageError, NoLiveLogDirError
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.future_log import FutureLogCopy, copy_range
from minikafka.storage.log import LogConfig, parse_future_dir
from minikafka.storage.log_manager import MOVE_MARKER_FILE, DirUsage, LogManager
from tests.unit.storage.helpers import decode_records, make_batch, read_all

TOPIC = uuid.UUID(int=0x5EED)
CONFIG = LogConfig(segment_bytes=700, file_delete_delay_ms=0)


@pytest.fixture
def dirs(tmp_path) -> list[str]:
    return [str(tmp_path / "d1"), str(tmp_path / "d2"), str(tmp_path / "d3")]


@pytest.fixture
def managers():
    started: list[LogManager] = []
    yield started
    for manager in started:
        manager.shutdown()


def start(dirs, managers, channel=None, **kwargs) -> LogManager:
    manager = LogManager(dirs, 1, "cluster-x", CONFIG, channel or LogDirFailureChannel(), **kwargs)
    manager.startup()
    managers.append(manager)
    return manager


def crash(manager, managers) -> None:
    """Drop the manager as kill -9 would: fds and locks go, nothing is flushed or written."""
    for held in manager.logs.values():
        held.close()
    for fd in manager._lock_fds.values():
        os.close(fd)
    managers.remove(manager)


def filled_log(manager, dirs, partition=0, batches=9):
    log = manager.get_or_create_log("t", partition, TOPIC, config=CONFIG, log_dir=dirs[0])
    for i in range(batches):
        log.append_as_leader(make_batch(2, value_size=120, tag=b"b%d" % i), 0, 1_000 + i)
    assert len(log.segments) > 2
    return log


def complete_copy(manager, partition=0):
    """Make the registered future dir a byte image of the current log (the mover's job)."""
    future = manager.future_logs[("t", partition)]
    current = manager.logs[("t", partition)]
    current.take_producer_snapshot()
    shutil.rmtree(future.dir_path)
    shutil.copytree(current.dir_path, future.dir_path)
    return future


def partition_dirs(dirs):
    return sorted((os.path.basename(d), name) for d in dirs for name in os.listdir(d)
                  if name.startswith("t-"))


def test_future_dir_names_parse_back():
    assert parse_future_dir("my.topic-12." + "ab" * 16 + "-future") == ("my.topic", 12)
    assert parse_future_dir("t-0.xyz-future") is None
    assert parse_future_dir("t-0." + "ab" * 16 + "-delete") is None


def test_create_future_log_makes_an_empty_registered_dir(dirs, managers):
    manager = start(dirs, managers)
    log = filled_log(manager, dirs)
    future = manager.create_future_log("t", 0, dirs[1])
    assert manager.future_logs[("t", 0)] is future
    assert os.path.dirname(future.dir_path) == dirs[1]
    assert parse_future_dir(os.path.basename(future.dir_path)) == ("t", 0)
    assert os.listdir(future.dir_path) == ["partition.metadata"]
    assert future.topic_id == log.topic_id
    with pytest.raises(ValueError, match="already being moved"):
        manager.create_future_log("t", 0, dirs[2])
    with pytest.raises(ValueError, match="in .* already"):
        manager.abandon_future_log("t", 0)
        manager.create_future_log("t", 0, dirs[0])
    with pytest.raises(ValueError, match="no log"):
        manager.create_future_log("t", 7, dirs[1])


def test_abandon_and_forget(dirs, managers):
    manager = start(dirs, managers)
    filled_log(manager, dirs)
    future = manager.create_future_log("t", 0, dirs[1])
    log_dir, retired = manager.abandon_future_log("t", 0)
    assert log_dir == dirs[1] and retired.endswith("-delete") and not os.path.exists(future.dir_path)
    manager.remove_retired(log_dir, retired)
    assert not os.path.exists(retired)
    assert manager.abandon_future_log("t", 0) is None
    future = manager.create_future_log("t", 0, dirs[2])
    assert manager.forget_future_log("t", 0) is future
    assert os.path.isdir(future.dir_path)  # forgetting touches no file


def test_swap_puts_the_copy_in_place_with_every_offset(dirs, managers):
    manager = start(dirs, managers)
    log = filled_log(manager, dirs)
    log.high_watermark = log.log_end_offset
    log.delete_records_before(3)
    expected = decode_records(read_all(log))
    end, start_offset = log.log_end_offset, log.log_start_offset
    manager.create_future_log("t", 0, dirs[1])
    complete_copy(manager)
    new, retired = manager.replace_current_with_future("t", 0)
    assert manager.logs[("t", 0)] is new and ("t", 0) not in manager.future_logs
    assert new.log_dir == dirs[1] and new.dir_path == os.path.join(dirs[1], "t-0")
    assert (new.log_end_offset, new.log_start_offset, new.high_watermark) == (end, start_offset, end)
    assert decode_records(read_all(new)) == expected
    assert log.closed and os.path.dirname(retired) == dirs[0] and retired.endswith("-delete")
    assert not os.path.exists(os.path.join(new.dir_path, MOVE_MARKER_FILE))
    # The destination's checkpoints know the moved log at once (a crash now loses nothing).
    with open(os.path.join(dirs[1], "log-start-offset-checkpoint")) as handle:
        assert "t 0 3" in handle.read()
    new.append_as_leader(make_batch(1, tag=b"after"), 0, 5_000)
    assert decode_records(read_all(new))[-1][2].startswith(b"after")


def test_a_copy_completed_at_once_is_a_byte_image_of_the_source(dirs, managers):
    channel = LogDirFailureChannel()
    manager = start(dirs, managers, channel)
    log = filled_log(manager, dirs)
    log.high_watermark = log.log_end_offset
    log.flush()
    copy = FutureLogCopy(manager.create_future_log("t", 0, dirs[1]), log, channel)
    assert copy.update_progress() == log.log_end_offset  # nothing copied yet
    counted: list[int] = []
    discarded: list[str] = []
    copy.complete(discarded.append, counted.append)
    assert sum(counted) == log.size_bytes and discarded == [] and copy.update_progress() == 0
    assert copy.future.size_bytes == log.size_bytes and copy.future.log_end_offset == log.log_end_offset

    def files(path):
        return {name: open(os.path.join(path, name), "rb").read() for name in os.listdir(path)
                if name.endswith((".log", ".index", ".timeindex")) or name == "leader-epoch-checkpoint"}

    assert files(copy.future.dir_path) == files(log.dir_path)
    snapshot = os.path.join(copy.future.dir_path, f"{log.log_end_offset:020d}.snapshot")
    with open(snapshot, "rb") as handle:
        assert handle.read() == log.producer_state.encode()
    expected = decode_records(read_all(log))
    new, _ = manager.replace_current_with_future("t", 0)
    assert decode_records(read_all(new)) == expected


def test_a_copy_follows_the_source_cut_back_and_drops_segments_it_lost(dirs, managers):
    channel = LogDirFailureChannel()
    manager = start(dirs, managers, channel)
    log = filled_log(manager, dirs)
    copy = FutureLogCopy(manager.create_future_log("t", 0, dirs[1]), log, channel)
    for segment, start_at, end, sealed in copy.plan(lambda path: None):
        copy.chunk_copied(segment.base_offset, end, end - start_at)
        if sealed:
            copy.sealed_segment_copied(segment.base_offset)
    assert copy.plan(lambda path: None) == []
    gone = log.segments[-1].base_offset
    cut = log.segments[-2].base_offset + 2  # keeps the segment's first batch (of two records)
    log.on_truncate = copy.source_truncated
    size = log.segments[-2].size
    log.truncate_to(cut)
    assert copy.truncated_from == cut and log.segments[-1].base_offset == cut - 2
    log.append_as_leader(make_batch(2, value_size=120, tag=b"x%d" % (cut // 2)), 0, 2_000)
    assert log.segments[-1].size == size  # rewritten: same size, other bytes
    discarded: list[str] = []
    # The segment holding the cut is copied again from its start; the one the source lost goes.
    assert [(s.base_offset, start_at, end) for s, start_at, end, _ in copy.plan(discarded.append)] == [
        (cut - 2, 0, log.segments[-1].size)]
    assert gone not in copy.copied and discarded == copy.segment_files(gone)


@pytest.mark.parametrize("point", ["swap.marker_written", "swap.source_retired", "swap.future_promoted",
                                   "after"])
def test_a_crash_at_any_step_of_the_swap_finishes_it_at_startup(dirs, managers, monkeypatch, point):
    manager = start(dirs, managers)
    log = filled_log(manager, dirs)
    expected = decode_records(read_all(log))
    manager.create_future_log("t", 0, dirs[1])
    complete_copy(manager)

    class Crash(Exception):
        pass

    def hook(name):
        if name == point:
            raise Crash(name)

    monkeypatch.setattr(log_manager_module, "hook_point", hook)
    if point == "after":
        manager.replace_current_with_future("t", 0)
    else:
        with pytest.raises(Crash):
            manager.replace_current_with_future("t", 0)
    crash(manager, managers)

    restarted = start(dirs, managers)
    moved = restarted.get_log("t", 0)
    assert moved.log_dir == dirs[1]
    assert decode_records(read_all(moved)) == expected
    assert partition_dirs(dirs) == [("d2", "t-0")]
    assert restarted.future_logs == {}
    assert not os.path.exists(os.path.join(moved.dir_path, MOVE_MARKER_FILE))


def test_a_crash_before_the_marker_resumes_the_move(dirs, managers):
    manager = start(dirs, managers)
    log = filled_log(manager, dirs)
    expected = decode_records(read_all(log))
    future = manager.create_future_log("t", 0, dirs[1])
    crash(manager, managers)

    restarted = start(dirs, managers)
    assert restarted.get_log("t", 0).log_dir == dirs[0]
    assert decode_records(read_all(restarted.get_log("t", 0))) == expected
    resumed = restarted.future_logs[("t", 0)]
    assert resumed.resumed and resumed.dir_path == future.dir_path and resumed.log_dir == dirs[1]


def test_a_decided_swap_is_dropped_when_the_source_moved_on(dirs, managers, monkeypatch):
    manager = start(dirs, managers)
    log = filled_log(manager, dirs)
    manager.create_future_log("t", 0, dirs[1])
    future = complete_copy(manager)
    marker = {"topic": "t", "partition": 0, "topic_id": str(TOPIC), "source_dir": dirs[0],
              "log_end_offset": log.log_end_offset - 4, "log_start_offset": 0, "high_watermark": 0}
    with open(os.path.join(future.dir_path, MOVE_MARKER_FILE), "w") as handle:
        json.dump(marker, handle)
    expected = decode_records(read_all(log))
    crash(manager, managers)
    restarted = start(dirs, managers)
    assert restarted.get_log("t", 0).log_dir == dirs[0]
    assert decode_records(read_all(restarted.get_log("t", 0))) == expected
    assert partition_dirs(dirs) == [("d1", "t-0")] and restarted.future_logs == {}


def test_twin_dirs_are_settled_by_the_marker_and_refused_without_it(dirs, managers, monkeypatch):
    manager = start(dirs, managers)
    log = filled_log(manager, dirs)
    expected = decode_records(read_all(log))
    end = log.log_end_offset
    manager.create_future_log("t", 0, dirs[1])
    complete_copy(manager)
    manager.shutdown()
    managers.remove(manager)
    # The swap was finished while the source dir was away: both dirs hold t-0, the moved
    # copy with a marker naming the source.
    future_path = next(os.path.join(dirs[1], n) for n in os.listdir(dirs[1]) if n.endswith("-future"))
    moved_path = os.path.join(dirs[1], "t-0")
    os.rename(future_path, moved_path)
    with open(os.path.join(moved_path, MOVE_MARKER_FILE), "w") as handle:
        json.dump({"topic": "t", "partition": 0, "topic_id": str(TOPIC), "source_dir": dirs[0],
                   "log_end_offset": end, "log_start_offset": 0, "high_watermark": end}, handle)
    restarted = start(dirs, managers)
    assert restarted.get_log("t", 0).log_dir == dirs[1]
    assert decode_records(read_all(restarted.get_log("t", 0))) == expected
    assert partition_dirs(dirs) == [("d2", "t-0")]
    assert not os.path.exists(os.path.join(moved_path, MOVE_MARKER_FILE))
    restarted.shutdown()
    managers.remove(restarted)
    shutil.copytree(moved_path, os.path.join(dirs[2], "t-0"))
    with pytest.raises(InconsistentMetadataError, match="two log dirs"):
        LogManager(dirs, 1, "cluster-x", CONFIG, LogDirFailureChannel()).startup()


def test_the_marker_stays_while_the_source_dir_is_offline(dirs, managers):
    manager = start(dirs, managers)
    filled_log(manager, dirs)
    manager.create_future_log("t", 0, dirs[1])
    future = complete_copy(manager)
    end = manager.logs[("t", 0)].log_end_offset
    with open(os.path.join(future.dir_path, MOVE_MARKER_FILE), "w") as handle:
        json.dump({"topic": "t", "partition": 0, "topic_id": str(TOPIC), "source_dir": dirs[0],
                   "log_end_offset": end, "log_start_offset": 0, "high_watermark": end}, handle)
    crash(manager, managers)
    channel = LogDirFailureChannel()
    channel.report(dirs[0], OSError(errno.EIO, "test"))
    restarted = start(dirs, managers, channel=channel)
    moved = restarted.get_log("t", 0)
    assert moved.log_dir == dirs[1] and moved.log_end_offset == end
    assert os.path.exists(os.path.join(moved.dir_path, MOVE_MARKER_FILE))
    crash(restarted, managers)
    # The source dir is back with its old copy: the marker settles the twins.
    again = start(dirs, managers)
    assert again.get_log("t", 0).log_dir == dirs[1]
    assert partition_dirs(dirs) == [("d2", "t-0")]


def test_destination_failing_before_the_decision_leaves_the_source_in_place(dirs, managers, monkeypatch):
    channel = LogDirFailureChannel()
    manager = start(dirs, managers, channel=channel)
    log = filled_log(manager, dirs)
    manager.create_future_log("t", 0, dirs[1])
    complete_copy(manager)
    real_open = os.open

    def failing_open(path, *args, **kwargs):
        if str(path).endswith(MOVE_MARKER_FILE + ".tmp"):
            raise OSError(errno.EIO, "Input/output error", path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing_open)
    with pytest.raises(KafkaStorageError):
        manager.commit_future_log("t", 0)
    monkeypatch.undo()
    assert channel.is_offline(dirs[1])
    assert manager.get_log("t", 0) is log and not log.closed
    log.append_as_leader(make_batch(1), 0, 9_000)


@pytest.mark.parametrize("steps", ["commit", "commit+retire", "commit+retire+promote"])
def test_appends_after_the_decision_survive_a_crash_at_any_later_step(dirs, managers, steps):
    manager = start(dirs, managers)
    filled_log(manager, dirs)
    manager.create_future_log("t", 0, dirs[1])
    complete_copy(manager)
    new, old = manager.commit_future_log("t", 0)
    assert manager.get_log("t", 0) is new and old.closed and new.dir_path.endswith("-future")
    for i in range(4):  # appends go to the copy while the other steps are still to come
        new.append_as_leader(make_batch(2, value_size=120, tag=b"late%d" % i), 0, 2_000 + i)
    if "retire" in steps:
        manager.retire_moved_source(old)
    if "promote" in steps:
        manager.promote_future_log("t", 0)
        assert new.dir_path == os.path.join(dirs[1], "t-0")
        new.append_as_leader(make_batch(1, tag=b"renamed"), 0, 3_000)  # paths follow the rename
    expected = decode_records(read_all(new))
    crash(manager, managers)
    restarted = start(dirs, managers)
    moved = restarted.get_log("t", 0)
    assert moved.log_dir == dirs[1] and decode_records(read_all(moved)) == expected
    assert partition_dirs(dirs) == [("d2", "t-0")]
    assert not os.path.exists(os.path.join(moved.dir_path, MOVE_MARKER_FILE))


def test_offline_dir_and_deleted_topic_drop_their_future_logs(dirs, managers):
    manager = start(dirs, managers)
    filled_log(manager, dirs, partition=0)
    filled_log(manager, dirs, partition=1)
    kept = manager.create_future_log("t", 0, dirs[1])
    gone = manager.create_future_log("t", 1, dirs[2])
    manager.take_dir_offline(dirs[2])
    assert manager.future_logs == {("t", 0): kept}
    assert os.path.isdir(gone.dir_path)
    manager.delete_log("t", 0, now_ms=0)
    assert manager.future_logs == {} and not os.path.exists(kept.dir_path)
    manager.run_retention(1)
    assert not any(n.startswith("t-0") for n in os.listdir(dirs[1]))


def test_placement_prefers_room_after_spreading_the_topic(dirs, managers, monkeypatch):
    manager = start(dirs, managers)
    room = {dirs[0]: 5_000, dirs[1]: 9_000, dirs[2]: 7_000}
    monkeypatch.setattr(manager, "free_room", lambda: dict(room))
    assert [manager.get_or_create_log("a", p, TOPIC).log_dir for p in range(4)] == [
        dirs[1], dirs[2], dirs[0], dirs[1]]
    # Equal room (one file system): the dir with fewer bytes placed wins.
    room = dict.fromkeys(dirs, 8_000)
    big = manager.get_or_create_log("big", 0, TOPIC, log_dir=dirs[0])
    big.append_as_leader(make_batch(3, value_size=200), 0, 0)
    manager.get_or_create_log("small", 0, TOPIC, log_dir=dirs[1]).append_as_leader(make_batch(1), 0, 0)
    assert manager.choose_log_dir("new") == dirs[2]
    for _ in range(2):
        manager.get_log("a", 1).append_as_leader(make_batch(2, value_size=150), 0, 0)
    assert manager.placed_bytes(dirs[1]) < min(manager.placed_bytes(dirs[0]), manager.placed_bytes(dirs[2]))
    assert manager.choose_log_dir("other") == dirs[1]


def test_min_free_bytes_keeps_new_replicas_off_a_full_dir(dirs, managers, monkeypatch):
    manager = start(dirs, managers, min_free_bytes=10_000)
    monkeypatch.setattr(manager, "free_room", lambda: {dirs[0]: 50_000, dirs[1]: 9_999, dirs[2]: 20_000})
    assert {manager.get_or_create_log("a", p, TOPIC).log_dir for p in range(4)} == {dirs[0], dirs[2]}
    monkeypatch.setattr(manager, "free_room", lambda: dict.fromkeys(dirs, 10))
    with pytest.raises(NoLiveLogDirError, match="log.dir.min.free.bytes=10000"):
        manager.choose_log_dir("b")


def test_free_room_is_shared_by_dirs_on_one_file_system(dirs, managers):
    manager = start(dirs, managers)
    room = manager.free_room()
    assert set(room) == set(dirs) and len(set(room.values())) == 1
    usage = manager.dir_usage(dirs[0])
    assert isinstance(usage, DirUsage) and usage.total_bytes >= usage.usable_bytes > 0


def test_a_preferred_dir_is_used_once(dirs, managers):
    manager = start(dirs, managers)
    manager.preferred_log_dirs[("p", 0)] = dirs[2]
    manager.preferred_log_dirs[("p", 1)] = dirs[1]
    assert manager.get_or_create_log("p", 0, TOPIC).log_dir == dirs[2]
    assert manager.preferred_log_dirs == {("p", 1): dirs[1]}
    manager.take_dir_offline(dirs[1])
    assert manager.get_or_create_log("p", 1, TOPIC).log_dir != dirs[1]
    assert manager.preferred_log_dirs == {}


def test_copy_range_falls_back_to_sendfile(tmp_path, monkeypatch):
    source = tmp_path / "src"
    source.write_bytes(bytes(range(256)) * 100)
    target = str(tmp_path / "dst")

    def refused(*args, **kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refused)
    monkeypatch.setattr(future_log_module, "_use_copy_file_range", True)
    fd = os.open(source, os.O_RDONLY)
    try:
        assert copy_range(fd, target, 0, 10_000) == 10_000
        assert copy_range(fd, target, 10_000, 90_000) == 15_600
    finally:
        os.close(fd)
    assert not future_log_module._use_copy_file_range
    with open(target, "rb") as handle:
        assert handle.read() == source.read_bytes()


def test_a_copied_index_goes_when_the_source_cut_its_segment_below_its_first_entry(dirs, managers):
    # An index with no entries has no file (issue 34); the copy of one the source had before a
    # truncation must not outlive it: the copy is an image of the source.
    config = LogConfig(segment_bytes=1_200, file_delete_delay_ms=0, index_interval_bytes=400)
    channel = LogDirFailureChannel()
    manager = start(dirs, managers, channel)
    log = manager.get_or_create_log("t", 0, TOPIC, config=config, log_dir=dirs[0])
    for i in range(9):
        log.append_as_leader(make_batch(2, value_size=120, tag=b"b%d" % i), 0, 1_000 + i)
    held = log.segments[-2]
    assert len(log.segments) > 2 and len(held.offset_index) > 0
    copy = FutureLogCopy(manager.create_future_log("t", 0, dirs[1]), log, channel)
    for segment, start_at, end, sealed in copy.plan(lambda path: None):
        fd = copy.source_fd(segment)
        assert fd is not None
        copy_range(fd, copy.log_file(segment.base_offset), start_at, end - start_at)
        os.close(fd)
        copy.chunk_copied(segment.base_offset, end, end - start_at)
        if sealed:
            future_log_module.copy_files(copy.index_files(segment))
            copy.sealed_segment_copied(segment.base_offset)
    copied_index = copy.index_files(held)[0][1]
    assert os.path.exists(copied_index)
    log.on_truncate = copy.source_truncated
    log.truncate_to(held.base_offset + 2)  # its first batch stays: under the index interval
    assert not os.path.exists(held.offset_index.file.path)
    log.append_as_leader(make_batch(8, value_size=60, tag=b"again"), 0, 2_000)  # still no entry
    assert log.segments[-1] is held and len(held.offset_index) == 0
    expected = decode_records(read_all(log))
    copy.complete(future_log_module.remove_file, lambda count: None)  # the segment lost goes too

    def files(path):
        return {name: open(os.path.join(path, name), "rb").read() for name in os.listdir(path)
                if name.endswith((".log", ".index", ".timeindex"))}

    assert files(copy.future.dir_path) == files(log.dir_path)
    new, _ = manager.replace_current_with_future("t", 0)
    assert decode_records(read_all(new)) == expected
