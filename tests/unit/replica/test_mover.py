"""LogDirMover on real temporary log dirs (LogManager + ReplicaManager, no sockets): byte-for-byte
copies, appends during a move, cancel and redirect, truncation and retention of the source while
it is copied, resuming after a restart, failures, log.dir.min.free.bytes, and the throttle's chunks."""

from __future__ import annotations

import asyncio
import errno
import os
import uuid
from collections.abc import AsyncIterator

import pytest

from minikafka.replica import log_dir_mover as mover_module
from minikafka.replica.log_dir_mover import LogDirMover, MoveState
from minikafka.replica.replica_manager import ReplicaManager
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import LogConfig
from minikafka.storage.log_manager import LogManager
from minikafka.storage.throttle import MIN_CHUNK_BYTES
from protocol.errors import ErrorCode
from tests.unit.storage.helpers import decode_records, make_batch, read_all

TOPIC_ID = uuid.UUID(int=0xC0FFEE)
CONFIG = LogConfig(segment_bytes=2_000, index_interval_bytes=200, file_delete_delay_ms=0)
pytestmark = pytest.mark.timeout(30)


class Gate:
    """Replaces the Throttle's acquire: the mover copies one chunk per ``step``."""

    def __init__(self, mover: LogDirMover) -> None:
        self.mover = mover
        self.permits: asyncio.Queue[None] = asyncio.Queue()
        self.waiting = asyncio.Event()
        self.open = False

    async def acquire(self, nbytes: int) -> None:
        if self.open:
            return
        self.waiting.set()
        await self.permits.get()
        self.waiting.clear()

    async def _next_request(self) -> None:
        """Until the mover waits for a permit, or no move is left running."""
        while not self.waiting.is_set():
            tasks = [m.task for m in self.mover.moves.values() if m.active and m.task is not None]
            if not tasks:
                return
            asked = asyncio.ensure_future(self.waiting.wait())
            await asyncio.wait([asked, *tasks], return_when=asyncio.FIRST_COMPLETED)
            asked.cancel()

    async def step(self, chunks: int = 1) -> None:
        """Let ``chunks`` chunks through and wait until the mover asks for the next."""
        for _ in range(chunks):
            await self._next_request()
            if not self.waiting.is_set():
                return
            self.waiting.clear()
            self.permits.put_nowait(None)
            await asyncio.sleep(0)
        await self._next_request()

    def release(self) -> None:
        self.open = True
        self.permits.put_nowait(None)


class Broker:
    """The storage and replica layers of one broker over ``dirs``, with a mover."""

    def __init__(self, dirs: list[str], **mover_args: object) -> None:
        self.dirs = dirs
        self.channel = LogDirFailureChannel()
        self.manager = LogManager(dirs, 1, "cluster-x", CONFIG, self.channel)
        self.manager.startup()
        self.replicas = ReplicaManager(1, self.manager)
        # A tiny swap delta, so that even these small logs are copied in rounds before the swap.
        mover_args.setdefault("swap_delta_bytes", 300)
        self.mover = LogDirMover(self.manager, self.replicas, self.channel, **mover_args)  # type: ignore[arg-type]
        self.appended = 0

    def lead(self, partition: int = 0, log_dir: str | None = None) -> None:
        if log_dir is not None and self.manager.get_log("t", partition) is None:
            self.manager.get_or_create_log("t", partition, TOPIC_ID, CONFIG, log_dir=log_dir)
        assert self.replicas.become_leader("t", partition, TOPIC_ID, 0, CONFIG) is not None

    def append(self, partition: int = 0, count: int = 1, size: int = 150) -> None:
        for _ in range(count):
            tag = b"r%d" % self.appended
            result = self.replicas.append("t", partition, make_batch(2, value_size=size, tag=tag), 1_000)
            assert result.error == ErrorCode.NONE, result
            self.appended += 1

    def log(self, partition: int = 0):
        return self.manager.get_log("t", partition)

    async def close(self) -> None:
        await self.mover.stop()
        self.manager.shutdown()


