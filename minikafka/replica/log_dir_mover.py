"""Moves of replicas between the log dirs of this broker (KIP-113): when to copy, how fast, and
what to tell of it.

A move copies a partition's current log into its future log in the destination dir (what is
copied, file by file, and how, is storage/future_log.py's FutureLogCopy), in rounds until the
copy has caught up.  Then, without yielding the event loop, the copy is completed and
LogManager swaps the future log in (crash-safe through its marker file).  Appends wait for that
instant only: a produce request is never refused because of a move.

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
import functools
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
from minikafka.storage.checkpoints import fsync_dir_path
from minikafka.storage.crash_points import hook_point
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.future_log import (
    CopyDiverged,
    CopyStep,
    FutureLog,
    FutureLogCopy,
    SourceReadError,
    copy_files,
    copy_range,
    fsync_existing,
    list_sizes,
    remove_file,
    same_tail,
    source_unreadable,
    truncate_file,
)
from minikafka.storage.log import Log
from minikafka.storage.log_manager import LogManager
from minikafka.storage.throttle import UNLIMITED_RATE, Throttle
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
T = TypeVar("T")

# The swap copies at most this much while appends wait; a move copies in rounds until the
# source is within this distance of the copy.
SWAP_DELTA_BYTES = 1 << 20
# A long copy into one file starts an fsync of it every this many bytes (one at a time).
WRITEBACK_EVERY_BYTES = 64 << 20
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


# ---- one move ---------------------------------------------------------------------------


@dataclass(eq=False)
class Move:
    """One partition's move: where from and to, its copy, how it ended.

    Owned by the LogDirMover and touched only on the event loop; the copy threads see plain
    values derived from it.
    """

    topic: str
    partition: int
    source_dir: str
    dest_dir: str
    copy: FutureLogCopy
    state: MoveState = MoveState.WAITING
    requested_at: float = field(default_factory=time.monotonic)
    bytes_copied: int = 0  # by this run, index files included
    error: str | None = None
    swap_ms: float | None = None
    task: asyncio.Task[None] | None = None
    syncs: list[asyncio.Future[None]] = field(default_factory=list)
    # The fsync started in the middle of a long copy, if one is under way (``_copy_segment``).
    writeback: asyncio.Future[None] | None = None
    then: str | None = None  # a move asked while this one was swapping: started when it ends

    @property
    def key(self) -> TopicPartition:
        return self.topic, self.partition

    @property
    def name(self) -> str:
        return self.copy.future.name

    @property
    def future(self) -> FutureLog:
        return self.copy.future

    @property
    def source(self) -> Log:
        return self.copy.source

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
            self._launch(Move(key[0], key[1], source.log_dir, future.log_dir,
                              FutureLogCopy(future, source, self.failure_channel)))
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
        self._launch(Move(topic, partition, current.log_dir, dest_dir,
                          FutureLogCopy(future, current, self.failure_channel)))
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
        move.source.on_truncate = move.copy.source_truncated
        move.task = asyncio.get_running_loop().create_task(self._run(move), name=f"move {move.name}")

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
            if not destination_side and await self._in_thread(source_unreadable, src_fd):
                raise self._report(move.source_dir, exc) from exc
            raise self._report(move.dest_dir, exc) from exc

    async def _adopt_existing_copy(self, move: Move) -> None:
        """A move resumed at startup: keep what the files of its future dir already hold."""
        copy = move.copy
        sizes = await self._dest_io(move, list_sizes, move.future.dir_path)
        for base, size, segment in copy.found_segments(sizes):
            keep = min(size, segment.size) if segment is not None else 0
            if keep and segment is not None:
                fd = copy.source_fd(segment)
                try:
                    if fd is None or not await self._copy_io(move, fd, same_tail, fd, copy.log_file(base), keep):
                        keep = 0
                finally:
                    if fd is not None:
                        os.close(fd)
            if segment is None:
                for path in copy.segment_files(base):
                    await self._dest_io(move, remove_file, path)
                continue
            if keep != size:
                await self._dest_io(move, truncate_file, copy.log_file(base), keep)
            copy.adopted(base, keep)
        log.info("resuming the move of %s to %s with %d of %d bytes already copied", move.name, move.dest_dir,
                 sum(copy.copied.values()), move.source.size_bytes)

    def _plan(self, move: Move) -> list[CopyStep]:
        """What is left to copy; the files of segments the source no longer has are removed in
        the background."""
        return move.copy.plan(functools.partial(self._cleanup, move.dest_dir, remove_file))

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
                if pending + move.copy.unsynced_bytes <= allowance and not move.syncs:
                    return
                await self._sync_all(move)
                continue
            shortfall = self._room_shortfall(move.dest_dir, pending)
            if shortfall is not None:
                raise _Stop(f"{move.dest_dir} is too full to take the rest: {shortfall}", keep_files=False)
            for step in work:
                await self._copy_segment(move, step)
                self._check(move)

    async def _copy_segment(self, move: Move, step: CopyStep) -> None:
        copy = move.copy
        segment, start, end, sealed = step
        base = segment.base_offset
        fd = copy.source_fd(segment)
        if fd is None:
            return
        try:
            position = start
            target = copy.log_file(base)
            since_writeback = 0
            while position < end:
                self._check(move)
                if copy.truncated_from is not None:
                    return
                count = min(self.throttle.chunk_bytes(), end - position)
                await self.throttle.acquire(count)
                self._check(move)
                done = await self._copy_io(move, fd, copy_range, fd, target, position, count)
                if done == 0:
                    break  # the source is shorter than planned: the next round sees why
                position += done
                copy.chunk_copied(base, position, done)
                move.bytes_copied += done
                MOVED_BYTES.inc(done)
                since_writeback += done
                if since_writeback >= WRITEBACK_EVERY_BYTES and (move.writeback is None or move.writeback.done()):
                    # A segment copied whole in one go (a large active segment, most of all) is
                    # written back while it copies, not all at the end: its final fsync waited
                    # for the disk to take the whole of it (a 1 GiB active segment moved at 0.6
                    # of Kafka's speed, which does not fsync a moved log).
                    move.writeback = asyncio.ensure_future(self._dest_io(move, fsync_existing, [target]))
                    move.syncs.append(move.writeback)
                    since_writeback = 0
                self._update_progress(move)
                if move.bytes_copied * 2 >= move.source.size_bytes:
                    hook_point("move.copied_half")
        finally:
            os.close(fd)
        if sealed and position >= segment.size and copy.lacks_index_files(segment):
            move.bytes_copied += await self._dest_io(move, copy_files, copy.index_files(segment))
            # fsync the finished segment while the next one copies
            files = copy.sealed_segment_copied(base)
            move.syncs.append(asyncio.ensure_future(self._dest_io(move, fsync_existing, files)))

    async def _sync_all(self, move: Move) -> None:
        files = move.copy.take_unsynced()
        syncs, move.syncs = move.syncs, []
        if files:
            syncs.append(asyncio.ensure_future(self._dest_io(move, fsync_existing, files)))
        results = await asyncio.gather(*syncs, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    # ---- the swap -----------------------------------------------------------------------------

    def _swap(self, move: Move) -> Log:
        """Complete the copy and commit the swap, without yielding: no append can slip in
        between.  Returns the old log (closed; its dir is retired by ``_finish_swap``)."""
        started = time.monotonic()
        self._check(move)
        try:
            try:
                move.copy.complete(functools.partial(self._cleanup, move.dest_dir, remove_file),
                                   functools.partial(self._count_copied, move))
            except SourceReadError as exc:
                raise self._report(move.source_dir, exc.cause) from exc
            except CopyDiverged as exc:
                raise _Stop(str(exc), keep_files=False) from exc
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

    @staticmethod
    def _count_copied(move: Move, nbytes: int) -> None:
        move.bytes_copied += nbytes
        MOVED_BYTES.inc(nbytes)

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
        """Size and log end of the copy as DescribeLogDirs reports them, and its lag metric."""
        lag = move.copy.update_progress()
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


