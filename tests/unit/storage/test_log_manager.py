"""LogManager: dirs, locks, meta.properties, checkpoints, placement, shutdown and restart."""

from __future__ import annotations

import errno
import os
import uuid

import pytest

import minikafka.storage.log_manager as log_manager_module
from minikafka.storage.checkpoints import fsync_path, parse_properties, uuid_from_base64
from minikafka.storage.errors import (
    InconsistentMetadataError,
    InconsistentTopicIdError,
    KafkaStorageError,
    LogDirLockedError,
    NoLiveLogDirError,
)
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import LogConfig
from minikafka.storage.log_manager import LogManager
from tests.unit.storage.helpers import decode_records, make_batch, read_all

TOPIC_A = uuid.UUID(int=0xA1)
TOPIC_B = uuid.UUID(int=0xB2)


@pytest.fixture
def dirs(tmp_path) -> list[str]:
    return [str(tmp_path / "d1"), str(tmp_path / "d2"), str(tmp_path / "d3")]


@pytest.fixture
def managers():
    started: list[LogManager] = []
    yield started
    for manager in started:
        manager.shutdown()


def start(dirs, managers, *, broker_id=1, cluster_id="cluster-x", config=None, channel=None) -> LogManager:
    manager = LogManager(dirs, broker_id, cluster_id, config or LogConfig(), channel or LogDirFailureChannel())
    manager.startup()
    managers.append(manager)
    return manager


def stop(manager, managers) -> None:
    manager.shutdown()
    managers.remove(manager)


def test_startup_creates_dirs_with_meta_properties_and_lock(dirs, managers):
    manager = start(dirs, managers, broker_id=3)
    for log_dir in dirs:
        with open(os.path.join(log_dir, "meta.properties")) as handle:
            props = parse_properties(handle.read())
        # What a ZooKeeper-mode Kafka broker writes, so that Kafka can take the dirs over.
        assert props["version"] == "0"
        assert props["broker.id"] == "3"
        assert "node.id" not in props
        assert props["cluster.id"] == "cluster-x"
        assert len(props["directory.id"]) == 22
        assert uuid_from_base64(props["directory.id"]) == manager.directory_ids[log_dir]
        assert os.path.exists(os.path.join(log_dir, ".lock"))
    assert len(set(manager.directory_ids.values())) == 3
    ids = dict(manager.directory_ids)
    stop(manager, managers)
    assert start(dirs, managers, broker_id=3).directory_ids == ids


@pytest.mark.parametrize("version, id_key", [("0", "broker.id"), ("1", "node.id")])
def test_meta_properties_keep_the_version_the_dir_had(dirs, managers, version, id_key):
    # Kafka 3.9 in ZooKeeper mode refuses a version-1 file: a dir it wrote as version 0 must
    # stay version 0 after minikafka ran on it (and a version-1 dir stays version 1).
    for log_dir in dirs:
        os.makedirs(log_dir)
        with open(os.path.join(log_dir, "meta.properties"), "w") as handle:
            handle.write(f"#written by Kafka\ncluster.id=cluster-x\n{id_key}=3\nversion={version}\n")
    manager = start(dirs, managers, broker_id=3)
    for log_dir in dirs:
        with open(os.path.join(log_dir, "meta.properties")) as handle:
            props = parse_properties(handle.read())
        assert props["version"] == version
        assert props[id_key] == "3"
        assert ("node.id" in props) == (version == "1")
        assert uuid_from_base64(props["directory.id"]) == manager.directory_ids[log_dir]


def test_meta_properties_of_an_unknown_version_are_refused(dirs, managers):
    os.makedirs(dirs[0])
    with open(os.path.join(dirs[0], "meta.properties"), "w") as handle:
        handle.write("cluster.id=cluster-x\nnode.id=3\nversion=7\n")
    with pytest.raises(InconsistentMetadataError, match="version '7'"):
        start(dirs, managers, broker_id=3)


def test_a_locked_dir_refuses_a_second_broker(dirs, managers):
    start(dirs, managers)
    with pytest.raises(LogDirLockedError):
        LogManager(dirs[1:2], 1, "cluster-x", LogConfig(), LogDirFailureChannel()).startup()