@pytest.fixture
def dirs(tmp_path) -> list[str]:
    return [str(tmp_path / f"d{i}") for i in (1, 2, 3)]


@pytest.fixture
async def broker(dirs) -> AsyncIterator[Broker]:
    node = Broker(dirs)
    node.lead(log_dir=dirs[0])
    node.mover.start()
    yield node
    await node.close()


def segment_files(log) -> dict[str, bytes]:
    found = {}
    for name in sorted(os.listdir(log.dir_path)):
        if name.endswith((".log", ".index", ".timeindex")):
            with open(os.path.join(log.dir_path, name), "rb") as handle:
                found[name] = handle.read()
    return found


def gate(node: Broker) -> Gate:
    control = Gate(node.mover)
    node.mover.throttle.acquire = control.acquire  # type: ignore[method-assign]
    return control


async def finish(node: Broker, key=("t", 0), move=None):
    """Wait for the move of ``key`` (or ``move``, if it may have ended already) and its cleanups."""
    move = move or node.mover.moves[key]
    assert move.task is not None
    await move.task
    await node.mover.wait_for_cleanups()
    return move


async def test_a_move_copies_every_file_byte_for_byte_and_swaps(broker, dirs):
    broker.append(count=30)
    source = broker.log()
    assert len(source.segments) > 3
    files = segment_files(source)
    expected = decode_records(read_all(source))
    assert broker.mover.move("t", 0, dirs[1]) == ErrorCode.NONE
    move = await finish(broker)
    assert move.state is MoveState.DONE and move.swap_ms is not None
    moved = broker.log()
    assert moved is not source and moved.log_dir == dirs[1]
    assert broker.replicas.get_partition("t", 0).log is moved
    # The sealed segments' files are the same bytes; the active segment's .log too.
    assert segment_files(moved) == files
    assert decode_records(read_all(moved)) == expected
    assert sorted(os.listdir(dirs[0])) == sorted(n for n in os.listdir(dirs[0]) if not n.startswith("t-"))
    assert broker.manager.future_logs == {}
    broker.append(count=2)
    assert decode_records(read_all(moved))[-1][2].startswith(b"r31-")


async def test_a_segment_sealed_just_before_the_swap_keeps_its_index_files(broker, dirs):
    broker.append(count=12)
    control = gate(broker)
    broker.mover.move("t", 0, dirs[1])
    await control.step(len(broker.log().segments) - 1)  # the sealed segments are copied
    broker.mover.swap_delta_bytes = 20_000  # the swap itself copies the rest
    segments = len(broker.log().segments)
    while len(broker.log().segments) == segments:  # seal the active segment under the mover
        broker.append(count=1)
    files = segment_files(broker.log())
    control.release()
    move = await finish(broker)
    assert move.state is MoveState.DONE
    assert segment_files(broker.log()) == files


async def test_appends_while_moving_are_neither_refused_nor_lost(broker, dirs):
    broker.append(count=20)
    control = gate(broker)
    assert broker.mover.move("t", 0, dirs[2]) == ErrorCode.NONE
    move = broker.mover.moves[("t", 0)]
    for _ in range(15):  # appends between chunk copies, rolling segments under the mover
        broker.append(count=1, size=400)
        await control.step()
    control.release()
    while move.active:  # and appends as fast as the loop turns while it catches up and swaps
        broker.append(count=1, size=400)
        await asyncio.sleep(0)
    await finish(broker, move=move)
    assert ("t", 0) not in broker.mover.moves  # a finished move is forgotten
    assert move.state is MoveState.DONE
    records = decode_records(read_all(broker.log()))
    assert [offset for offset, _, _ in records] == list(range(2 * broker.appended))
    tags = [value.split(b"-", 1)[0] for _, _, value in records[::2]]
    assert tags == [b"r%d" % i for i in range(broker.appended)]
    assert broker.log().log_dir == dirs[2]


