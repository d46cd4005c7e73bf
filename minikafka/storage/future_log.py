"""A move's copy of a partition's log into another log dir of this broker (KIP-113): the future
log, and the files it is made of.

A move copies a partition's current log into ``<topic>-<partition>.<uuid>-future`` in the
destination dir, file to file: sealed segments whole (``.log`` with os.copy_file_range, or
os.sendfile where the kernel refuses it, then ``.index``, ``.timeindex`` and ``.txnindex``), the
active segment by byte ranges until the copy has caught up.  Record data never passes through
Python memory, and the future log has exactly the source's segments (same base offsets, same
bytes).  Then ``FutureLogCopy.complete`` copies the last few bytes, the index files of the
active segment, the leader-epoch checkpoint and a producer snapshot, fsyncs what must be
durable and checks the sizes, and LogManager swaps the future log in (crash-safe through its
marker file, see log_manager.py).

This module alone knows what a copy is made of; replica/log_dir_mover.py decides when and how
fast to copy (its threads, the Throttle, the rounds, progress and metrics) through it.  The
functions under "blocking work" take plain fds, paths and offsets, return counts or raise
OSError, and run in the mover's threads; everything else runs on the event loop.
"""

from __future__ import annotations

import errno
import logging
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from minikafka.storage.checkpoints import LEADER_EPOCH_CHECKPOINT
from minikafka.storage.dir_io import DirGuard
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import Log, partition_dir_name
from minikafka.storage.producer_state import snapshot_file_name
from minikafka.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    Segment,
    segment_name,
)
from minikafka.storage.txn_index import TXN_INDEX_SUFFIX

log = logging.getLogger(__name__)

# Bytes compared at the end of each file a resumed move finds, to check that it is a prefix of
# the source (a crash cannot leave anything else, but a source cut back at recovery can).
RESUME_CHECK_BYTES = 64 << 10

# (segment, bytes of its .log copied, bytes to copy up to, sealed) of one source segment.
CopyStep = tuple[Segment, int, int, bool]


@dataclass(eq=False)
class FutureLog:
    """The destination of a move between log dirs: ``<topic>-<partition>.<uuid>-future``.

    Registered in ``LogManager.future_logs`` from its creation (or from a startup that found
    it, to resume the move) until it replaces the current log or is dropped.  Only its
    FutureLogCopy writes its files (through the LogDirMover's copy threads) and sets
    ``size_bytes`` and ``log_end_offset`` (on the event loop) as the copy progresses; the
    LogManager creates, registers, drops and swaps it, on the event loop.
    """

    topic: str
    partition: int
    topic_id: uuid.UUID
    log_dir: str
    dir_path: str
    size_bytes: int = 0
    log_end_offset: int = 0
    resumed: bool = False  # found at startup: its files hold an earlier run's copy

    @property
    def name(self) -> str:
        return partition_dir_name(self.topic, self.partition)


class CopyDiverged(Exception):
    """The copy is not a byte image of the source and cannot be made one where it is (the
    source changed under the swap): the move must drop it."""


