"""Moves of replicas between the log dirs of this broker (KIP-113): copy, catch up, swap.

A move copies a partition's current log into ``<topic>-<partition>.<uuid>-future`` in the
destination dir, file to file: sealed segments whole (``.log`` with os.copy_file_range, or
os.sendfile where the kernel refuses it, then ``.index`` and ``.timeindex``), the active segment
by byte ranges until the copy has caught up.  Record data never passes through Python memory,
and the future log has exactly the source's segments (same base offsets, same bytes).  Then,
without yielding the event loop, the last few bytes are copied, the leader-epoch checkpoint and
a producer snapshot are written, everything is fsynced, and LogManager swaps the future log in
(crash-safe through its marker file).  Appends wait for that instant only: a produce request is
never refused because of a move.

Threads: every blocking copy, fsync and directory removal runs in the mover's thread pool
(``num.replica.alter.log.dirs.threads`` workers, and at most that many moves copying at once);
those functions get plain fds, paths and offsets and return counts or raise OSError.  Everything
else (planning, progress, the Throttle, the swap, reporting a failed dir to the
LogDirFailureChannel) happens on the event loop.
"""

from __future__ import annotations

import asyncio
import enum
import errno
import logging
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from prometheus_client import Counter, Gauge

from minikafka.replica.replica_manager import ReplicaManager
from minikafka.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, fsync_dir_path
from minikafka.storage.dir_io import DirGuard
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import Log, partition_dir_name
from minikafka.storage.log_manager import FutureLog, LogManager, hook_point
from minikafka.storage.producer_state import snapshot_file_name
from minikafka.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    Segment,
    segment_name,
)
from minikafka.storage.throttle import UNLIMITED_RATE, Throttle
from minikafka.storage.txn_index import TXN_INDEX_SUFFIX
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
T = TypeVar("T")

# The swap copies at most this much while appends wait; a move copies in rounds until the
# source is within this distance of the copy.
SWAP_DELTA_BYTES = 1 << 20
# Bytes compared at the end of each file a resumed move finds, to check that it is a prefix of
# the source (a crash cannot leave anything else, but a source cut back at recovery can).
RESUME_CHECK_BYTES = 64 << 10
METRICS_REFRESH_S = 5.0
# A private tagged field (DescribeLogDirs v2+, on the current replica's partition entry) that
# carries why the last move of that replica failed; Kafka clients skip unknown tags.
MOVE_ERROR_TAG = 10_000

MOVES_IN_PROGRESS = Gauge("minikafka_log_dir_moves_in_progress",
                          "Replica moves between log dirs that are waiting for a worker or copying")
MOVED_BYTES = Counter("minikafka_log_dir_moved_bytes", "Bytes copied by replica moves between log dirs")
FAILED_MOVES = Counter("minikafka_log_dir_failed_moves", "Replica moves between log dirs that failed")
FUTURE_REPLICA_LAG = Gauge("minikafka_future_replica_lag",
                           "Offsets a moving replica's copy (future replica) is behind its current log",
                           ["topic", "partition"])
MAX_FUTURE_REPLICA_LAG = Gauge("minikafka_future_replica_max_lag",
                               "The largest offset lag of any future replica being copied")
LOG_DIR_BYTES = Gauge("minikafka_log_dir_bytes", "Bytes of the replicas (and future replicas) in a log dir",
                      ["log_dir"])
LOG_DIR_USABLE_BYTES = Gauge("minikafka_log_dir_usable_bytes",
                             "Usable bytes of the file system of a log dir (-1 offline)", ["log_dir"])
LOG_DIR_TOTAL_BYTES = Gauge("minikafka_log_dir_total_bytes",
                            "Total bytes of the file system of a log dir (-1 offline)", ["log_dir"])


class MoveState(enum.Enum):
    WAITING = "waiting"  # for a worker slot
    COPYING = "copying"
    SWAPPING = "swapping"  # decided: served from the copy, its dirs being renamed
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class _Stop(Exception):
    """The move must end now; ``keep_files`` says whether the future dir must stay as it is."""

    def __init__(self, reason: str, keep_files: bool) -> None:
        super().__init__(reason)
        self.keep_files = keep_files


class _DirFailed(Exception):
    """An OS call of a move failed on ``log_dir``; the dir has been reported."""

    def __init__(self, log_dir: str, cause: OSError) -> None:
        super().__init__(f"{log_dir}: {cause}")
        self.log_dir = log_dir
        self.cause = cause