async def test_moving_to_the_current_dir_cancels_and_elsewhere_redirects(broker, dirs):
    broker.append(count=20)
    control = gate(broker)
    assert broker.mover.move("t", 0, dirs[1]) == ErrorCode.NONE
    await control.step()
    first = broker.mover.moves[("t", 0)]
    future_dir = first.future.dir_path
    assert broker.mover.move("t", 0, dirs[1]) == ErrorCode.NONE
    assert broker.mover.moves[("t", 0)] is first  # the same move goes on
    assert broker.mover.move("t", 0, dirs[0]) == ErrorCode.NONE
    assert first.state is MoveState.CANCELLED and ("t", 0) not in broker.manager.future_logs
    await broker.mover.wait_for_cleanups()
    assert not os.path.exists(future_dir) and not any(n.startswith("t-0.") for n in os.listdir(dirs[1]))
    assert broker.mover.move("t", 0, dirs[1]) == ErrorCode.NONE
    await control.step()
    second = broker.mover.moves[("t", 0)]
    assert broker.mover.move("t", 0, dirs[2]) == ErrorCode.NONE
    third = broker.mover.moves[("t", 0)]
    assert second.state is MoveState.CANCELLED and third is not second
    control.release()
    await finish(broker)
    assert third.state is MoveState.DONE and broker.log().log_dir == dirs[2]
    assert not any(n.startswith("t-0") for d in dirs[:2] for n in os.listdir(d))


async def test_the_source_truncated_and_rewritten_during_the_move_is_copied_again(broker, dirs):
    broker.append(count=20)
    control = gate(broker)
    broker.mover.move("t", 0, dirs[1])
    await control.step(len(broker.log().segments) - 1)
    source = broker.log()
    source.truncate_to(source.segments[-2].base_offset + 1)
    broker.append(count=6, size=90)
    expected = decode_records(read_all(source))
    control.release()
    move = await finish(broker)
    assert move.state is MoveState.DONE
    assert decode_records(read_all(broker.log())) == expected


async def test_a_source_cut_back_to_an_empty_segment_is_copied_as_such(broker, dirs):
    broker.append(count=20)
    control = gate(broker)
    broker.mover.move("t", 0, dirs[1])
    await control.step(len(broker.log().segments) - 1)  # the sealed segments are copied
    source = broker.log()
    source.truncate_to(0)  # one empty segment is left, at the base of a copied one
    assert [(s.base_offset, s.size) for s in source.segments] == [(0, 0)]
    expected = decode_records(read_all(source))
    control.release()
    move = await finish(broker)
    assert move.state is MoveState.DONE, move.error
    assert decode_records(read_all(broker.log())) == expected
    assert expected == [] and broker.log().log_end_offset == 0
    broker.append(count=2)
    assert [offset for offset, _, _ in decode_records(read_all(broker.log()))] == [0, 1, 2, 3]


async def test_retention_and_delete_records_keep_working_during_the_move(broker, dirs):
    broker.append(count=30)
    control = gate(broker)
    broker.mover.move("t", 0, dirs[1])
    await control.step(2)
    source = broker.log()
    cut = source.segments[4].base_offset + 1
    assert source.delete_records_before(cut) == cut
    broker.append(count=3)
    expected_bases = [s.base_offset for s in source.segments]
    expected = decode_records(read_all(source))
    control.release()
    await finish(broker)
    moved = broker.log()
    assert moved.log_start_offset == cut
    assert [s.base_offset for s in moved.segments] == expected_bases
    assert decode_records(read_all(moved)) == expected
    assert sorted(n for n in os.listdir(moved.dir_path) if n.endswith(".log")) == [
        f"{base:020d}.log" for base in expected_bases]


async def test_a_move_resumes_after_a_restart_keeping_what_was_copied(dirs):
    node = Broker(dirs)
    node.lead(log_dir=dirs[0])
    node.mover.start()
    node.append(count=40)
    expected = decode_records(read_all(node.log()))
    total = node.log().size_bytes
    control = gate(node)
    node.mover.move("t", 0, dirs[2])
    await control.step(5)
    await node.close()

    again = Broker(dirs)
    assert again.manager.future_logs[("t", 0)].resumed
    again.lead()
    again.mover.start()
    move = await finish(again)
    try:
        assert move.state is MoveState.DONE
        assert again.log().log_dir == dirs[2]
        assert decode_records(read_all(again.log())) == expected
        assert move.bytes_copied < total * 0.9
    finally:
        await again.close()