@pytest.mark.parametrize("broker_id, cluster_id", [(2, "cluster-x"), (1, "other-cluster")])
def test_a_dir_of_another_broker_or_cluster_is_refused(dirs, managers, broker_id, cluster_id):
    stop(start(dirs, managers), managers)
    with pytest.raises(InconsistentMetadataError, match="belongs to"):
        LogManager(dirs, broker_id, cluster_id, LogConfig(), LogDirFailureChannel()).startup()
    # The failed startup released its locks.
    stop(start(dirs, managers), managers)


def test_placement_spreads_partitions_over_dirs(dirs, managers):
    manager = start(dirs, managers)
    for partition in range(6):
        manager.get_or_create_log("a", partition, TOPIC_A)
    assert sorted(manager.dir_of("a", p) for p in range(6)) == sorted(dirs * 2)
    manager.get_or_create_log("b", 0, TOPIC_B, log_dir=dirs[0])
    # Topic b: every dir has 0 of it; d1 has more partitions overall.
    assert manager.choose_log_dir("b") == dirs[1]
    second = manager.get_or_create_log("b", 1, TOPIC_B)
    assert second.log_dir == dirs[1]
    assert manager.get_or_create_log("b", 2, TOPIC_B).log_dir == dirs[2]
    assert manager.get_or_create_log("b", 1, TOPIC_B) is second
    with pytest.raises(InconsistentTopicIdError):
        manager.get_or_create_log("b", 1, TOPIC_A)
    assert os.path.isdir(os.path.join(dirs[1], "b-1"))


async def test_a_batch_of_creations_weighs_the_dirs_once_and_places_as_one_by_one(dirs, managers, monkeypatch):
    manager = start(dirs, managers)
    for partition in range(4):
        manager.get_or_create_log("old", partition, TOPIC_B)
    measured = 0
    measure = manager._measure_placement

    def counted():
        nonlocal measured
        measured += 1
        return measure()
    monkeypatch.setattr(manager, "_measure_placement", counted)
    async with manager.creating_many():
        placed = [manager.get_or_create_log("a", p, TOPIC_A).log_dir for p in range(9)]
        manager.get_or_create_log("b", 0, TOPIC_B)
    assert measured == 1, "every existing log was looked at once for the batch, not once per new log"
    # A topic still spreads over the dirs, each new one counted: d1 held 2 of "old", d2 and d3 1.
    assert sorted(placed) == sorted(dirs * 3)
    assert manager.dir_of("b", 0) == dirs[1]
    # Once the batch is over, a creation measures again (what changed since is seen).
    manager.get_or_create_log("c", 0, TOPIC_B)
    assert measured == 2


async def test_a_failed_fsync_of_a_batch_of_creations_takes_only_its_dir_offline(dirs, managers, monkeypatch):
    channel = LogDirFailureChannel()
    manager = start(dirs, managers, channel=channel)
    synced: list[str] = []

    def fsync_failing_in_d2(path: str) -> None:
        if path == dirs[1] or path.startswith(dirs[1] + os.sep):
            raise OSError(errno.EIO, "Input/output error")
        fsync_path(path)
        synced.append(path)
    monkeypatch.setattr(log_manager_module, "fsync_path", fsync_failing_in_d2)
    async with manager.creating_many():
        logs = [manager.get_or_create_log("a", p, TOPIC_A, log_dir=dirs[p % 3]) for p in range(30)]
    assert [channel.is_offline(d) for d in dirs] == [False, True, False]
    # Every other new log's metadata file and dir were fsynced, and their log dirs' entries, once each.
    others = [log for log in logs if log.log_dir != dirs[1]]
    wanted = {dirs[0], dirs[2]} | {path for log in others
                                   for path in (os.path.join(log.dir_path, "partition.metadata"), log.dir_path)}
    assert len(synced) == len(set(synced)) and set(synced) == wanted


