"""The log dirs' blocking background work: a rolled segment's fsync and a retired dir's removal
run off the event loop, the recovery point moves only once the fsync is done, and an I/O error
there takes the dir offline like any other."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest

from minikafka.storage.background_io import BackgroundIo
from minikafka.storage.dir_io import DirGuard
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import Log, LogConfig
from minikafka.storage.log_manager import LogManager
from tests.unit.storage.helpers import make_batch

TOPIC_ID = uuid.UUID(int=0xC3)


class HeldFsyncs:
    """os.fsync that, off the main thread, waits until ``release`` (or fails with ``error``),
    counting those calls; on the main thread (the event loop's) it is the real one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.released = threading.Event()
        self.calls = 0
        self.error: OSError | None = None
        real = os.fsync

        def fsync(fd: int) -> None:
            if threading.current_thread() is threading.main_thread():
                return real(fd)
            self.calls += 1
            assert self.released.wait(10), "the test never released the fsync"
            if self.error is not None:
                raise self.error
            return real(fd)
        monkeypatch.setattr(os, "fsync", fsync)

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def background() -> Iterator[BackgroundIo]:
    pool = BackgroundIo(threads=1)
    yield pool
    pool.close()


@pytest.fixture
def log_dir(tmp_path) -> str:
    path = tmp_path / "logs"
    path.mkdir()
    return str(path)


def full_log(log_dir: str, channel: LogDirFailureChannel, background: BackgroundIo) -> Log:
    """A log whose first segment is full: the next append rolls."""
    log = Log.create(log_dir, "t", 0, TOPIC_ID, LogConfig(segment_bytes=2_000), DirGuard(log_dir, channel),
                     background)
    while log.segments[-1].size < 1_000:
        log.append_as_leader(make_batch(5, value_size=50), 0, 0)
    return log


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0.01)


async def test_a_roll_does_not_wait_for_the_old_segments_fsync(log_dir, background, monkeypatch):
    log = full_log(log_dir, LogDirFailureChannel(), background)
    held = HeldFsyncs(monkeypatch)
    end = log.log_end_offset
    log.append_as_leader(make_batch(20, value_size=50), 0, 0)  # rolls, and returns with the fsync held
    assert len(log.segments) == 2
    await until(lambda: held.calls > 0)
    assert log.recovery_point == 0, "the recovery point passed data not yet fsynced"
    held.release()
    await background.drain()
    assert log.recovery_point == end
    log.close()


async def test_a_truncation_during_the_fsync_keeps_the_recovery_point_where_it_was(log_dir, background,
                                                                                   monkeypatch):
    log = full_log(log_dir, LogDirFailureChannel(), background)
    held = HeldFsyncs(monkeypatch)
    log.append_as_leader(make_batch(20, value_size=50), 0, 0)
    await until(lambda: held.calls > 0)
    rolled_at = log.segments[-1].base_offset
    log.truncate_to(10)
    log.append_as_leader(make_batch(20, value_size=50), 0, 0)  # new, unsynced data past where it rolled
    assert log.log_end_offset > rolled_at
    held.release()
    await background.drain()
    assert log.recovery_point == 0, "the recovery point claims records written after the fsync as synced"
    log.close()


async def test_a_log_deleted_during_the_fsync_leaves_its_dir_online(log_dir, background, monkeypatch):
    channel = LogDirFailureChannel()
    log = full_log(log_dir, channel, background)
    held = HeldFsyncs(monkeypatch)
    log.append_as_leader(make_batch(20, value_size=50), 0, 0)
    await until(lambda: held.calls > 0)
    log.delete()  # renamed ...-delete, as a deleted topic's replica is
    held.release()
    await background.drain()
    assert not channel.is_offline(log_dir)


async def test_an_fsync_failing_in_the_background_takes_the_dir_offline(log_dir, background, monkeypatch):
    channel = LogDirFailureChannel()
    log = full_log(log_dir, channel, background)
    held = HeldFsyncs(monkeypatch)
    held.error = OSError(errno.EIO, "Input/output error")
    log.append_as_leader(make_batch(20, value_size=50), 0, 0)
    held.release()
    await background.drain()
    assert channel.is_offline(log_dir)
    assert isinstance(channel.causes[log_dir], OSError)
    assert log.recovery_point == 0
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(make_batch(1), 0, 0)
    log.close()