# ---- blocking work, run in the mover's threads -------------------------------------------

_COPY_FILE_RANGE_REFUSED = (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EBADF)
_use_copy_file_range = hasattr(os, "copy_file_range")


def copy_range(src_fd: int, dst_path: str, offset: int, count: int) -> int:
    """Copy ``count`` bytes at ``offset`` of ``src_fd`` to the same offset of ``dst_path``,
    inside the kernel; returns the bytes copied (fewer if the source ends first).  A copy
    from offset 0 starts the destination afresh."""
    global _use_copy_file_range
    fd = os.open(dst_path, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if offset == 0 else 0), 0o644)
    try:
        done = 0
        while done < count:
            n = -1
            if _use_copy_file_range:
                try:
                    n = os.copy_file_range(src_fd, fd, count - done, offset + done, offset + done)
                except OSError as exc:
                    if exc.errno not in _COPY_FILE_RANGE_REFUSED:
                        raise
                    # Older kernels refuse some file systems (and across them): sendfile still
                    # copies in the kernel.
                    log.info("os.copy_file_range refused (%s); moves use os.sendfile", exc.strerror)
                    _use_copy_file_range = False
            if n < 0:
                os.lseek(fd, offset + done, os.SEEK_SET)
                n = os.sendfile(fd, src_fd, offset + done, count - done)
            if n == 0:
                break
            done += n
        return done
    finally:
        os.close(fd)


def copy_file(src_path: str, dst_path: str) -> int:
    """Copy a whole (small) file in the kernel; returns its size."""
    src = os.open(src_path, os.O_RDONLY)
    try:
        size = os.fstat(src).st_size
        with open(dst_path, "wb"):
            pass
        return copy_range(src, dst_path, 0, size) if size else 0
    finally:
        os.close(src)


def fsync_paths(paths: list[str]) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def fsync_existing(paths: list[str]) -> None:
    """fsync each file that still exists (a sealed segment may have no index file, and a
    cancelled move's files may be gone already)."""
    for path in paths:
        try:
            fsync_paths([path])
        except FileNotFoundError:
            pass


def truncate_file(path: str, size: int) -> None:
    os.truncate(path, size)