async def test_new_logs_prepared_together_are_placed_made_and_synced_as_one_by_one(dirs, managers, monkeypatch):
    manager = start(dirs, managers)
    synced: list[str] = []

    def recorded(path: str) -> None:
        fsync_path(path)
        synced.append(path)
    monkeypatch.setattr(log_manager_module, "fsync_path", recorded)
    async with manager.creating_many():
        await manager.prepare_new_logs([("a", p, TOPIC_A, 5 if p % 2 else None) for p in range(6)]
                                       + [("b", 0, TOPIC_B, None)])
        prepared = {name for d in dirs for name in os.listdir(d) if "-" in name}
        assert prepared == {"a-0", "a-1", "a-2", "a-3", "a-4", "a-5", "b-0"}
        logs = [manager.get_or_create_log("a", p, TOPIC_A) for p in range(6)]
        # b-0 was prepared but not created: its dir goes when the batch closes.
    assert sorted(log.log_dir for log in logs) == sorted(dirs * 2), "spread as one by one"
    assert not any(os.path.exists(os.path.join(d, "b-0")) for d in dirs)
    for p, log in enumerate(logs):
        with open(os.path.join(log.dir_path, "partition.metadata")) as handle:
            assert uuid_from_base64(handle.read().split("topic_id: ")[1].strip()) == TOPIC_A
        assert log.log_end_offset == 0 and [s.base_offset for s in log.segments] == [0]
        assert log.leader_epochs.entries == ([(5, 0)] if p % 2 else [])
        log.assign_epoch(5, 0)  # what a new leader does: nothing new to write
        assert os.path.join(log.dir_path, "partition.metadata") in synced and log.dir_path in synced
        assert (os.path.join(log.dir_path, "leader-epoch-checkpoint") in synced) == bool(p % 2)
    # They take records, and come back after a restart as they were.
    logs[1].append_as_leader(make_batch(1), 5, 0)
    stop(manager, managers)
    again = start(dirs, managers)
    assert again.get_log("a", 1).log_end_offset == 1 and again.get_log("a", 1).leader_epochs.entries == [(5, 0)]


async def test_a_dir_failing_as_new_logs_are_prepared_is_offline_and_the_logs_go_elsewhere(
        dirs, managers, monkeypatch):
    channel = LogDirFailureChannel()
    manager = start(dirs, managers, channel=channel)
    make = log_manager_module.make_new_log_files

    def failing_in_d1(dir_path, topic_id, first_epoch):
        if dir_path.startswith(dirs[0] + os.sep):
            raise OSError(errno.EIO, "Input/output error")
        make(dir_path, topic_id, first_epoch)
    monkeypatch.setattr(log_manager_module, "make_new_log_files", failing_in_d1)
    async with manager.creating_many():
        await manager.prepare_new_logs([("a", p, TOPIC_A, 0) for p in range(6)])
        assert channel.is_offline(dirs[0])
        logs = [manager.get_or_create_log("a", p, TOPIC_A) for p in range(6)]
    assert all(log.log_dir in dirs[1:] for log in logs)


def test_placement_skips_offline_dirs(dirs, managers):
    channel = LogDirFailureChannel()
    manager = start(dirs, managers, channel=channel)
    channel.report(dirs[0], OSError(errno.EIO, "test"))
    assert {manager.get_or_create_log("a", p, TOPIC_A).log_dir for p in range(4)} == set(dirs[1:])
    with pytest.raises(KafkaStorageError):
        manager.get_or_create_log("a", 9, TOPIC_A, log_dir=dirs[0])
    channel.report(dirs[1], OSError(errno.EIO, "test"))
    channel.report(dirs[2], OSError(errno.EIO, "test"))
    with pytest.raises(NoLiveLogDirError):
        manager.choose_log_dir("a")


def test_checkpoints_round_trip(dirs, managers):
    manager = start(dirs, managers, config=LogConfig(segment_bytes=600, file_delete_delay_ms=0))
    log = manager.get_or_create_log("a", 0, TOPIC_A, log_dir=dirs[0])
    other = manager.get_or_create_log("b", 3, TOPIC_B, log_dir=dirs[0])
    for _ in range(10):
        log.append_as_leader(make_batch(2, value_size=100), 0, 0)
    other.append_as_leader(make_batch(1), 0, 0)
    log.high_watermark = 17
    log.delete_records_before(9)
    log.flush()
    manager.checkpoint()
    with open(os.path.join(dirs[0], "recovery-point-offset-checkpoint")) as handle:
        assert handle.read() == "0\n2\na 0 20\nb 3 0\n"
    with open(os.path.join(dirs[0], "replication-offset-checkpoint")) as handle:
        assert handle.read() == "0\n2\na 0 17\nb 3 0\n"
    with open(os.path.join(dirs[0], "log-start-offset-checkpoint")) as handle:
        assert handle.read() == "0\n2\na 0 9\nb 3 0\n"
    with open(os.path.join(dirs[1], "recovery-point-offset-checkpoint")) as handle:
        assert handle.read() == "0\n0\n"
    stop(manager, managers)
    restarted = start(dirs, managers)
    reloaded = restarted.get_log("a", 0)
    assert (reloaded.log_start_offset, reloaded.high_watermark, reloaded.log_end_offset) == (9, 17, 20)
    assert reloaded.topic_id == TOPIC_A
    assert restarted.get_log("b", 3).log_end_offset == 1