class SourceReadError(Exception):
    """A read of the source log failed (not a write of the copy): its dir is at fault."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
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


def copy_files(pairs: list[tuple[str, str]]) -> int:
    """Copy each (source, destination) whose source exists; returns the bytes copied.  A
    segment's index file may be gone (renamed by retention) or never written (an index with no
    entries has no file): the copy's goes too, lest an earlier round's copy of it outlive a
    truncation of the source; a missing index reads as empty, or is rebuilt where it cannot be."""
    copied = 0
    for source_path, dest_path in pairs:
        try:
            copied += copy_file(source_path, dest_path)
        except FileNotFoundError:
            remove_file(dest_path)
    return copied


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


def source_unreadable(fd: int) -> bool:
    """Whether a one-byte read of a source file fails (then its dir, not the copy's, is at
    fault for a copy that failed)."""
    try:
        os.pread(fd, 1, 0)
    except OSError:
        return True
    return False


# ---- one copy ---------------------------------------------------------------------------


class FutureLogCopy:
    """The copy of one partition's current log (``source``) into its FutureLog.

    Owns what the copy knows of itself: how many bytes of each segment's ``.log`` it holds,
    which sealed segments have their index files, which segments hold bytes not fsynced yet,
    and the offset the source was truncated to since the last plan; and the names of every
    file of the copy.  Made by the LogDirMover for one move and touched only on the event loop
    by that move's task (and by the source Log's ``on_truncate``); the mover's threads get file
    names and fds from it, never the object.  An OSError in ``complete`` surfaces as a
    KafkaStorageError of the destination dir, reported to the LogDirFailureChannel.
    """

    def __init__(self, future: FutureLog, source: Log, failure_channel: LogDirFailureChannel) -> None:
        self.future = future
        self.source = source
        self._dest_guard = DirGuard(future.log_dir, failure_channel, future.name)
        self.copied: dict[int, int] = {}  # segment base -> bytes of .log copied
        self.indexed: set[int] = set()  # sealed segments with index files copied
        self.unsynced: set[int] = set()  # segments with bytes not fsynced yet
        self.unsynced_bytes = 0
        self.truncated_from: int | None = None  # set when the source was truncated (re-copy from there)

    # ---- file names ---------------------------------------------------------------------------

    def _file(self, base: int, suffix: str) -> str:
        return os.path.join(self.future.dir_path, segment_name(base) + suffix)

    def log_file(self, base: int) -> str:
        """The copy's ``.log`` of the segment at ``base``."""
        return self._file(base, LOG_SUFFIX)

    def segment_files(self, base: int) -> list[str]:
        """Every file of the copy's segment at ``base``."""
        return [self._file(base, suffix) for suffix in SEGMENT_SUFFIXES]

    # ---- the source ---------------------------------------------------------------------------

    def source_truncated(self, offset: int) -> None:
        """The source was cut back to ``offset`` (-1: emptied): the next plan copies again from there."""
        self.truncated_from = offset if self.truncated_from is None else min(self.truncated_from, offset)

    def in_source(self, segment: Segment) -> bool:
        return any(s is segment for s in self.source.segments)

    def source_fd(self, segment: Segment) -> int | None:
        """A private fd of a source segment still in the log (None once retention took it);
        the caller closes it."""
        if self.source.closed or not self.in_source(segment):
            return None
        slice_ = segment.slice(0, 0)
        fd, slice_.fd = slice_.fd, -1
        return fd

    # ---- resuming -----------------------------------------------------------------------------

    def found_segments(self, sizes: dict[str, int]) -> Iterator[tuple[int, int, Segment | None]]:
        """(base, size, source segment or None) of each segment ``.log`` among the files of a
        resumed copy (``sizes``: file name -> size, as ``list_sizes`` gives them)."""
        by_base = {s.base_offset: s for s in self.source.segments}
        for name, size in sizes.items():
            stem, ext = os.path.splitext(name)
            if ext != LOG_SUFFIX or not stem.isdigit():
                continue
            base = int(stem)
            yield base, size, by_base.get(base)

    def adopted(self, base: int, size: int) -> None:
        """The copy's segment at ``base`` holds the source's first ``size`` bytes (not fsynced)."""
        self.copied[base] = size
        self.unsynced.add(base)

    # ---- copying ------------------------------------------------------------------------------

    def plan(self, discard: Callable[[str], None]) -> list[CopyStep]:
        """A CopyStep for every source segment with bytes or index files left to copy; forgets
        copies of segments the source no longer has (``discard`` removes each of their files),
        re-copies from a truncation point."""
        segments = self.source.segments
        if self.truncated_from is not None:
            # Copies of the segment holding the cut and of later ones start again from 0.
            cut, self.truncated_from = self.truncated_from, None
            floor = max((s.base_offset for s in segments if s.base_offset <= cut), default=-1) if cut >= 0 else -1
            for base in list(self.copied):
                if floor < 0 or base >= floor:
                    self.copied[base] = 0
                    self.indexed.discard(base)
        bases = {s.base_offset for s in segments}
        for base in [b for b in self.copied if b not in bases]:
            del self.copied[base]
            self.indexed.discard(base)
            self.unsynced.discard(base)
            for path in self.segment_files(base):
                discard(path)
        work = []
        for i, segment in enumerate(segments):
            base = segment.base_offset
            sealed = i < len(segments) - 1
            copied = self.copied.setdefault(base, 0)
            if copied > segment.size:
                self.copied[base] = copied = 0
                self.indexed.discard(base)
            if copied < segment.size or (sealed and base not in self.indexed):
                work.append((segment, copied, segment.size, sealed))
        return work

    def chunk_copied(self, base: int, position: int, nbytes: int) -> None:
        """``nbytes`` more of the segment at ``base`` were copied, up to ``position``."""
        self.copied[base] = position
        self.unsynced.add(base)
        self.unsynced_bytes += nbytes

    def lacks_index_files(self, segment: Segment) -> bool:
        """Whether a sealed source segment (still in the log) has no index files in the copy."""
        return segment.base_offset not in self.indexed and self.in_source(segment)

    @staticmethod
    def _index_sources(segment: Segment) -> list[tuple[str, str]]:
        """(path, suffix) of each index file of a source segment."""
        return [(segment.offset_index.file.path, INDEX_SUFFIX), (segment.time_index.file.path, TIME_INDEX_SUFFIX),
                (segment.txn_index.path, TXN_INDEX_SUFFIX)]

    def index_files(self, segment: Segment) -> list[tuple[str, str]]:
        """(source, copy) of each index file of ``segment``, for ``copy_files``."""
        return [(src, self._file(segment.base_offset, suffix)) for src, suffix in self._index_sources(segment)]

    def sealed_segment_copied(self, base: int) -> list[str]:
        """The segment at ``base`` is whole in the copy, index files included: returns its files,
        to fsync (the copy no longer counts them as unsynced)."""
        self.indexed.add(base)
        self.unsynced.discard(base)
        return self.segment_files(base)

    def take_unsynced(self) -> list[str]:
        """The ``.log`` files with bytes not fsynced yet, to fsync now (no longer counted)."""
        files = [self.log_file(base) for base in self.unsynced]
        self.unsynced.clear()
        self.unsynced_bytes = 0
        return files

    # ---- progress -----------------------------------------------------------------------------

    def update_progress(self) -> int:
        """Set the future log's size and log end as DescribeLogDirs reports them; returns how
        many offsets the copy is behind the source."""
        future = self.future
        future.size_bytes = sum(self.copied.values())
        end = self.source.log_start_offset
        segments = self.source.segments
        for i, segment in enumerate(segments):
            copied = self.copied.get(segment.base_offset, 0)
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
            end = segments[i + 1].base_offset if i + 1 < len(segments) else self.source.log_end_offset
        future.log_end_offset = end
        return max(0, self.source.log_end_offset - end)

    # ---- the end of the copy ------------------------------------------------------------------

    def complete(self, discard: Callable[[str], None], counted: Callable[[int], None]) -> None:
        """Make the future dir a durable, complete image of the source, blocking and without
        yielding (the caller lets no append in between, and swaps it in next): copy the last
        bytes (``counted`` is told each count), the index files not copied yet, the
        leader-epoch checkpoint and a producer snapshot at the log end.

        Raises CopyDiverged when the source changed under it, SourceReadError when reading
        the source failed, KafkaStorageError when the destination failed (reported).
        """
        source = self.source
        with self._dest_guard:
            for segment, start, end, _sealed in self.plan(discard):
                fd = self.source_fd(segment)
                if fd is None:
                    raise CopyDiverged("a segment vanished during the swap")
                try:
                    if end > start:
                        try:
                            done = copy_range(fd, self.log_file(segment.base_offset), start, end - start)
                        except OSError as exc:
                            if source_unreadable(fd):
                                raise SourceReadError(exc) from exc
                            raise
                        if done != end - start:
                            raise CopyDiverged("the source changed during the swap")
                        counted(done)
                finally:
                    os.close(fd)
                self.copied[segment.base_offset] = end
                self.unsynced.add(segment.base_offset)
            for segment in source.segments:
                if segment.size == 0:  # nothing was copied: create it, or empty a stale copy
                    open(self.log_file(segment.base_offset), "wb").close()
            # The record data must be durable before the decision; index files, the epoch
            # checkpoint and the producer snapshot need not be (recovery rebuilds them).
            fsync_paths(self.take_unsynced())
            # Index files of the active segment (and of any segment sealed since the last
            # round) are copied whole: they are small and only ever appended to. The aborted
            # transactions' index cannot be rebuilt from the records: it is made durable too.
            txn_indexes = []
            for segment in source.segments:
                base = segment.base_offset
                if base not in self.indexed or segment is source.segments[-1]:
                    for src, suffix in self._index_sources(segment):
                        if os.path.exists(src):
                            copy_file(src, self._file(base, suffix))
                            if suffix == TXN_INDEX_SUFFIX:
                                txn_indexes.append(self._file(base, suffix))
                        else:  # no entries, no file: nor in the copy
                            remove_file(self._file(base, suffix))
                    if segment is not source.segments[-1]:
                        self.indexed.add(base)
            fsync_paths(txn_indexes)
            epochs = os.path.join(source.dir_path, LEADER_EPOCH_CHECKPOINT)
            if os.path.exists(epochs):
                copy_file(epochs, os.path.join(self.future.dir_path, LEADER_EPOCH_CHECKPOINT))
            with open(os.path.join(self.future.dir_path, snapshot_file_name(source.log_end_offset)), "wb") as f:
                f.write(source.producer_state.encode())
            for segment in source.segments:
                size = os.stat(self.log_file(segment.base_offset)).st_size
                if size != segment.size:
                    raise CopyDiverged(f"the copy of segment {segment.base_offset} has {size} bytes, the source "
                                       f"{segment.size}")