async def test_a_partition_deleted_during_its_move_or_swap_ends_the_move_quietly(broker, dirs, monkeypatch):
    broker.append(count=20)
    control = gate(broker)
    broker.mover.move("t", 0, dirs[1])
    await control.step()
    move = broker.mover.moves[("t", 0)]
    broker.manager.delete_log("t", 0, now_ms=0)
    control.release()
    await finish(broker, move=move)
    assert move.state is MoveState.CANCELLED and ("t", 0) not in broker.mover.failures
    # Deleted between the decision and the renames: nothing left to rename, no error.
    broker.lead(partition=1, log_dir=dirs[0])
    broker.append(partition=1, count=5)
    real_finish = broker.mover._finish_swap

    async def delete_then_finish(move, old_log):
        broker.manager.delete_log("t", 1, now_ms=0)
        await real_finish(move, old_log)

    monkeypatch.setattr(broker.mover, "_finish_swap", delete_then_finish)
    broker.mover.move("t", 1, dirs[1])
    second = await finish(broker, key=("t", 1))
    assert second.state is MoveState.DONE and second.error is None
    assert broker.manager.get_log("t", 1) is None


async def test_a_failing_destination_fails_the_move_and_the_source_keeps_serving(broker, dirs, monkeypatch):
    broker.append(count=10)

    def broken(src_fd: int, dst_path: str, offset: int, count: int) -> int:
        raise OSError(errno.EIO, "Input/output error", dst_path)

    monkeypatch.setattr(mover_module, "copy_range", broken)
    broker.mover.move("t", 0, dirs[1])
    move = await finish(broker)
    assert move.state is MoveState.FAILED and "failed" in (move.error or "")
    assert broker.channel.is_offline(dirs[1]) and not broker.channel.is_offline(dirs[0])
    assert broker.mover.failures[("t", 0)].dest_dir == dirs[1]
    assert broker.log().log_dir == dirs[0]
    broker.append(count=1)
    # The mover goes on with other moves.
    monkeypatch.undo()
    assert broker.mover.move("t", 0, dirs[2]) == ErrorCode.NONE
    assert (await finish(broker)).state is MoveState.DONE
    assert ("t", 0) not in broker.mover.failures


async def test_an_unexpected_error_fails_the_move_and_removes_its_copy(broker, dirs, monkeypatch):
    broker.append(count=10)

    def bug(move):
        raise RuntimeError("a bug")

    monkeypatch.setattr(broker.mover, "_swap", bug)
    broker.mover.move("t", 0, dirs[1])
    move = await finish(broker)
    assert move.state is MoveState.FAILED and move.error == "RuntimeError: a bug"
    assert not any(n.startswith("t-0") for n in os.listdir(dirs[1]))
    assert not broker.channel.offline_dirs


async def test_a_failed_dir_stops_its_moves_without_touching_files(broker, dirs):
    broker.append(count=10)
    control = gate(broker)
    broker.mover.move("t", 0, dirs[1])
    await control.step()
    move = broker.mover.moves[("t", 0)]
    assert broker.mover.cancel_moves_involving(dirs[1], "log dir failed") == [("t", 0)]
    assert move.state is MoveState.FAILED and move.error == "log dir failed"
    assert os.path.isdir(move.future.dir_path) and broker.manager.future_logs == {}
    assert broker.mover.cancel_moves_involving(dirs[0], "again") == []


async def test_min_free_bytes_refuses_moves_that_would_cross_it(broker, dirs):
    broker.append(count=5)
    usable = broker.manager.dir_usage(dirs[1]).usable_bytes
    broker.manager.min_free_bytes = usable
    assert broker.mover.move("t", 0, dirs[1]) == ErrorCode.KAFKA_STORAGE_ERROR
    assert "log.dir.min.free.bytes" in broker.mover.failures[("t", 0)].reason
    broker.manager.min_free_bytes = 1
    assert broker.mover.move("t", 0, dirs[1]) == ErrorCode.NONE
    await finish(broker)