def test_clean_shutdown_marker_and_unclean_restart(dirs, managers):
    manager = start(dirs, managers, config=LogConfig(segment_bytes=600))
    log = manager.get_or_create_log("a", 0, TOPIC_A, log_dir=dirs[0])
    for i in range(8):
        log.append_as_leader(make_batch(2, value_size=100, tag=b"%d" % i), 0, 0)
    expected = decode_records(read_all(log))
    manager.checkpoint()  # recovery point is still 0: nothing flushed
    stop(manager, managers)
    assert os.path.exists(os.path.join(dirs[0], ".kafka_cleanshutdown"))
    restarted = start(dirs, managers, config=LogConfig(segment_bytes=600))
    assert not os.path.exists(os.path.join(dirs[0], ".kafka_cleanshutdown"))
    log = restarted.get_log("a", 0)
    assert decode_records(read_all(log)) == expected
    for i in range(3):
        log.append_as_leader(make_batch(1, tag=b"late%d" % i), 0, 0)
    # Simulate kill -9: drop the manager without shutdown (the locks go with the process).
    for held in restarted.logs.values():
        held.close()
    for fd in restarted._lock_fds.values():
        os.close(fd)
    managers.remove(restarted)
    active = log.segments[-1].log_path
    with open(active, "ab") as handle:
        handle.write(b"\x00" * 30)  # a torn write
    again = start(dirs, managers, config=LogConfig(segment_bytes=600))
    assert again.get_log("a", 0).log_end_offset == 19
    assert [r[2][:6] for r in decode_records(read_all(again.get_log("a", 0)))][-3:] == [
        b"late0-", b"late1-", b"late2-"
    ]


def test_delete_log_renames_then_removes(dirs, managers):
    manager = start(dirs, managers, config=LogConfig(file_delete_delay_ms=5_000))
    log = manager.get_or_create_log("a", 0, TOPIC_A, log_dir=dirs[0])
    log.append_as_leader(make_batch(1), 0, 0)
    result = log.read(0, 1000)
    manager.delete_log("a", 0, now_ms=1_000)
    assert manager.get_log("a", 0) is None
    (renamed,) = [n for n in os.listdir(dirs[0]) if n.endswith("-delete")]
    assert renamed.startswith("a-0.") and len(renamed) == len("a-0.") + 32 + len("-delete")
    assert decode_records(result.records.read_bytes())  # a fetch in flight still completes
    result.records.close()
    manager.run_retention(2_000)
    assert os.path.isdir(os.path.join(dirs[0], renamed))
    manager.run_retention(6_000)
    assert not os.path.exists(os.path.join(dirs[0], renamed))
    # A recreated partition starts empty.
    assert manager.get_or_create_log("a", 0, TOPIC_A).log_end_offset == 0


def test_leftover_delete_dirs_are_removed_at_startup(dirs, managers):
    manager = start(dirs, managers, config=LogConfig(file_delete_delay_ms=60_000))
    manager.get_or_create_log("a", 0, TOPIC_A, log_dir=dirs[2])
    manager.delete_log("a", 0)
    os.makedirs(os.path.join(dirs[2], "a-1.0123456789abcdef0123456789abcdef-future"))
    for held in manager.logs.values():
        held.close()
    for fd in manager._lock_fds.values():
        os.close(fd)
    managers.remove(manager)
    restarted = start(dirs, managers)
    names = os.listdir(dirs[2])
    assert not any(n.endswith("-delete") for n in names)
    assert any(n.endswith("-future") for n in names)
    assert restarted.logs == {}


def test_the_same_partition_in_two_dirs_is_refused(dirs, managers):
    manager = start(dirs, managers)
    manager.get_or_create_log("a", 0, TOPIC_A, log_dir=dirs[0])
    stop(manager, managers)
    os.makedirs(os.path.join(dirs[1], "a-0"))
    with pytest.raises(InconsistentMetadataError, match="two log dirs"):
        LogManager(dirs, 1, "cluster-x", LogConfig(), LogDirFailureChannel()).startup()


