"""Idempotent-producer state of one partition and its ``<offset>.snapshot`` files.

A snapshot uses Kafka's producer-snapshot layout, version 1 (all big-endian), open transactions
included (a restart that replays the log from a snapshot knows where they began):
version int16, crc uint32 (CRC32C of everything after it), then an int32-counted array of
entries (producer_id int64, epoch int16, last_sequence int32, last_offset int64,
offset_delta int32, timestamp int64, coordinator_epoch int32, current_txn_first_offset
int64).  Kafka keeps one entry per producer; we write one entry per cached batch, oldest
first, so Kafka (which keeps the last entry it reads for a producer id) still loads the
newest batch while we get all five back.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections import deque
from dataclasses import dataclass, field

from crc32c import crc32c

from minikafka.storage.checkpoints import write_atomically
from minikafka.storage.dir_io import DirGuard
from minikafka.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from protocol.record_codec import ControlMarker
from protocol.records import INT32_MAX, NO_SEQUENCE, BatchHeader

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
CACHED_BATCHES_PER_PRODUCER = 5
NO_PRODUCER_EPOCH = -1

_PREFIX = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")


class CorruptSnapshotError(ValueError):
    pass


@dataclass(slots=True, frozen=True)
class BatchMetadata:
    """Sequence and offset range of one stored batch of an idempotent producer."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    """One producer id's current epoch, its last few batches and its transaction in this
    partition (the first offset it wrote, until a marker ends it); owned by ProducerStateManager."""

    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES_PER_PRODUCER))
    last_timestamp: int = -1
    current_txn_first_offset: int = -1
    coordinator_epoch: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker (at ``last_offset``) ended in this partition."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """Owns the per-producer-id state of one partition and that partition's snapshot files.

    Only its Log touches it (event-loop thread).  ``check`` validates a whole append without
    changing anything; ``record`` applies batches once they are safely in the segment.
    """

    def __init__(self, dir_path: str, guard: DirGuard) -> None:
        self.dir_path = dir_path
        self.guard = guard
        self.producers: dict[int, ProducerEntry] = {}

    def last_offsets(self) -> dict[int, int]:
        """{producer id: last offset of its newest batch}: a log cleaner keeps that batch (empty
        if need be), so the producer's sequence survives a restart's replay of the log."""
        return {pid: entry.batches[-1].last_offset for pid, entry in self.producers.items() if entry.batches}

    # ---- validation and update -----------------------------------------------------------

    def check(self, headers: list[BatchHeader], sequences: bool = True) -> BatchMetadata | None:
        """Validate producer epochs and sequences of an append (in order, as if applied).
        ``sequences`` False: a coordinator's own write (a transactional offset commit, which has
        no sequence), whose epoch alone is checked, as Kafka's coordinator-origin appends.

        Returns the original metadata if the append is a retry of a cached batch; raises
        InvalidProducerEpochError or OutOfOrderSequenceError; otherwise None.
        """
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last seq) so far
        for header in headers:
            pid = header.producer_id
            if pid < 0:
                continue
            entry = self.producers.get(pid)
            epoch, first_seq = header.producer_epoch, header.base_sequence
            if pid in pending:
                current_epoch, last_seq = pending[pid]
            elif entry is not None:
                duplicate = entry.find_duplicate(epoch, first_seq, header.last_sequence)
                if duplicate is not None:
                    return duplicate
                current_epoch, last_seq = entry.epoch, entry.last_seq
            else:
                current_epoch, last_seq = NO_PRODUCER_EPOCH, NO_SEQUENCE
            if current_epoch != NO_PRODUCER_EPOCH:
                if epoch < current_epoch:
                    raise InvalidProducerEpochError(
                        f"producer {pid} wrote with epoch {epoch}, older than current epoch {current_epoch}"
                    )
                if not sequences:
                    pass  # the epoch alone counts
                elif epoch > current_epoch:
                    if first_seq != 0:
                        raise OutOfOrderSequenceError(
                            f"producer {pid} started epoch {epoch} at sequence {first_seq}, not 0"
                        )
                elif last_seq != NO_SEQUENCE and not _in_sequence(last_seq, first_seq):
                    raise OutOfOrderSequenceError(
                        f"producer {pid} sent sequence {first_seq} after {last_seq} (epoch {epoch})"
                    )
            pending[pid] = (epoch, header.last_sequence)
        return None

    def record(self, header: BatchHeader, marker: ControlMarker | None = None) -> CompletedTxn | None:
        """Apply one stored batch (offsets final) to the state; no checks. A transactional batch
        opens its producer's transaction here, ``marker`` (the batch is a transaction marker)
        ends it: the transaction it ended is returned."""
        pid = header.producer_id
        if pid < 0:
            return None
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, header.producer_epoch)
        elif header.producer_epoch != entry.epoch:
            if header.producer_epoch < entry.epoch:
                return None
            # A coordinator fencing a producer ends its transaction with a bumped epoch.
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = header.max_timestamp
        if header.is_control:
            if marker is None:
                return None
            first = entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else header.base_offset
            entry.current_txn_first_offset = -1
            entry.coordinator_epoch = marker.coordinator_epoch
            return CompletedTxn(pid, first, header.last_offset, marker.aborted)
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = header.base_offset
        if header.base_sequence == NO_SEQUENCE:
            return None
        entry.batches.append(
            BatchMetadata(
                header.base_sequence, header.last_sequence, header.base_offset, header.last_offset,
                header.max_timestamp,
            )
        )
        return None

    def ongoing_txn_first_offsets(self) -> dict[int, int]:
        """{producer id: first offset} of the transactions open in this partition."""
        return {pid: e.current_txn_first_offset for pid, e in self.producers.items() if e.current_txn_first_offset >= 0}

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (None: none is open)."""
        return min(self.ongoing_txn_first_offsets().values(), default=None)

    def clear(self) -> None:
        self.producers.clear()

    # ---- snapshots ---------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        with self.guard:
            names = os.listdir(self.dir_path)
        offsets = []
        for name in names:
            if name.endswith(SNAPSHOT_SUFFIX) and name[: -len(SNAPSHOT_SUFFIX)].isdigit():
                offsets.append(int(name[: -len(SNAPSHOT_SUFFIX)]))
        return sorted(offsets)

    def encode(self) -> bytes:
        entries = []
        for pid, entry in self.producers.items():
            txn = (entry.coordinator_epoch, entry.current_txn_first_offset)
            if not entry.batches:
                entries.append(_ENTRY.pack(pid, entry.epoch, NO_SEQUENCE, -1, 0, entry.last_timestamp, *txn))
            for batch in entry.batches:
                entries.append(
                    _ENTRY.pack(
                        pid, entry.epoch, batch.last_seq, batch.last_offset,
                        batch.last_offset - batch.first_offset, batch.timestamp, *txn,
                    )
                )
        body = _COUNT.pack(len(entries)) + b"".join(entries)
        return _PREFIX.pack(SNAPSHOT_VERSION, crc32c(body)) + body

    def decode(self, data: bytes) -> dict[int, ProducerEntry]:
        if len(data) < _PREFIX.size + _COUNT.size:
            raise CorruptSnapshotError("snapshot is truncated")
        version, crc = _PREFIX.unpack_from(data)
        if version != SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"unknown snapshot version {version}")
        if crc32c(data[_PREFIX.size :]) != crc:
            raise CorruptSnapshotError("snapshot fails its CRC check")
        (count,) = _COUNT.unpack_from(data, _PREFIX.size)
        if count < 0 or len(data) != _PREFIX.size + _COUNT.size + count * _ENTRY.size:
            raise CorruptSnapshotError("snapshot length does not match its entry count")
        producers: dict[int, ProducerEntry] = {}
        for pid, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch, txn_first in \
                _ENTRY.iter_unpack(data[_PREFIX.size + _COUNT.size :]):
            entry = producers.get(pid)
            if entry is None or entry.epoch != epoch:
                entry = producers[pid] = ProducerEntry(pid, epoch)
            entry.last_timestamp = timestamp
            entry.coordinator_epoch, entry.current_txn_first_offset = coordinator_epoch, txn_first
            if last_offset >= 0:
                first_seq = (last_seq - offset_delta) % (INT32_MAX + 1)
                entry.batches.append(
                    BatchMetadata(first_seq, last_seq, last_offset - offset_delta, last_offset, timestamp)
                )
        return producers

    def take_snapshot(self, offset: int, sync: bool = True) -> str:
        """Write the current state as ``<offset>.snapshot`` (state must cover offsets < offset);
        its path. Without ``sync`` the caller fsyncs the file and its dir later, off the event
        loop, as Kafka flushes the snapshot of a roll in the background (KAFKA-15046)."""
        path = os.path.join(self.dir_path, snapshot_file_name(offset))
        write_atomically(path, self.encode(), self.guard, sync)
        return path

    def load(self, log_end: int, segment_bases: list[int]) -> int | None:
        """At a log's load, from one listing of its dir: the snapshots above ``log_end`` (written
        before the log was cut back) go, and so do those neither at a segment's base nor the
        newest (a clean shutdown's), which would pile up across restarts; then the newest
        readable one left is loaded (an unreadable one is deleted). Its offset."""
        offsets = self.snapshot_offsets()
        kept = [offset for offset in offsets if offset <= log_end]
        bases = set(segment_bases)
        stale = [offset for offset in offsets if offset > log_end] + [offset for offset in kept[:-1]
                                                                        if offset not in bases]
        for offset in stale:
            self._delete_snapshot(offset)
        self.producers = {}
        for offset in reversed([offset for offset in kept if offset not in stale]):
            with self.guard:
                with open(os.path.join(self.dir_path, snapshot_file_name(offset)), "rb") as handle:
                    data = handle.read()
            try:
                self.producers = self.decode(data)
                return offset
            except CorruptSnapshotError:
                self._delete_snapshot(offset)
        return None

    def _delete_snapshot(self, offset: int) -> None:
        with self.guard:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.dir_path, snapshot_file_name(offset)))

    def delete_snapshots_below(self, offset: int) -> None:
        """Remove snapshots older than ``offset``, keeping the newest of them as a starting point."""
        older = [o for o in self.snapshot_offsets() if o < offset]
        for stale in older[:-1]:
            self._delete_snapshot(stale)

    def delete_snapshots_above(self, offset: int) -> None:
        for stale in self.snapshot_offsets():
            if stale > offset:
                self._delete_snapshot(stale)