def with_one_large_active_segment(dirs: list[str]) -> Broker:
    """A node leading t-0 in dirs[0], its ~800 KiB in one active segment (many throttle chunks)."""
    big = LogConfig(segment_bytes=8 << 20, index_interval_bytes=4096, file_delete_delay_ms=0)
    node = Broker(dirs, swap_delta_bytes=1)
    node.manager.get_or_create_log("t", 0, TOPIC_ID, big, log_dir=dirs[0])
    assert node.replicas.become_leader("t", 0, TOPIC_ID, 0, big) is not None
    node.mover.start()
    for i in range(400):
        assert node.replicas.append("t", 0, make_batch(2, value_size=1000, tag=b"r%d" % i), 1_000).error \
            == ErrorCode.NONE
    assert len(node.log().segments) == 1 and node.log().size_bytes > 10 * MIN_CHUNK_BYTES
    return node


async def test_the_lag_of_a_move_falls_while_a_large_active_segment_copies(dirs):
    # One active segment of ~600 KiB copied in 64 KiB chunks: offsetLag and the lag metric must
    # fall chunk by chunk, not stay at the whole partition until the segment is done.
    node = with_one_large_active_segment(dirs)
    try:
        source = node.log()
        node.mover.throttle.set_rate(MIN_CHUNK_BYTES * 20)  # chunks of MIN_CHUNK_BYTES
        control = gate(node)
        assert node.mover.move("t", 0, dirs[1]) == ErrorCode.NONE
        lags = []
        for _ in range(4):
            await control.step()
            future = node.manager.future_logs[("t", 0)]
            lags.append(source.log_end_offset - future.log_end_offset)
            gauge = mover_module.FUTURE_REPLICA_LAG.labels("t", "0")._value.get()
            assert gauge == lags[-1]
        assert lags == sorted(lags, reverse=True) and lags[0] < source.log_end_offset and lags[-1] < lags[0]
        assert all(lag > 0 for lag in lags), "the copy is not done yet"
        control.release()
        move = await finish(node)
        assert move.state is MoveState.DONE
    finally:
        await node.close()


async def test_a_large_active_segment_is_written_back_while_it_copies_and_still_copied_whole(dirs, monkeypatch):
    # A long copy into one file fsyncs it along the way, so the fsync before the swap does not
    # wait for the disk to take the whole of it; the copy stays byte for byte.
    monkeypatch.setattr(mover_module, "WRITEBACK_EVERY_BYTES", 2 * MIN_CHUNK_BYTES)
    synced: list[list[str]] = []
    real_fsync = mover_module.fsync_existing

    def recorded(paths: list[str]) -> None:
        synced.append(list(paths))
        real_fsync(paths)
    monkeypatch.setattr(mover_module, "fsync_existing", recorded)
    node = with_one_large_active_segment(dirs)
    try:
        source = node.log()
        files, expected = segment_files(source), decode_records(read_all(source))
        node.mover.throttle.set_rate(MIN_CHUNK_BYTES * 20)  # chunks of MIN_CHUNK_BYTES
        control = gate(node)
        assert node.mover.move("t", 0, dirs[1]) == ErrorCode.NONE
        for _ in range(6):
            await control.step()
        future_log_file = os.path.join(node.manager.future_logs[("t", 0)].dir_path, "00000000000000000000.log")
        writeback = node.mover.moves[("t", 0)].writeback
        assert writeback is not None, "nothing was written back while the segment copied"
        await writeback  # it runs in the mover's threads
        assert [future_log_file] in synced
        control.release()
        move = await finish(node)
        assert move.state is MoveState.DONE
        assert segment_files(node.log()) == files and decode_records(read_all(node.log())) == expected
    finally:
        await node.close()