def remove_file(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def same_tail(src_fd: int, dst_path: str, size: int) -> bool:
    """Whether the last bytes (up to RESUME_CHECK_BYTES) of ``dst_path``'s first ``size``
    bytes equal the source's at the same offsets."""
    start = max(0, size - RESUME_CHECK_BYTES)
    with open(dst_path, "rb") as handle:
        handle.seek(start)
        ours = handle.read(size - start)
    return ours == os.pread(src_fd, size - start, start)


def list_sizes(dir_path: str) -> dict[str, int]:
    return {entry.name: entry.stat().st_size for entry in os.scandir(dir_path) if entry.is_file()}


# ---- one move ---------------------------------------------------------------------------


@dataclass(eq=False)
class Move:
    """One partition's move: where from and to, how far the copy is, how it ended.

    Owned by the LogDirMover and touched only on the event loop; the copy threads see plain
    values derived from it.
    """

    topic: str
    partition: int
    source_dir: str
    dest_dir: str
    future: FutureLog
    source: Log
    state: MoveState = MoveState.WAITING
    requested_at: float = field(default_factory=time.monotonic)
    copied: dict[int, int] = field(default_factory=dict)  # segment base -> bytes of .log copied
    indexed: set[int] = field(default_factory=set)  # sealed segments with index files copied
    unsynced: set[int] = field(default_factory=set)  # segments with bytes not fsynced yet
    unsynced_bytes: int = 0
    bytes_copied: int = 0  # by this run, index files included
    truncated_from: int | None = None  # set when the source was truncated (re-copy from there)
    error: str | None = None
    swap_ms: float | None = None
    task: asyncio.Task[None] | None = None
    syncs: list[asyncio.Future[None]] = field(default_factory=list)
    then: str | None = None  # a move asked while this one was swapping: started when it ends

    @property
    def key(self) -> TopicPartition:
        return self.topic, self.partition

    @property
    def name(self) -> str:
        return partition_dir_name(self.topic, self.partition)

    def future_file(self, base: int, suffix: str = LOG_SUFFIX) -> str:
        return os.path.join(self.future.dir_path, segment_name(base) + suffix)

    @property
    def active(self) -> bool:
        return self.state in (MoveState.WAITING, MoveState.COPYING, MoveState.SWAPPING)

    @property
    def cancellable(self) -> bool:
        return self.state in (MoveState.WAITING, MoveState.COPYING)


@dataclass(frozen=True)
class MoveFailure:
    dest_dir: str
    reason: str
    at: float


class LogDirMover:
    """Owns every move between this broker's log dirs: their tasks, the thread pool that does
    their blocking I/O, the shared Throttle, the record of failed moves and the move metrics.

    Called on the event loop (the AlterReplicaLogDirs handler calls ``move``; the log-dir
    failure handler calls ``cancel_moves_involving``; the Broker calls ``start`` and ``stop``).
    A move that fails says why in the broker log, in ``failures`` (which DescribeLogDirs
    reports) and in the metrics; it never takes the mover, or the partition's source, down.
    """

    def __init__(
        self, log_manager: LogManager, replica_manager: ReplicaManager, failure_channel: LogDirFailureChannel,
        *, threads: int | None = None, bytes_per_second: int = UNLIMITED_RATE,
        swap_delta_bytes: int = SWAP_DELTA_BYTES,
    ) -> None:
        self.log_manager = log_manager
        self.replica_manager = replica_manager
        self.failure_channel = failure_channel
        self.threads = threads or len(log_manager.log_dirs)
        self.throttle = Throttle(bytes_per_second)
        self.swap_delta_bytes = swap_delta_bytes
        self.moves: dict[TopicPartition, Move] = {}
        self.failures: dict[TopicPartition, MoveFailure] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._slots: asyncio.Semaphore | None = None
        self._cleanups: set[asyncio.Future[Any]] = set()
        self._metrics_task: asyncio.Task[None] | None = None
        self._lag_labels: set[TopicPartition] = set()

    # ---- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Start the workers and resume every move a previous run left unfinished."""
        self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="log-dir-mover")
        self._slots = asyncio.Semaphore(self.threads)
        MOVES_IN_PROGRESS.set_function(lambda: sum(1 for m in list(self.moves.values()) if m.active))
        MAX_FUTURE_REPLICA_LAG.set_function(self._max_lag)
        for key, future in list(self.log_manager.future_logs.items()):
            source = self.log_manager.logs.get(key)
            if source is None:
                continue
            self._launch(Move(key[0], key[1], source.log_dir, future.log_dir, future, source))
        self._metrics_task = asyncio.get_running_loop().create_task(self._refresh_metrics_periodically())

    async def stop(self) -> None:
        """Stop every move where it is (a restart resumes it) and wait for the threads."""
        swapping = [m.task for m in self.moves.values() if m.state is MoveState.SWAPPING and m.task is not None]
        await asyncio.gather(*swapping, return_exceptions=True)
        tasks = [m.task for m in self.moves.values() if m.task is not None and not m.task.done()]
        if self._metrics_task is not None:
            tasks.append(self._metrics_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*self._cleanups, return_exceptions=True)
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    # ---- requests -----------------------------------------------------------------------------

    def move(self, topic: str, partition: int, dest_dir: str) -> ErrorCode:
        """Move the hosted replica to ``dest_dir`` (AlterReplicaLogDirs for one partition).

        To the dir it is in: cancels a move in progress.  To the dir it is already moving to:
        nothing new.  Elsewhere: a move in progress is cancelled and a new one starts.
        """
        key = (topic, partition)
        current = self.log_manager.logs.get(key)
        if current is None:
            return ErrorCode.REPLICA_NOT_AVAILABLE
        existing = self.moves.get(key)
        if existing is not None and existing.active:
            if existing.dest_dir == dest_dir:
                existing.then = None
                return ErrorCode.NONE
            if not existing.cancellable:  # decided already: the new move follows it
                existing.then = dest_dir
                return ErrorCode.NONE
            self._cancel(existing, f"a move to {dest_dir} was requested instead")
        self.failures.pop(key, None)
        if dest_dir == current.log_dir:
            return ErrorCode.NONE
        shortfall = self._room_shortfall(dest_dir, current.size_bytes)
        if shortfall is not None:
            log.warning("not moving %s to %s: %s", current.name, dest_dir, shortfall)
            self._record_failure(key, dest_dir, shortfall)
            return ErrorCode.KAFKA_STORAGE_ERROR
        try:
            future = self.log_manager.create_future_log(topic, partition, dest_dir)
        except KafkaStorageError as exc:
            log.error("cannot move %s to %s: %s", current.name, dest_dir, exc)
            return ErrorCode.KAFKA_STORAGE_ERROR
        log.info("moving %s (%d bytes) from %s to %s", current.name, current.size_bytes, current.log_dir, dest_dir)
        self._launch(Move(topic, partition, current.log_dir, dest_dir, future, current))
        return ErrorCode.NONE

    def cancel_moves_involving(self, log_dir: str, reason: str) -> list[TopicPartition]:
        """Stop every move into or out of ``log_dir`` (it failed) without touching either side's
        files: the copy may be all that is left of a replica whose source dir failed.  Returns
        the partitions whose move stopped."""
        stopped = []
        for move in list(self.moves.values()):
            if move.cancellable and log_dir in (move.source_dir, move.dest_dir):
                self._end(move, MoveState.FAILED, reason, keep_files=True)
                stopped.append(move.key)
        return stopped

    def progress(self) -> list[Move]:
        return [m for m in self.moves.values() if m.active]

    async def wait_for_cleanups(self) -> None:
        """Wait until every background removal started so far has ended."""
        while self._cleanups:
            await asyncio.gather(*list(self._cleanups), return_exceptions=True)

    # ---- the move task ------------------------------------------------------------------------

    def _launch(self, move: Move) -> None:
        self.moves[move.key] = move
        move.source.on_truncate = lambda offset, move=move: self._source_truncated(move, offset)
        move.task = asyncio.get_running_loop().create_task(self._run(move), name=f"move {move.name}")

    @staticmethod
    def _source_truncated(move: Move, offset: int) -> None:
        move.truncated_from = offset if move.truncated_from is None else min(move.truncated_from, offset)

    async def _run(self, move: Move) -> None:
        assert self._slots is not None
        try:
            async with self._slots:
                self._check(move)
                move.state = MoveState.COPYING
                if move.future.resumed:
                    await self._adopt_existing_copy(move)
                await self._copy_until_caught_up(move)
                old_log = self._swap(move)
                await self._finish_swap(move, old_log)
        except asyncio.CancelledError:
            if move.active:  # the broker is stopping: the move resumes at the next start
                move.state = MoveState.CANCELLED
                move.error = "the broker stopped"
            raise
        except _Stop as stop:
            self._end(move, MoveState.FAILED if not stop.keep_files else MoveState.CANCELLED, str(stop),
                      keep_files=stop.keep_files)
        except _DirFailed as exc:
            self._end(move, MoveState.FAILED, f"log dir {exc.log_dir} failed: {exc.cause}", keep_files=True)
        except Exception as exc:  # a move must never die silently, nor take anything with it
            log.exception("the move of %s to %s failed", move.name, move.dest_dir)
            self._end(move, MoveState.FAILED, f"{type(exc).__name__}: {exc}", keep_files=False)
        finally:
            if move.source.on_truncate is not None and self.moves.get(move.key) in (move, None):
                move.source.on_truncate = None
            self._drop_lag_label(move.key)
            if self.moves.get(move.key) is move and not move.active:
                del self.moves[move.key]  # what is left to tell is in the log and in ``failures``
        if move.then is not None and move.key not in self.moves:
            self.move(move.topic, move.partition, move.then)

    def _check(self, move: Move) -> None:
        """Raise _Stop if the move can no longer go on (its source or future is gone)."""
        if not move.active:
            raise _Stop(move.error or "cancelled", keep_files=True)
        if self.log_manager.future_logs.get(move.key) is not move.future:
            raise _Stop("its copy was dropped", keep_files=True)
        if self.log_manager.logs.get(move.key) is not move.source or move.source.closed:
            raise _Stop(f"{move.name} is no longer served from {move.source_dir}", keep_files=True)

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking work in the pool; a cancellation waits for it to end first, so no
        thread still writes into a future dir once its move is over."""
        future = asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            await asyncio.wait([future])
            raise

    def _report(self, log_dir: str, cause: OSError) -> _DirFailed:
        """Route an OSError from a thread through the failure channel (as dir_io.guard would)."""
        log.error("log dir %s failed during a move: %s", log_dir, cause)
        self.failure_channel.report(log_dir, cause)
        return _DirFailed(log_dir, cause)

    async def _dest_io(self, move: Move, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await self._in_thread(fn, *args)
        except OSError as exc:
            raise self._report(move.dest_dir, exc) from exc

    async def _copy_io(self, move: Move, src_fd: int, fn: Callable[..., T], *args: Any) -> T:
        """A copy from the source into the future: an error is blamed on the dir that fails a
        one-byte read of the source, or else on the destination."""
        try:
            return await self._in_thread(fn, *args)
        except OSError as exc:
            destination_side = exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)
            if not destination_side and await self._in_thread(self._source_unreadable, src_fd):
                raise self._report(move.source_dir, exc) from exc
            raise self._report(move.dest_dir, exc) from exc

    @staticmethod
    def _source_unreadable(fd: int) -> bool:
        try:
            os.pread(fd, 1, 0)
        except OSError:
            return True
        return False

    def _source_fd(self, move: Move, segment: Segment) -> int | None:
        """A private fd of a source segment still in the log (None once retention took it)."""
        if move.source.closed or not any(s is segment for s in move.source.segments):
            return None
        slice_ = segment.slice(0, 0)
        fd, slice_.fd = slice_.fd, -1
        return fd

    async def _adopt_existing_copy(self, move: Move) -> None:
        """A move resumed at startup: keep what the files of its future dir already hold."""
        sizes = await self._dest_io(move, list_sizes, move.future.dir_path)
        by_base = {s.base_offset: s for s in move.source.segments}
        for name, size in sizes.items():
            stem, ext = os.path.splitext(name)
            if ext != LOG_SUFFIX or not stem.isdigit():
                continue
            base = int(stem)
            segment = by_base.get(base)
            keep = min(size, segment.size) if segment is not None else 0
            if keep and segment is not None:
                fd = self._source_fd(move, segment)
                try:
                    if fd is None or not await self._copy_io(move, fd, same_tail, fd, move.future_file(base), keep):
                        keep = 0
                finally:
                    if fd is not None:
                        os.close(fd)
            if segment is None:
                for suffix in SEGMENT_SUFFIXES:
                    await self._dest_io(move, remove_file, move.future_file(base, suffix))
                continue
            if keep != size:
                await self._dest_io(move, truncate_file, move.future_file(base), keep)
            move.copied[base] = keep
            move.unsynced.add(base)
        log.info("resuming the move of %s to %s with %d of %d bytes already copied", move.name, move.dest_dir,
                 sum(move.copied.values()), move.source.size_bytes)

    def _plan(self, move: Move) -> list[tuple[Segment, int, int, bool]]:
        """(segment, copied, size, sealed) for every source segment with bytes or index files
        left to copy; forgets copies of segments the source no longer has, re-copies from a
        truncation point."""
        segments = move.source.segments
        if move.truncated_from is not None:
            # Copies of the segment holding the cut and of later ones start again from 0.
            cut, move.truncated_from = move.truncated_from, None
            floor = max((s.base_offset for s in segments if s.base_offset <= cut), default=-1) if cut >= 0 else -1
            for base in list(move.copied):
                if floor < 0 or base >= floor:
                    move.copied[base] = 0
                    move.indexed.discard(base)
        bases = {s.base_offset for s in segments}
        for base in [b for b in move.copied if b not in bases]:
            del move.copied[base]
            move.indexed.discard(base)
            move.unsynced.discard(base)
            self._forget_file(move, base)
        work = []
        for i, segment in enumerate(segments):
            base = segment.base_offset
            sealed = i < len(segments) - 1
            copied = move.copied.setdefault(base, 0)
            if copied > segment.size:
                move.copied[base] = copied = 0
                move.indexed.discard(base)
            if copied < segment.size or (sealed and base not in move.indexed):
                work.append((segment, copied, segment.size, sealed))
        return work

    def _forget_file(self, move: Move, base: int) -> None:
        for suffix in SEGMENT_SUFFIXES:
            self._cleanup(move.dest_dir, remove_file, move.future_file(base, suffix))

    async def _copy_until_caught_up(self, move: Move) -> None:
        """Copy in rounds until the source is at most ``swap_delta_bytes`` ahead and everything
        copied is fsynced, so that the swap has little to copy and flush.

        Under appends as fast as the copy rounds, the source never gets that close: the
        allowance doubles every few rounds (up to 64 times), trading a longer wait of the
        appends at the swap for a move that ends."""
        rounds = 0
        while True:
            self._check(move)
            work = self._plan(move)
            pending = sum(end - start for _, start, end, _ in work)
            self._update_progress(move)
            allowance = self.swap_delta_bytes << min(rounds // 3, 6)
            rounds += 1
            if pending <= allowance:
                # The swap copies ``pending`` bytes and flushes the unsynced ones while appends
                # wait: go when that is small, flush first (appends flowing) when it is not.
                if pending + move.unsynced_bytes <= allowance and not move.syncs:
                    return
                await self._sync_all(move)
                continue
            shortfall = self._room_shortfall(move.dest_dir, pending)
            if shortfall is not None:
                raise _Stop(f"{move.dest_dir} is too full to take the rest: {shortfall}", keep_files=False)
            for segment, start, end, sealed in work:
                await self._copy_segment(move, segment, start, end, sealed)
                self._check(move)

    async def _copy_segment(self, move: Move, segment: Segment, start: int, end: int, sealed: bool) -> None:
        base = segment.base_offset
        fd = self._source_fd(move, segment)
        if fd is None:
            return
        try:
            position = start
            target = move.future_file(base)
            while position < end:
                self._check(move)
                if move.truncated_from is not None:
                    return
                count = min(self.throttle.chunk_bytes(), end - position)
                await self.throttle.acquire(count)
                self._check(move)
                done = await self._copy_io(move, fd, copy_range, fd, target, position, count)
                if done == 0:
                    break  # the source is shorter than planned: the next round sees why
                position += done
                move.copied[base] = position
                move.unsynced.add(base)
                move.unsynced_bytes += done
                move.bytes_copied += done
                MOVED_BYTES.inc(done)
                self._update_progress(move)
                if move.bytes_copied * 2 >= move.source.size_bytes:
                    hook_point("move.copied_half")
        finally:
            os.close(fd)
        if sealed and position >= segment.size and base not in move.indexed:
            if not any(s is segment for s in move.source.segments):
                return
            paths = [segment.offset_index.file.path, segment.time_index.file.path, segment.txn_index.path]
            copied = 0
            for source_path, suffix in zip(paths, (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX), strict=True):
                try:
                    copied += await self._in_thread(copy_file, source_path, move.future_file(base, suffix))
                except FileNotFoundError:
                    pass  # renamed by retention, or never written: loading rebuilds a missing index
                except OSError as exc:
                    raise self._report(move.dest_dir, exc) from exc
            move.bytes_copied += copied
            move.indexed.add(base)
            # fsync the finished segment while the next one copies
            files = [move.future_file(base, s) for s in SEGMENT_SUFFIXES]
            move.unsynced.discard(base)
            move.syncs.append(asyncio.ensure_future(self._dest_io(move, fsync_existing, files)))

    async def _sync_all(self, move: Move) -> None:
        files = [move.future_file(base) for base in move.unsynced]
        move.unsynced.clear()
        move.unsynced_bytes = 0
        syncs, move.syncs = move.syncs, []
        if files:
            syncs.append(asyncio.ensure_future(self._dest_io(move, fsync_existing, files)))
        results = await asyncio.gather(*syncs, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    # ---- the swap -----------------------------------------------------------------------------

    def _swap(self, move: Move) -> Log:
        """Copy the last bytes and commit the swap, without yielding: no append can slip in
        between.  Returns the old log (closed; its dir is retired by ``_finish_swap``)."""
        started = time.monotonic()
        source = move.source
        self._check(move)
        guard = self._dest_guard(move)
        try:
            with guard:
                for segment, start, end, _sealed in self._plan(move):
                    fd = self._source_fd(move, segment)
                    if fd is None:
                        raise _Stop("a segment vanished during the swap", keep_files=False)
                    try:
                        if end > start:
                            try:
                                done = copy_range(fd, move.future_file(segment.base_offset), start, end - start)
                            except OSError as exc:
                                if self._source_unreadable(fd):
                                    raise self._report(move.source_dir, exc) from exc
                                raise
                            if done != end - start:
                                raise _Stop("the source changed during the swap", keep_files=False)
                            move.bytes_copied += done
                            MOVED_BYTES.inc(done)
                    finally:
                        os.close(fd)
                    move.copied[segment.base_offset] = end
                    move.unsynced.add(segment.base_offset)
                for segment in source.segments:
                    if segment.size == 0:  # nothing was copied: create it, or empty a stale copy
                        open(move.future_file(segment.base_offset), "wb").close()
                # The record data must be durable before the decision; index files, the epoch
                # checkpoint and the producer snapshot need not be (recovery rebuilds them).
                fsync_paths([move.future_file(base) for base in move.unsynced])
                move.unsynced.clear()
                move.unsynced_bytes = 0
                # Index files of the active segment (and of any segment sealed since the last
                # round) are copied whole: they are small and only ever appended to. The aborted
                # transactions' index cannot be rebuilt from the records: it is made durable too.
                txn_indexes = []
                for segment in source.segments:
                    base = segment.base_offset
                    if base not in move.indexed or segment is source.segments[-1]:
                        for src, suffix in ((segment.offset_index.file.path, INDEX_SUFFIX),
                                            (segment.time_index.file.path, TIME_INDEX_SUFFIX),
                                            (segment.txn_index.path, TXN_INDEX_SUFFIX)):
                            if os.path.exists(src):
                                copy_file(src, move.future_file(base, suffix))
                                if suffix == TXN_INDEX_SUFFIX:
                                    txn_indexes.append(move.future_file(base, suffix))
                        if segment is not source.segments[-1]:
                            move.indexed.add(base)
                fsync_paths(txn_indexes)
                epochs = os.path.join(source.dir_path, LEADER_EPOCH_CHECKPOINT)
                if os.path.exists(epochs):
                    copy_file(epochs, os.path.join(move.future.dir_path, LEADER_EPOCH_CHECKPOINT))
                with open(os.path.join(move.future.dir_path, snapshot_file_name(source.log_end_offset)), "wb") as f:
                    f.write(source.producer_state.encode())
                for segment in source.segments:
                    size = os.stat(move.future_file(segment.base_offset)).st_size
                    if size != segment.size:
                        raise _Stop(f"the copy of segment {segment.base_offset} has {size} bytes, the source "
                                    f"{segment.size}", keep_files=False)
            hook_point("swap.future_complete")
            new_log, old_log = self.log_manager.commit_future_log(*move.key)
        except KafkaStorageError as exc:
            raise _DirFailed(exc.log_dir, exc.cause if isinstance(exc.cause, OSError)
                             else OSError(errno.EIO, str(exc))) from exc
        self.replica_manager.replace_log(move.topic, move.partition, new_log)
        move.state = MoveState.SWAPPING
        move.swap_ms = (time.monotonic() - started) * 1000
        move.source.on_truncate = None
        return old_log

    async def _finish_swap(self, move: Move, old_log: Log) -> None:
        """Retire the old dir and rename the copy, appends flowing meanwhile (a crash now is
        finished by the next startup, through the swap's marker)."""
        retired: str | None = None
        try:
            retired = self.log_manager.retire_moved_source(old_log, sync=False)
            await self._in_thread(fsync_dir_path, move.source_dir)
        except KafkaStorageError as exc:
            log.error("could not retire the old dir of %s in %s: %s", move.name, move.source_dir, exc)
            retired = None
        except OSError as exc:
            self._report(move.source_dir, exc)
            retired = None
        hook_point("swap.source_retired")
        try:
            self.log_manager.promote_future_log(move.topic, move.partition, sync=False)
            await self._in_thread(fsync_dir_path, move.dest_dir)
        except KafkaStorageError as exc:
            raise _DirFailed(exc.log_dir, exc.cause if isinstance(exc.cause, OSError)
                             else OSError(errno.EIO, str(exc))) from exc
        except OSError as exc:
            raise self._report(move.dest_dir, exc) from exc
        if retired is not None:
            self.log_manager.source_retired(move.topic, move.partition)
            self._cleanup(move.source_dir, shutil.rmtree, retired)
        move.state = MoveState.DONE
        elapsed = time.monotonic() - move.requested_at
        log.info("moved %s from %s to %s: %d bytes in %.1f s; appends waited %.1f ms for the swap",
                 move.name, move.source_dir, move.dest_dir, move.bytes_copied, elapsed, move.swap_ms or 0.0)

    def _dest_guard(self, move: Move) -> DirGuard:
        return DirGuard(move.dest_dir, self.failure_channel, move.name)

    # ---- endings ------------------------------------------------------------------------------

    def _cancel(self, move: Move, reason: str) -> None:
        log.info("cancelling the move of %s to %s: %s", move.name, move.dest_dir, reason)
        self._end(move, MoveState.CANCELLED, reason, keep_files=False)

    def _end(self, move: Move, state: MoveState, reason: str, *, keep_files: bool) -> None:
        """Finish a move that will not swap: stop its task, drop its future log (removing the
        files unless ``keep_files``), and record a failure."""
        if not move.active:
            return
        if move.state is MoveState.SWAPPING:  # the copy is the partition's log already: keep it
            keep_files = True
        move.state = state
        move.error = reason
        if move.task is not None and move.task is not asyncio.current_task():
            move.task.cancel()
        if self.log_manager.future_logs.get(move.key) is move.future:
            if keep_files:
                self.log_manager.forget_future_log(*move.key)
            else:
                try:
                    retired = self.log_manager.abandon_future_log(*move.key)
                except KafkaStorageError as exc:
                    log.error("could not remove the copy of %s in %s: %s", move.name, move.dest_dir, exc)
                    retired = None
                if retired is not None:
                    self._cleanup(retired[0], shutil.rmtree, retired[1])
        if move.source.on_truncate is not None:
            move.source.on_truncate = None
        if state is MoveState.FAILED:
            FAILED_MOVES.inc()
            self._record_failure(move.key, move.dest_dir, reason)
            log.error("the move of %s from %s to %s failed: %s; %s keeps serving it", move.name,
                      move.source_dir, move.dest_dir, reason, move.source_dir)

    def _record_failure(self, key: TopicPartition, dest_dir: str, reason: str) -> None:
        self.failures[key] = MoveFailure(dest_dir, reason, time.time())

    def _room_shortfall(self, dest_dir: str, needed: int) -> str | None:
        """Why ``dest_dir`` cannot take ``needed`` more bytes and keep log.dir.min.free.bytes
        free, or None."""
        floor = self.log_manager.min_free_bytes
        if floor <= 0:
            return None
        try:
            usable = self.log_manager.dir_usage(dest_dir).usable_bytes
        except KafkaStorageError as exc:
            return str(exc)
        if usable - needed < floor:
            return (f"{usable} bytes usable, {needed} needed, and log.dir.min.free.bytes={floor} "
                    f"must stay free")
        return None

    def _cleanup(self, log_dir: str, fn: Callable[[str], Any], path: str) -> None:
        """Remove files in the background; an OSError is reported like any I/O error of ``log_dir``."""
        if self._executor is None:
            return

        async def run() -> None:
            if self.failure_channel.is_offline(log_dir):
                return
            try:
                await self._in_thread(fn, path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                self._report(log_dir, exc)

        task = asyncio.ensure_future(run())
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    # ---- progress and metrics -------------------------------------------------------------------

    def _update_progress(self, move: Move) -> None:
        """Size and log end of the copy as DescribeLogDirs reports them."""
        future = move.future
        future.size_bytes = sum(move.copied.values())
        end = move.source.log_start_offset
        segments = move.source.segments
        for i, segment in enumerate(segments):
            copied = move.copied.get(segment.base_offset, 0)
            if copied < segment.size:
                # Inside a segment being copied the copy holds every batch that ends below the
                # bytes copied: the lag falls as a large (active) segment copies, not at its end.
                try:
                    boundary = segment.boundary_at_or_below(copied)
                    if boundary > 0:
                        end = max(end, segment.header_at(boundary).base_offset if boundary < segment.size
                                  else segment.next_offset)
                except KafkaStorageError:
                    pass  # the source dir failed: the move itself stops on that
                break
            end = segments[i + 1].base_offset if i + 1 < len(segments) else move.source.log_end_offset
        future.log_end_offset = end
        lag = max(0, move.source.log_end_offset - end)
        FUTURE_REPLICA_LAG.labels(move.topic, str(move.partition)).set(lag)
        self._lag_labels.add(move.key)

    def _drop_lag_label(self, key: TopicPartition) -> None:
        if key in self._lag_labels:
            self._lag_labels.discard(key)
            try:
                FUTURE_REPLICA_LAG.remove(key[0], str(key[1]))
            except KeyError:
                pass

    def _max_lag(self) -> int:
        lags = [m.source.log_end_offset - m.future.log_end_offset for m in list(self.moves.values()) if m.active]
        return max(lags, default=0)

    def refresh_dir_metrics(self) -> None:
        for log_dir in self.log_manager.log_dirs:
            LOG_DIR_BYTES.labels(log_dir).set(self.log_manager.placed_bytes(log_dir))
            total = usable = -1
            if log_dir in self.log_manager.live_dirs:
                try:
                    usage = self.log_manager.dir_usage(log_dir)
                    total, usable = usage.total_bytes, usage.usable_bytes
                except KafkaStorageError:
                    pass
            LOG_DIR_TOTAL_BYTES.labels(log_dir).set(total)
            LOG_DIR_USABLE_BYTES.labels(log_dir).set(usable)

    async def _refresh_metrics_periodically(self) -> None:
        while True:
            try:
                self.refresh_dir_metrics()
            except Exception:
                log.exception("refreshing the log dir metrics failed")
            await asyncio.sleep(METRICS_REFRESH_S)