def test_without_an_event_loop_the_roll_fsyncs_before_it_returns(log_dir, monkeypatch):
    """Startup, shutdown and offline tools have no loop: the fsync is done inline, and its
    failure is the caller's KafkaStorageError."""
    channel = LogDirFailureChannel()
    log = full_log(log_dir, channel, BackgroundIo(threads=1))
    end = log.log_end_offset
    log.append_as_leader(make_batch(20, value_size=50), 0, 0)
    assert log.recovery_point == end

    def failing(_fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(make_batch(20, value_size=50), 0, 0)  # rolls again
    assert channel.is_offline(log_dir)
    log.close()


async def test_a_deleted_partition_is_removed_off_the_event_loop(tmp_path, background, monkeypatch):
    dirs = [str(tmp_path / "d1")]
    manager = LogManager(dirs, 1, "cluster", LogConfig(file_delete_delay_ms=0), LogDirFailureChannel(),
                         background=background)
    manager.startup()
    log = manager.get_or_create_log("a", 0, TOPIC_ID)
    log.append_as_leader(make_batch(3), 0, 0)
    release = threading.Event()
    removing = threading.Event()
    real_rmtree = shutil.rmtree

    def held_rmtree(path: str, *args: object, **kwargs: object) -> None:
        removing.set()
        assert release.wait(10)
        real_rmtree(path, *args, **kwargs)
    monkeypatch.setattr(shutil, "rmtree", held_rmtree)
    manager.delete_log("a", 0)  # returns while the removal is held
    await until(removing.is_set)
    (retired,) = [n for n in os.listdir(dirs[0]) if n.endswith("-delete")]
    release.set()
    await background.drain()
    assert not os.path.exists(os.path.join(dirs[0], retired))
    manager.shutdown()


class RecordedFsyncs:
    """The real os.fsync, noting for each call the file's path and whether the event loop's
    thread (the main one) made it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, bool]] = []
        real = os.fsync

        def fsync(fd: int) -> None:
            self.calls.append((os.readlink(f"/proc/self/fd/{fd}"), threading.current_thread() is threading.main_thread()))
            return real(fd)
        monkeypatch.setattr(os, "fsync", fsync)

    def of(self, suffix: str) -> list[bool]:
        """For each fsync of a file whose name ends with ``suffix`` (or of its temporary copy,
        written to be renamed to it): made on the event loop?"""
        return [on_loop for path, on_loop in self.calls if path.removesuffix(".tmp").endswith(suffix)]


async def test_a_roll_fsyncs_the_producer_snapshot_off_the_event_loop(log_dir, background, monkeypatch):
    log = full_log(log_dir, LogDirFailureChannel(), background)
    fsyncs = RecordedFsyncs(monkeypatch)
    log.append_as_leader(make_batch(20, value_size=50), 0, 0)  # rolls, writing a producer snapshot
    await background.drain()
    snapshot = f"{log.segments[-1].base_offset:020d}.snapshot"
    assert os.path.exists(os.path.join(log.dir_path, snapshot))
    assert fsyncs.of(snapshot) == [False], "the snapshot is fsynced once, off the event loop"
    log.close()


async def test_a_truncation_fsyncs_the_leader_epoch_checkpoint_off_the_event_loop(log_dir, background,
                                                                                 monkeypatch):
    log = Log.create(log_dir, "t", 0, TOPIC_ID, LogConfig(), DirGuard(log_dir, LogDirFailureChannel()), background)
    log.append_as_leader(make_batch(5), 0, 0)
    fsyncs = RecordedFsyncs(monkeypatch)
    log.append_as_leader(make_batch(5), 1, 0)  # a new epoch: fsynced before the records that follow it
    assert fsyncs.of("leader-epoch-checkpoint") == [True]
    log.truncate_to(5)  # epoch 1 goes: its rewrite is fsynced in the background
    await background.drain()
    assert fsyncs.of("leader-epoch-checkpoint") == [True, False]
    assert log.leader_epochs.entries == [(0, 0)]
    log.close()
