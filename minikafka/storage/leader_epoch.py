"""Leader-epoch cache of one partition, persisted as ``leader-epoch-checkpoint``.

A new epoch is fsynced before ``assign`` returns: records of that epoch follow, and once the
recovery point passes them a restart no longer reads their batches to learn it. A truncation's
rewrite is fsynced later, off the event loop, as Kafka's is (KAFKA-15046): until then a crash
leaves the older, longer list, and loading the log cuts it back to the log's start and end
again, so losing the rewrite loses nothing.
"""

from __future__ import annotations

import os

from minikafka.storage.background_io import INLINE_IO, BackgroundIo
from minikafka.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    CorruptCheckpointError,
    read_epoch_checkpoint,
    write_epoch_checkpoint,
)
from minikafka.storage.dir_io import DirGuard
from minikafka.storage.segment import close_fds, sync_and_close_fds

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Owns the (epoch, start offset) list of one partition and its checkpoint file.

    Entries are increasing in both epoch and start offset.  Only its Log touches it; every
    change is written through to the file (and fsynced, unless ``synced`` is off: its Log was
    created among many, whose creator fsyncs them all at once) before the call returns.
    """

    def __init__(self, dir_path: str, guard: DirGuard, background: BackgroundIo = INLINE_IO,
                 entries: list[tuple[int, int]] | None = None) -> None:
        """``entries``: what the file holds, known to the caller (a log made just now), not read."""
        self.path = os.path.join(dir_path, LEADER_EPOCH_CHECKPOINT)
        self.guard = guard
        self.background = background
        self.synced = True
        # Set by a Log made just now (its dir is new): the first write creates the file in place,
        # without a temporary file and a rename (issue 34: a new replica's file creations).
        self.absent = False
        if entries is not None:
            self.entries = entries
            return
        try:
            self.entries = read_epoch_checkpoint(self.path, guard)
        except CorruptCheckpointError:
            # Losing the cache only costs followers a coarser truncation point.
            self.entries = []

    def set_dir(self, dir_path: str) -> None:
        self.path = os.path.join(dir_path, LEADER_EPOCH_CHECKPOINT)

    def _persist(self) -> None:
        self._write(self.synced)

    def _write(self, sync: bool) -> None:
        write_epoch_checkpoint(self.path, self.entries, self.guard, sync, new_file=self.absent)
        self.absent = False

    def _persist_sync_later(self) -> None:
        """Write the checkpoint now and fsync it (and its dir, for the rename) in the background."""
        self._write(sync=False)
        if not self.synced:  # its creator fsyncs it with the rest
            return
        fds: list[int] = []
        try:
            with self.guard:  # by fd: the partition's dir may be renamed (moved, deleted) meanwhile
                fds.append(os.open(self.path, os.O_RDONLY))
                fds.append(os.open(os.path.dirname(self.path), os.O_RDONLY | os.O_DIRECTORY))
        except BaseException:
            close_fds(fds)
            raise
        self.background.submit(self.guard, lambda: sync_and_close_fds(fds))

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``; a no-op unless it is news.

        An entry that contradicts the new one (an epoch >= it, or a start offset >= it)
        belongs to a divergent history and is dropped.
        """
        if epoch < 0:
            return
        if self.entries and self.entries[-1][0] == epoch and self.entries[-1][1] <= start_offset:
            return
        if self.entries and self.entries[-1][0] > epoch and self.entries[-1][1] <= start_offset:
            # An older epoch never follows a newer one at a later offset; ignore stale stamps.
            return
        kept = [(e, o) for e, o in self.entries if e < epoch and o < start_offset]
        kept.append((epoch, start_offset))
        self.entries = kept
        self._persist()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch answer: (epoch, end offset) for ``requested_epoch``.

        The end offset is the start offset of the first epoch above the requested one (the
        log end offset if the requested epoch is the latest); the epoch returned is the
        largest known epoch <= the requested one.  (-1, -1) if the epoch is unknown/too new.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self.entries[-1][0] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = next(((e, o) for e, o in self.entries if e > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = None
        for e, o in self.entries:
            if e <= requested_epoch:
                floor = (e, o)
        if floor is None:
            return requested_epoch, higher[1]
        return floor[0], higher[1]

    def epoch_for_offset(self, offset: int) -> int | None:
        epoch = None
        for e, o in self.entries:
            if o <= offset:
                epoch = e
        return epoch

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs starting at or after ``end_offset`` (the log was cut back to it)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            # With none left the file is not rewritten: each entry it holds starts at or past
            # the log end, so loading the log cuts them again, and the first append assigns an
            # epoch to the empty list, which writes the file. (A broker of 3,000 empty
            # partitions rewrote and fsynced every one of their files at each restart.)
            if kept:
                self._persist_sync_later()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs wholly before ``start_offset``; the one spanning it now starts there."""
        before = [(e, o) for e, o in self.entries if o <= start_offset]
        if not before or (len(before) == 1 and before[0][1] == start_offset):
            return
        epoch = before[-1][0]
        self.entries = [(epoch, start_offset)] + [(e, o) for e, o in self.entries if o > start_offset]
        self._persist_sync_later()