def test_io_error_takes_the_dir_offline_not_the_broker(dirs, managers, monkeypatch):
    channel = LogDirFailureChannel()
    reported = []
    channel.add_listener(lambda log_dir, cause: reported.append(log_dir))
    manager = start(dirs, managers, channel=channel)
    broken = manager.get_or_create_log("a", 0, TOPIC_A, log_dir=dirs[0])
    healthy = manager.get_or_create_log("a", 1, TOPIC_A, log_dir=dirs[1])
    real_pwrite = os.pwrite

    def failing_pwrite(fd, data, position):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(dirs[0]):
            raise OSError(errno.EIO, "Input/output error")
        return real_pwrite(fd, data, position)

    monkeypatch.setattr(os, "pwrite", failing_pwrite)
    with pytest.raises(KafkaStorageError) as info:
        broken.append_as_leader(make_batch(1), 0, 0)
    assert info.value.log_dir == dirs[0] and info.value.partition == "a-0"
    assert isinstance(info.value.cause, OSError)
    assert reported == [dirs[0]] and channel.is_offline(dirs[0])
    assert healthy.append_as_leader(make_batch(1), 0, 0).base_offset == 0
    # An offline dir is never touched again, even once the disk would answer.
    monkeypatch.undo()
    with pytest.raises(KafkaStorageError, match="offline"):
        broken.append_as_leader(make_batch(1), 0, 0)
    assert manager.take_dir_offline(dirs[0]) == [("a", 0)]
    assert dirs[0] not in manager.live_dirs
    manager.checkpoint()
    assert reported == [dirs[0]]


def test_unusable_dir_at_startup_is_offline(tmp_path, managers):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    good = str(tmp_path / "good")
    channel = LogDirFailureChannel()
    manager = start([str(blocker), good], managers, channel=channel)
    assert manager.live_dirs == [good]
    assert channel.is_offline(str(blocker))
    with pytest.raises(NoLiveLogDirError):
        LogManager([str(blocker)], 1, "cluster-x", LogConfig(), LogDirFailureChannel()).startup()


def test_run_retention_covers_every_log(dirs, managers):
    manager = start(dirs, managers, config=LogConfig(segment_bytes=300, retention_ms=1_000,
                                                     file_delete_delay_ms=0))
    logs = [manager.get_or_create_log("a", p, TOPIC_A) for p in range(3)]
    for log in logs:
        for i in range(4):
            log.append_as_leader(make_batch(1, value_size=150, timestamp=i), 0, 0)
    old_segments = sum(len(log.segments) - 1 for log in logs)
    assert old_segments >= 3
    assert manager.run_retention(10_000) == old_segments
    assert all(len(log.segments) == 1 for log in logs)


def open_files_under(paths: list[str]) -> list[str]:
    """What this process (the broker's storage) holds open in the partition dirs of the log
    dirs ``paths`` (from /proc; a log dir's own .lock is not a partition's)."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # the fd of the listing itself, closed by now
            continue
        if os.path.dirname(os.path.dirname(target)) in paths:
            held.append(target)
    return held


def test_a_new_partition_holds_one_open_file(dirs, managers):
    # Issue 34: three fds per partition (.log, .index, .timeindex) ran a broker with ~6,600
    # partitions into its open-file limit; Kafka holds one. An index with no entries has no file.
    config = LogConfig(index_interval_bytes=100)
    manager = start(dirs, managers, config=config)
    partitions = 30
    logs = [manager.get_or_create_log("many", p, TOPIC_A) for p in range(partitions)]
    assert sorted(open_files_under(dirs)) == sorted(log.segments[0].log_path for log in logs)
    assert not [name for d in dirs for entry in os.listdir(d) if os.path.isdir(os.path.join(d, entry))
                for name in os.listdir(os.path.join(d, entry)) if name.endswith(("index", ".timeindex"))]
    # An index entry brings the active segment's two index files (and their fds); a roll closes
    # them, the sealed segment keeping its .log open.
    busy = logs[0]
    for _ in range(3):
        busy.append_as_leader(make_batch(5, value_size=100), 0, 0)
    assert len(busy.segments[0].offset_index) > 0
    assert len(open_files_under(dirs)) == partitions + 2
    busy.roll()
    assert len(open_files_under(dirs)) == partitions + 1
    # A restart, clean or not, opens one file per partition (plus the sealed segment's .log).
    stop(manager, managers)
    assert open_files_under(dirs) == []
    manager = start(dirs, managers, config=config)
    logs = [manager.get_or_create_log("many", p, TOPIC_A) for p in range(partitions)]
    assert len(open_files_under(dirs)) == partitions + 1
    assert decode_records(read_all(logs[0]))[-1][0] == 14
