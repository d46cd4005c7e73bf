"""The log of one partition replica: its segments, offsets, epochs and producer state."""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

from minikafka.storage.background_io import INLINE_IO, BackgroundIo
from minikafka.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    CorruptCheckpointError,
    create_file,
    epoch_checkpoint_bytes,
    fsync_dir,
    partition_metadata_bytes,
    read_partition_metadata,
    write_partition_metadata,
)
from minikafka.storage.crash_points import hook_point
from minikafka.storage.dir_io import DirGuard
from minikafka.storage.errors import (
    CorruptRecordError,
    InconsistentTopicIdError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    TransactionCoordinatorFencedError,
)
from minikafka.storage.leader_epoch import LeaderEpochCache
from minikafka.storage.producer_state import CompletedTxn, ProducerStateManager
from minikafka.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    FileSlice,
    Segment,
    close_fds,
    last_offset_in_file,
    segment_name,
    sync_and_close_fds,
)
from minikafka.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn
from minikafka.storage.writeback import WRITEBACK_BYTES, start_writeback
from protocol.record_codec import (
    CODECS,
    ControlMarker,
    decode_control_marker,
    encode_control_batch,
    keyless_records,
    recompress_batch,
)
from protocol.records import (
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batches,
)

logger = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
# Leftovers of interrupted operations that a restart discards (a clean's ``.swap`` files are
# finished instead: see Log.replace_segments).
_STALE_SUFFIXES = (DELETED_SUFFIX, ".tmp", CLEANED_SUFFIX)


@dataclass
class LogConfig:
    """Per-topic storage settings (Kafka's topic config names, snake_cased); a value object
    built by the broker's topic-config code and handed to Log / LogManager."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    message_timestamp_type: str = "CreateTime"
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    file_delete_delay_ms: int = 60000
    min_insync_replicas: int = 1
    compression_type: str = "producer"  # the codec batches are stored in ("producer": as sent)
    timestamp_before_max_ms: int = 2**63 - 1  # how far in the past a CreateTime may be
    timestamp_after_max_ms: int = 2**63 - 1  # and how far in the future
    cleanup_policy: tuple[str, ...] = ("delete",)  # compact and/or delete
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1
    delete_retention_ms: int = 86_400_000  # how long a tombstone outlives the clean that first sees it

    def __post_init__(self) -> None:
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"message.timestamp.type must be CreateTime or LogAppendTime, "
                             f"not {self.message_timestamp_type!r}")
        if not 0 < self.segment_bytes <= 2**31 - 1:
            raise ValueError(f"segment.bytes must be in 1..{2**31 - 1}, not {self.segment_bytes}")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compact(self) -> bool:
        """The log cleaner keeps the latest record of each key (and records need keys)."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Retention (retention.ms, retention.bytes) deletes old segments."""
        return "delete" in self.cleanup_policy


@dataclass(slots=True)
class AppendResult:
    """What an append stored: offsets of the first and last record, the LogAppendTime stamp
    (-1 under CreateTime), and whether it was a producer retry that stored nothing."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    duplicate: bool = False
    records_count: int = 0
    size_bytes: int = 0


@dataclass(slots=True)
class ReadResult:
    """A read's slice (owned by the caller, who must close it) and the log's offsets at the
    time of the read."""

    records: FileSlice | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a live partition dir name, None for anything else."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or "." in part:
        return None
    return topic, int(part)


def future_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuidhex>-future``: where a replica being moved is copied to."""
    return f"{partition_dir_name(topic, partition)}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def parse_future_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a future dir name, None for anything else."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    stem, dot, unique = name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")
    if not dot or len(unique) != 32 or any(c not in "0123456789abcdef" for c in unique):
        return None
    return parse_partition_dir(stem)


def _now_ms() -> int:
    return int(time.time() * 1000)


def make_new_log_files(dir_path: str, topic_id: uuid.UUID, first_epoch: int | None) -> None:
    """The files of a new, empty log, made off the event loop (``LogManager.prepare_new_logs``;
    ``Log.create(made=True)`` then opens them): its dir, partition.metadata, an empty first
    segment and, for a replica that leads from the start, its first leader epoch at offset 0.
    None fsynced; no guard (the caller reports errors). FileExistsError if the dir exists."""
    os.mkdir(dir_path)
    create_file(os.path.join(dir_path, PARTITION_METADATA), partition_metadata_bytes(topic_id))
    create_file(os.path.join(dir_path, segment_name(0) + LOG_SUFFIX), b"")
    if first_epoch is not None:
        create_file(os.path.join(dir_path, LEADER_EPOCH_CHECKPOINT), epoch_checkpoint_bytes([(first_epoch, 0)]))


class Log:
    """Owns one partition replica's directory: segments, log start/end offsets, high
    watermark, recovery point, cleaner checkpoint, leader-epoch cache and producer state.

    Only the broker's event-loop thread calls it (ReplicaManager for appends and reads,
    LogManager for loading, retention, checkpoints and shutdown, the LogCleaner to swap in
    cleaned segments); it takes no locks. The cleaner's threads read sealed segments through
    their own duplicates of the fds and write ``.cleaned`` files, never touching this object;
    so do the ``background`` threads that fsync rolled segments and start writebacks.
    """

    def __init__(
        self, log_dir: str, dir_path: str, topic: str, partition: int, topic_id: uuid.UUID,
        config: LogConfig, guard: DirGuard, background: BackgroundIo = INLINE_IO,
        leader_epochs: list[tuple[int, int]] | None = None,
    ) -> None:
        """``leader_epochs``: what its leader-epoch checkpoint holds, when the caller knows (a
        log made just now); else it is read."""
        self.log_dir = log_dir
        self.dir_path = dir_path
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.config = config
        self.guard = guard
        # Where a rolled segment's fsync runs, off the event loop (the LogManager's pool).
        self.background = background
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0
        # Where the part of the log the cleaner has not compacted yet starts (Kafka's cleaner
        # checkpoint, kept in the log dir's cleaner-offset-checkpoint).
        self.clean_until = 0
        # Bumped by every change of the segments other than an append (truncation, retention, a
        # cleaned swap): a clean prepared against an older generation is thrown away.
        self.segments_generation = 0
        self._leo = 0
        self.leader_epochs = LeaderEpochCache(dir_path, guard, background, leader_epochs)
        self.producer_state = ProducerStateManager(dir_path, guard)
        self._pending_deletes: list[tuple[int, Segment]] = []
        # Transactions a marker ended above the high watermark: not stable yet.
        self._unstable_txns: list[CompletedTxn] = []
        self.closed = False
        # Told the offset of every truncation (a mover copying this log must re-copy from it).
        self.on_truncate: Callable[[int], None] | None = None

    # ---- creation and loading ----------------------------------------------------------

    @classmethod
    def create(
        cls, log_dir: str, topic: str, partition: int, topic_id: uuid.UUID, config: LogConfig,
        guard: DirGuard, background: BackgroundIo = INLINE_IO, sync: bool = True, made: bool = False,
        first_epoch: int | None = None,
    ) -> Log:
        """Make ``<log_dir>/<topic>-<partition>`` with partition.metadata and an empty segment
        (``made``: ``make_new_log_files`` made them, with ``first_epoch``). Without ``sync``
        neither they nor its leader epochs are fsynced until the caller takes
        ``unsynced_paths()`` to fsync them."""
        name = partition_dir_name(topic, partition)
        dir_path = os.path.join(log_dir, name)
        guard = guard.for_partition(name)
        new_dir = made
        if not made:
            with guard:
                try:
                    os.makedirs(dir_path)
                    new_dir = True
                except FileExistsError:
                    pass
            write_partition_metadata(os.path.join(dir_path, PARTITION_METADATA), topic_id, guard, sync, new_dir)
        if sync:
            fsync_dir(log_dir, guard)
        if new_dir:  # nothing to load or recover: one empty segment (a new replica costs only its files)
            epochs = [(first_epoch, 0)] if made and first_epoch is not None else []
            log = cls(log_dir, dir_path, topic, partition, topic_id, config, guard, background, epochs)
            log.segments = [Segment.create(dir_path, 0, log.guard, config.index_interval_bytes)]
            log._bases = [0]
        else:
            log = cls.load(log_dir, dir_path, config, guard, clean=False, topic_id=topic_id, background=background)
        log.leader_epochs.synced = sync
        log.leader_epochs.absent = new_dir and not log.leader_epochs.entries  # none made with it
        return log

    def unsynced_paths(self) -> tuple[str, ...]:
        """What ``create(sync=False)`` wrote without an fsync, for the caller to fsync: its
        partition.metadata and leader epochs, its dir's entries and its dir's entry in the log
        dir. From now on the log fsyncs its own writes again."""
        self.leader_epochs.synced = True
        return (os.path.join(self.dir_path, PARTITION_METADATA), self.leader_epochs.path, self.dir_path,
                self.log_dir)

    @classmethod
    def load(
        cls, log_dir: str, dir_path: str, config: LogConfig, guard: DirGuard, *, clean: bool,
        recovery_point: int | None = None, log_start_offset: int | None = None,
        high_watermark: int | None = None, topic_id: uuid.UUID | None = None, clean_until: int | None = None,
        background: BackgroundIo = INLINE_IO,
    ) -> Log:
        """Open an existing partition dir (or a move's future dir); without ``clean``, recover
        from the recovery point."""
        parsed = parse_partition_dir(os.path.basename(dir_path)) or parse_future_dir(os.path.basename(dir_path))
        if parsed is None:
            raise ValueError(f"{dir_path} is not a partition directory")
        topic, partition = parsed
        guard = guard.for_partition(partition_dir_name(topic, partition))
        try:
            stored_id = read_partition_metadata(os.path.join(dir_path, PARTITION_METADATA), guard)
        except CorruptCheckpointError:
            stored_id = None
        if topic_id is not None and stored_id not in (None, ZERO_UUID) and stored_id != topic_id:
            raise InconsistentTopicIdError(
                f"{dir_path} holds topic id {stored_id}, not {topic_id}"
            )
        log = cls(log_dir, dir_path, topic, partition, stored_id or topic_id or ZERO_UUID, config, guard, background)
        if stored_id is None and topic_id is not None:
            write_partition_metadata(os.path.join(dir_path, PARTITION_METADATA), topic_id, guard)
        log._load_segments(clean, recovery_point, log_start_offset, high_watermark)
        log.clean_until = min(max(clean_until or 0, log.log_start_offset), log.log_end_offset)
        return log

    def _scan_dir(self) -> list[int]:
        with self.guard:
            names = os.listdir(self.dir_path)
        if any(name.endswith(SWAP_SUFFIX) for name in names):
            self._finish_swaps(names)
            with self.guard:
                names = os.listdir(self.dir_path)
        bases: list[int] = []
        stems_with_log = {name[: -len(LOG_SUFFIX)] for name in names if name.endswith(LOG_SUFFIX)}
        for name in names:
            path = os.path.join(self.dir_path, name)
            stem, ext = os.path.splitext(name)
            if name.endswith(_STALE_SUFFIXES):
                with self.guard:
                    os.unlink(path)
            elif ext == LOG_SUFFIX and stem.isdigit():
                bases.append(int(stem))
            elif ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX) and stem not in stems_with_log:
                with self.guard:
                    os.unlink(path)
        return sorted(bases)

    def _finish_swaps(self, names: list[str]) -> None:
        """A clean's swap was decided (its ``.log.swap`` exists) but not finished: the segments
        whose offsets it covers go, it takes its final name. Its index files are dropped, to be
        rebuilt from the .log (an index renamed before the crash may be a stale one)."""
        bases = sorted(int(name[:20]) for name in names if name.endswith(LOG_SUFFIX) and name[:20].isdigit()
                       and len(name) == 20 + len(LOG_SUFFIX))
        for name in sorted(n for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)):
            base = int(name[:20])
            swap_path = os.path.join(self.dir_path, name)
            end = last_offset_in_file(swap_path, self.guard) + 1
            replaced = [b for b in bases if base <= b < max(end, base + 1)]
            with self.guard:
                for old in replaced:
                    for suffix in SEGMENT_SUFFIXES:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(os.path.join(self.dir_path, segment_name(old) + suffix))
                for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    for stale in (segment_name(base) + suffix + SWAP_SUFFIX, segment_name(base) + suffix):
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(os.path.join(self.dir_path, stale))
                # The aborted transactions cannot be told from the .log alone: the cleaned copy's
                # index (written and fsynced before the swap was decided) is kept.
                txn_index = os.path.join(self.dir_path, segment_name(base) + TXN_INDEX_SUFFIX)
                if os.path.exists(txn_index + SWAP_SUFFIX):
                    os.replace(txn_index + SWAP_SUFFIX, txn_index)
                os.rename(swap_path, os.path.join(self.dir_path, segment_name(base) + LOG_SUFFIX))
            fsync_dir(self.dir_path, self.guard)
            logger.info("%s: finished swapping in the cleaned segment %s (replacing %d segment(s)), decided before "
                        "the broker stopped", self.name, segment_name(base), len(replaced))
        with self.guard:
            for name in os.listdir(self.dir_path):
                if name.endswith(SWAP_SUFFIX):  # an index swap file whose log never became one
                    os.unlink(os.path.join(self.dir_path, name))

    def _load_segments(
        self, clean: bool, recovery_point: int | None, log_start_offset: int | None,
        high_watermark: int | None,
    ) -> None:
        interval = self.config.index_interval_bytes
        bases = self._scan_dir()
        if not bases:
            start = max(log_start_offset or 0, 0)
            self.segments = [Segment.create(self.dir_path, start, self.guard, interval)]
        else:
            self.segments = [Segment.open(self.dir_path, base, self.guard, interval) for base in bases]
            for segment in self.segments:
                segment.refuse_legacy_format()
        self._bases = [segment.base_offset for segment in self.segments]
        if not clean:
            self._recover_from(recovery_point or 0)
        active = self.segments[-1]
        self._leo = active.next_offset
        self.log_start_offset = min(max(log_start_offset or 0, self.segments[0].base_offset), self._leo)
        self.recovery_point = self._leo if clean else min(recovery_point or 0, self._leo)
        hw = high_watermark if high_watermark is not None else self.log_start_offset
        self.high_watermark = min(max(hw, self.log_start_offset), self._leo)
        self.leader_epochs.truncate_from_end(self._leo)
        self.leader_epochs.truncate_from_start(self.log_start_offset)
        self._rebuild_producer_state()

    def _recover_from(self, recovery_point: int) -> None:
        first = max(bisect_right(self._bases, recovery_point) - 1, 0)
        for i in range(first, len(self.segments)):
            segment = self.segments[i]
            truncated = segment.recover()
            if truncated:
                logger.warning("%s: truncated %d bytes of torn or corrupt data from %s",
                               self.name, truncated, segment.log_path)
                for later in self.segments[i + 1 :]:
                    logger.warning("%s: deleting %s, which follows corrupt data", self.name, later.log_path)
                    later.delete()
                del self.segments[i + 1 :]
                del self._bases[i + 1 :]
                break
        for segment in self.segments[first:-1]:
            segment.on_become_inactive()

    def _rebuild_producer_state(self) -> None:
        """Newest snapshot at or below the log end, plus a replay of the batches after it; the
        transactions aborted in the replayed part go into the segments' .txnindex again."""
        snapshot = self.producer_state.load(self._leo, self._bases)
        start = max(snapshot if snapshot is not None else 0, self.segments[0].base_offset)
        self._unstable_txns = []
        if start >= self._leo:
            return
        first = max(bisect_right(self._bases, start) - 1, 0)
        for segment in self.segments[first:]:
            segment.txn_index.truncate_from(start)
        for segment in self.segments[first:]:
            for header, marker in segment.iter_for_replay(start):
                self._record(header, marker, segment)

    # ---- properties --------------------------------------------------------------------

    @property
    def name(self) -> str:
        return partition_dir_name(self.topic, self.partition)

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign."""
        return self._leo

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def bytes_below(self, offset: int) -> int:
        """Bytes of the batches before ``offset``: what a replica of this log holds once it
        fetches from ``offset``."""
        i = bisect_right(self._bases, offset) - 1
        if i < 0:
            return 0
        position = self.segments[i].find(offset)
        return sum(segment.size for segment in self.segments[:i]) + (
            self.segments[i].size if position is None else position)

    def bytes_from(self, offset: int) -> int:
        """Bytes of the batches at and after ``offset``: what a replica fetching from ``offset``
        still lacks. Cheap near the log end (it walks the segments from the one holding it)."""
        i = max(bisect_right(self._bases, offset) - 1, 0)
        position = self.segments[i].find(offset)
        later = sum(segment.size for segment in self.segments[i + 1:])
        return later + (0 if position is None else self.segments[i].size - position)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for segment in self.segments:
            segment.index_interval_bytes = config.index_interval_bytes

    # ---- appends -----------------------------------------------------------------------

    def append_as_leader(self, records: bytes | memoryview, leader_epoch: int, now_ms: int,
                         coordinator: bool = False) -> AppendResult:
        """Validate, assign offsets from the log end, stamp the epoch (and LogAppendTime), store.

        Nothing is written if any batch is rejected.  A retry of one of a producer's last
        five batches returns that batch's original offsets with ``duplicate`` set.
        ``coordinator``: a coordinator's own write (a transactional offset commit has no
        sequence), whose producer epoch alone is checked.
        """
        batches = validate_batches(records)
        if not batches:
            raise CorruptRecordError("produce request holds no record batches")
        max_bytes = self.config.max_message_bytes
        for _, header in batches:
            if header.size > max_bytes:
                raise RecordTooLargeError(
                    f"batch of {header.size} bytes exceeds max.message.bytes {max_bytes} for {self.name}"
                )
        if self.config.compact:
            self._check_keys(records, batches)
        if self.config.compression_type != "producer":
            records, batches = self._recompressed(records, batches)
        if not self.config.log_append_time:
            self._check_timestamps(batches, now_ms)
        headers = [header for _, header in batches]
        log_append_time = self.config.log_append_time
        duplicate = self.producer_state.check(headers, sequences=not coordinator)
        if duplicate is not None:
            return AppendResult(
                duplicate.first_offset, duplicate.last_offset,
                duplicate.timestamp if log_append_time else -1, self.log_start_offset, duplicate=True,
            )
        buf = bytearray(records)
        offset = first_offset = self._leo
        count = 0
        for pos, header in batches:
            set_base_offset(buf, pos, offset)
            header.base_offset = offset
            set_partition_leader_epoch(buf, pos, leader_epoch)
            header.partition_leader_epoch = leader_epoch
            if log_append_time:
                set_log_append_time(buf, pos, now_ms)
                header.max_timestamp = now_ms
                header.attributes |= TIMESTAMP_TYPE_MASK
            offset = header.last_offset + 1
            count += header.records_count
        self.leader_epochs.assign(leader_epoch, first_offset)
        self._append(buf, batches, now_ms)
        return AppendResult(
            first_offset, offset - 1, now_ms if log_append_time else -1, self.log_start_offset,
            records_count=count, size_bytes=len(buf),
        )

    def _check_keys(self, records: bytes | memoryview, batches: list[tuple[int, BatchHeader]]) -> None:
        """A compacted topic keeps the latest record of each key: a record without one is refused,
        with its whole batch and request (Kafka's LogValidator)."""
        why = f"Compacted topic cannot accept message without key in topic partition {self.name}."
        for pos, header in batches:
            keyless = keyless_records(records, pos, header)
            if keyless:
                raise InvalidRecordError(why, [(index, why) for index in keyless])

    def _recompressed(self, records: bytes | memoryview, batches: list[tuple[int, BatchHeader]]
                      ) -> tuple[bytes | memoryview, list[tuple[int, BatchHeader]]]:
        """The batches stored with the topic's compression.type (the records are not decoded)."""
        codec = CODECS[self.config.compression_type]
        if all(header.compression == codec for _, header in batches):
            return records, batches
        stored = b"".join(recompress_batch(records, pos, header, codec) if header.compression != codec
                          else records[pos:pos + header.size] for pos, header in batches)
        return stored, validate_batches(stored)

    def _check_timestamps(self, batches: list[tuple[int, BatchHeader]], now_ms: int) -> None:
        before, after = self.config.timestamp_before_max_ms, self.config.timestamp_after_max_ms
        for _, header in batches:
            if now_ms - header.base_timestamp > before or header.max_timestamp - now_ms > after:
                raise InvalidTimestampError(
                    f"timestamps {header.base_timestamp}..{header.max_timestamp} of the batch at offset "
                    f"{header.base_offset} are outside message.timestamp.before.max.ms={before} / "
                    f"message.timestamp.after.max.ms={after} of {self.name} (broker time {now_ms})")

    def append_marker(self, producer_id: int, producer_epoch: int, marker: ControlMarker, leader_epoch: int,
                      now_ms: int) -> AppendResult:
        """Append as leader the marker that ends ``producer_id``'s transaction (a coordinator's
        WriteTxnMarkers). Refused (InvalidProducerEpochError, TransactionCoordinatorFencedError)
        from a producer epoch or coordinator epoch older than this partition has seen."""
        entry = self.producer_state.producers.get(producer_id)
        if entry is not None:
            if producer_epoch < entry.epoch:
                raise InvalidProducerEpochError(f"marker of producer {producer_id} with epoch {producer_epoch}, "
                                                f"older than its epoch {entry.epoch} in {self.name}")
            if marker.coordinator_epoch < entry.coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    f"marker of coordinator epoch {marker.coordinator_epoch}, older than {entry.coordinator_epoch} "
                    f"in {self.name}")
        offset = self._leo
        data = encode_control_batch(marker, producer_id, producer_epoch, now_ms, base_offset=offset,
                                    partition_leader_epoch=leader_epoch)
        self.leader_epochs.assign(leader_epoch, offset)
        self._append(data, validate_batches(data), now_ms)
        return AppendResult(offset, offset, -1, self.log_start_offset, records_count=1, size_bytes=len(data))

    def append_as_follower(self, records: bytes | memoryview, now_ms: int | None = None) -> AppendResult:
        """Store batches fetched from the leader as they are (offsets and epochs already set).

        Their offsets must start at or after the log end and increase; compacted batches
        (fewer records than offsets) are allowed.
        """
        batches = validate_batches(records, exact_count=False)
        if not batches:
            return AppendResult(self._leo, self._leo - 1, -1, self.log_start_offset)
        expected = self._leo
        for _, header in batches:
            if header.base_offset < expected:
                raise CorruptRecordError(
                    f"{self.name}: replicated batch at offset {header.base_offset} is below {expected}"
                )
            expected = header.last_offset + 1
        for _, header in batches:
            self.leader_epochs.assign(header.partition_leader_epoch, header.base_offset)
        self._append(records, batches, now_ms if now_ms is not None else _now_ms())
        first = batches[0][1].base_offset
        return AppendResult(
            first, expected - 1, -1, self.log_start_offset,
            records_count=sum(h.records_count for _, h in batches), size_bytes=len(records),
        )

    def _append(self, data: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]], now_ms: int) -> None:
        if len(data) > self.config.segment_bytes:
            raise RecordTooLargeError(
                f"append of {len(data)} bytes exceeds segment.bytes {self.config.segment_bytes} for {self.name}"
            )
        first_offset = batches[0][1].base_offset
        last_offset = batches[-1][1].last_offset
        active = self.segments[-1]
        if self._should_roll(active, len(data), last_offset, now_ms):
            active = self.roll(now_ms, first_offset)
        active.append(data, batches, now_ms)
        self._write_back(active)
        self._leo = last_offset + 1
        for pos, header in batches:
            self._record(header, decode_control_marker(data, pos, header) if header.is_control else None, active)

    def _write_back(self, segment: Segment) -> None:
        """Start writing back ``segment``'s appends once WRITEBACK_BYTES have piled up since the
        last start, on a background thread (see minikafka.storage.writeback)."""
        start, end = segment.written_back_to, segment.size
        if start_writeback is None or end - start < WRITEBACK_BYTES:
            return
        fd = segment.duplicate_fd()
        segment.written_back_to = end

        def write_back() -> None:
            try:
                start_writeback(fd, start, end - start)
            finally:
                os.close(fd)

        self.background.submit(self.guard, write_back)

    def _record(self, header: BatchHeader, marker: ControlMarker | None, segment: Segment) -> None:
        """A stored batch's effect on the producer state; a transaction its marker ends waits in
        ``_unstable_txns`` until the marker is below the high watermark, and an aborted one is
        indexed in the marker's segment."""
        completed = self.producer_state.record(header, marker)
        if completed is None:
            return
        if completed.aborted:
            # Kafka's "last stable offset" of the entry: where the next open transaction starts.
            still_open = self.producer_state.first_unstable_offset()
            segment.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                                                completed.last_offset + 1 if still_open is None else still_open))
        if completed.last_offset >= self.high_watermark:
            self._unstable_txns.append(completed)

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, or the first offset of the oldest transaction not yet decided there
        (open, or ended by a marker still above the high watermark): a read_committed consumer
        reads no further (KIP-98)."""
        hw = self.high_watermark
        self._unstable_txns = [t for t in self._unstable_txns if t.last_offset >= hw]
        open_first = self.producer_state.first_unstable_offset()
        return min([hw, *(t.first_offset for t in self._unstable_txns),
                    *([open_first] if open_first is not None else [])])

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions with records in [start, end), for a read_committed fetch."""
        found: list[AbortedTxn] = []
        for segment in self.segments[max(bisect_right(self._bases, start) - 1, 0):]:
            if segment.base_offset >= end:
                break
            found += segment.txn_index.overlapping(start, end)
        return found

    def _should_roll(self, active: Segment, incoming: int, last_offset: int, now_ms: int) -> bool:
        if active.size == 0:
            return False
        if active.size + incoming > self.config.segment_bytes:
            return True
        if active.rolling_base_ms is not None and now_ms - active.rolling_base_ms > self.config.segment_ms:
            return True
        return not active.fits_offsets(last_offset)

    def roll(self, now_ms: int | None = None, base_offset: int | None = None) -> Segment:
        """Start a new active segment at the log end; returns it. The segments the recovery
        point does not cover yet are fsynced in the background, as Kafka's roll schedules their
        flush: writing back a whole segment takes a large part of a second, which no append or
        read should wait for. The recovery point moves to the new segment once that is done."""
        active = self.segments[-1]
        base = self._leo if base_offset is None else base_offset
        if active.size == 0 and active.base_offset == base:
            return active
        first = max(bisect_right(self._bases, self.recovery_point) - 1, 0)
        fds: list[int] = []
        try:
            for segment in self.segments[first:-1]:
                fds += segment.fds_to_sync()
            fds += active.on_become_inactive(sync_later=True)
            segment = Segment.create(self.dir_path, base, self.guard, self.config.index_interval_bytes)
            with self.guard:  # the dir too, for the new segment's files: by fd, as a rename may follow
                fds.append(os.open(self.dir_path, os.O_RDONLY | os.O_DIRECTORY))
        except BaseException:
            close_fds(fds)
            raise
        self.segments.append(segment)
        self._bases.append(base)
        try:
            # Synced with the segments (the dir's fd above covers its rename): the recovery point
            # reaches ``base`` only once the snapshot there is durable. A crash before that finds
            # it torn or missing at worst, and recovery starts from an older one.
            snapshot = self.producer_state.take_snapshot(base, sync=False)
            with self.guard:
                fds.append(os.open(snapshot, os.O_RDONLY))
        except BaseException:
            close_fds(fds)
            raise
        self._sync_in_background(fds, self._leo)
        return segment

    def _sync_in_background(self, fds: list[int], recovered_to: int) -> None:
        """fsync ``fds`` and close them, off the event loop; then the recovery point moves up
        to ``recovered_to``, unless the segments changed meanwhile (a truncation could have
        replaced what was synced)."""
        generation = self.segments_generation

        def synced() -> None:
            if not self.closed and self.segments_generation == generation and recovered_to <= self._leo:
                self.recovery_point = max(self.recovery_point, recovered_to)

        self.background.submit(self.guard, lambda: sync_and_close_fds(fds), synced)

    # ---- reads -------------------------------------------------------------------------

    def _check_range(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self._leo:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self._leo)

    def _result(self, records: FileSlice | None) -> ReadResult:
        return ReadResult(records, self.high_watermark, self.log_start_offset, self._leo)

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True,
    ) -> ReadResult:
        """A slice of whole batches from the one segment holding ``fetch_offset``.

        Starts at the batch containing ``fetch_offset``; holds at most ``max_bytes`` (or
        exactly one batch if that alone is larger and ``min_one_batch``); never reaches a
        batch whose offsets reach ``max_offset`` (exclusive cap, normally the high
        watermark).  ``records`` is None when there is nothing to return.
        """
        self._check_range(fetch_offset)
        if fetch_offset == self._leo or (max_offset is not None and fetch_offset >= max_offset):
            return self._result(None)
        i = max(bisect_right(self._bases, fetch_offset) - 1, 0)
        for segment in self.segments[i:]:
            start = segment.find(fetch_offset)
            if start is None:
                continue
            end = segment.size
            if max_offset is not None:
                cap = segment.find(max_offset)
                if cap is not None:
                    end = cap
            if end <= start:
                return self._result(None)
            if end - start > max_bytes:
                limit = segment.boundary_at_or_below(start + max(max_bytes, 0))
                if limit <= start:
                    if not min_one_batch:
                        return self._result(None)
                    limit = start + segment.header_at(start).size
                end = limit
            return self._result(segment.slice(start, end))
        return self._result(None)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with a timestamp >= ``timestamp`` (see
        Segment.find_timestamp for the codecs answered at batch granularity).  The caller
        applies any high-watermark cap and handles the latest/earliest specials.
        """
        i = max(bisect_right(self._bases, self.log_start_offset) - 1, 0)
        for segment in self.segments[i:]:
            found = segment.find_timestamp(timestamp, self.log_start_offset)
            if found is not None:
                return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the log's largest timestamp
        (ListOffsets MAX_TIMESTAMP); only that record's batch is decoded."""
        best: Segment | None = None
        for segment in self.segments:
            if segment.size == 0 or segment.next_offset <= self.log_start_offset:
                continue
            if segment.max_timestamp >= 0 and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        return None if best is None else best.max_timestamp_record(self.log_start_offset)

    # ---- leader epochs -----------------------------------------------------------------

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers; (-1, -1) if unknown."""
        return self.leader_epochs.end_offset_for(epoch, self._leo)

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        self.leader_epochs.assign(epoch, start_offset)

    def epoch_for_offset(self, offset: int) -> int:
        """The leader epoch in which ``offset`` was written; -1 if no epoch covers it."""
        epoch = self.leader_epochs.epoch_for_offset(offset)
        return -1 if epoch is None else epoch

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epochs.latest_epoch

    # ---- truncation ----------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Cut the log back so that its end is ``offset`` (or the start of the batch holding it)."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to negative offset {offset}")
        if offset >= self._leo:
            return
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        if self.on_truncate is not None:
            self.on_truncate(offset)
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop().delete()
            self._bases.pop()
        self.segments[-1].truncate_to(offset)
        self._after_truncation()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log, empty, at ``offset``."""
        if self.on_truncate is not None:
            self.on_truncate(-1)
        for segment in self.segments:
            segment.delete()
        self.segments = [Segment.create(self.dir_path, offset, self.guard, self.config.index_interval_bytes)]
        self._bases = [offset]
        self.log_start_offset = offset
        self.leader_epochs.truncate_from_end(-1)
        self.producer_state.clear()
        self.producer_state.delete_snapshots_above(-1)
        self._after_truncation()

    def _after_truncation(self) -> None:
        self.segments_generation += 1
        self._leo = self.segments[-1].next_offset
        self.high_watermark = min(self.high_watermark, self._leo)
        self.recovery_point = min(self.recovery_point, self._leo)
        self.log_start_offset = min(self.log_start_offset, self._leo)
        self.clean_until = min(self.clean_until, self._leo)
        self.leader_epochs.truncate_from_end(self._leo)
        self._rebuild_producer_state()

    # ---- retention -----------------------------------------------------------------------

    def delete_records_before(self, offset: int, now_ms: int | None = None) -> int:
        """Move the log start offset up to ``offset`` (at most the high watermark) and delete
        the segments wholly below it; returns the new log start offset."""
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.high_watermark)
        if offset <= self.log_start_offset:
            return self.log_start_offset
        self.log_start_offset = offset
        now = now_ms if now_ms is not None else _now_ms()
        self._delete_leading_segments(self._count_below_start(), now)
        self.leader_epochs.truncate_from_start(offset)
        return self.log_start_offset

    def _count_below_start(self) -> int:
        count = 0
        while count < len(self.segments) - 1 and self.segments[count + 1].base_offset <= self.log_start_offset:
            count += 1
        return count

    def enforce_retention(self, now_ms: int) -> int:
        """Delete the oldest segments breaching retention.ms or retention.bytes (never the
        active one; only under cleanup.policy delete) or wholly below the log start offset, and
        purge files whose deletion delay is over; returns segments deleted."""
        candidates = self.segments[:-1] if self.config.delete else []
        by_time = 0
        if self.config.retention_ms >= 0:
            for segment in candidates:
                if now_ms - segment.largest_timestamp <= self.config.retention_ms:
                    break
                by_time += 1
        by_size = 0
        if self.config.retention_bytes >= 0:
            excess = self.size_bytes - self.config.retention_bytes
            for segment in candidates:
                if excess - segment.size < 0:
                    break
                excess -= segment.size
                by_size += 1
        count = max(by_time, by_size, self._count_below_start())
        if count:
            self._delete_leading_segments(count, now_ms)
            if self.segments[0].base_offset > self.log_start_offset:
                self.log_start_offset = self.segments[0].base_offset
                self.high_watermark = max(self.high_watermark, self.log_start_offset)
                self.recovery_point = max(self.recovery_point, self.log_start_offset)
            self.leader_epochs.truncate_from_start(self.log_start_offset)
        self._purge_deleted(now_ms)
        return count

    def _delete_leading_segments(self, count: int, now_ms: int) -> None:
        self.segments_generation += 1
        doomed = self.segments[:count]
        del self.segments[:count]
        del self._bases[:count]
        self._retire(doomed, now_ms)
        self.producer_state.delete_snapshots_below(self.segments[0].base_offset)

    def _retire(self, segments: list[Segment], now_ms: int) -> None:
        """Segments no longer in the log: renamed ``.deleted`` and removed after
        file.delete.delay.ms (open FileSlices keep reading them meanwhile)."""
        for segment in segments:
            if self.config.file_delete_delay_ms <= 0:
                segment.delete()
            else:
                segment.rename_for_delete()
                self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, segment))

    # ---- compaction ----------------------------------------------------------------------

    def replace_segments(self, old: list[Segment], now_ms: int, sync: bool = True) -> Segment:
        """Swap in the cleaned copy of ``old`` (consecutive sealed segments of this log), which a
        cleaner wrote as ``<base>.{log,index,timeindex}.cleaned`` with the first one's base offset.
        Crash-safe, as Kafka's cleaner does it:

          1. the .cleaned files become .swap, the .log last: its rename decides the swap, and a
             startup that finds a .log.swap finishes it (``_finish_swaps``);
          2. the old segments are renamed .deleted (removed after file.delete.delay.ms);
          3. the .swap files take their final names.

        Returns the new segment. Runs on the event loop, between two appends: renames only (no
        record data). A journaling file system keeps renames of one directory in their order;
        ``sync`` fsyncs the directory after each step, else the caller fsyncs it afterwards, off
        the event loop, before it records the clean anywhere."""
        first = self.segments.index(old[0])
        if self.segments[first:first + len(old)] != old or first + len(old) >= len(self.segments):
            raise ValueError(f"{self.name}: the segments to replace are not consecutive sealed segments of the log")
        base = old[0].base_offset
        stem = os.path.join(self.dir_path, segment_name(base))
        with self.guard:
            # An index with no entries has no file (a small cleaned segment's), nor has a .txnindex
            # without aborted transactions; the .log comes last.
            suffixes = (*(suffix for suffix in (TXN_INDEX_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)
                          if os.path.exists(stem + suffix + CLEANED_SUFFIX)), LOG_SUFFIX)
            for suffix in suffixes:
                os.rename(stem + suffix + CLEANED_SUFFIX, stem + suffix + SWAP_SUFFIX)
        if sync:
            fsync_dir(self.dir_path, self.guard)
        hook_point("clean.swap_decided")
        self._retire(old, now_ms)
        hook_point("clean.old_segments_retired")
        with self.guard:
            for suffix in suffixes:
                os.rename(stem + suffix + SWAP_SUFFIX, stem + suffix)
        if sync:
            fsync_dir(self.dir_path, self.guard)
        new = Segment.open(self.dir_path, base, self.guard, self.config.index_interval_bytes)
        self.segments[first:first + len(old)] = [new]
        self._bases[first:first + len(old)] = [base]
        self.segments_generation += 1
        return new

    def _purge_deleted(self, now_ms: int) -> None:
        due = [segment for deadline, segment in self._pending_deletes if deadline <= now_ms]
        if not due:
            return
        self._pending_deletes = [(d, s) for d, s in self._pending_deletes if d > now_ms]
        for segment in due:
            segment.delete()

    # ---- durability and lifecycle ----------------------------------------------------

    def flush(self) -> None:
        """fsync everything written since the recovery point and move it to the log end."""
        if self.recovery_point >= self._leo:
            return
        first = max(bisect_right(self._bases, self.recovery_point) - 1, 0)
        for segment in self.segments[first:]:
            segment.flush()
        self.recovery_point = self._leo

    def take_producer_snapshot(self) -> None:
        self.producer_state.take_snapshot(self._leo)

    def close(self) -> None:
        """Release every fd; pending segment deletions are done now.  Never raises."""
        if self.closed:
            return
        self.closed = True
        for _, segment in self._pending_deletes:
            try:
                segment.delete()
            except KafkaStorageError:
                segment.close()
        self._pending_deletes = []
        for segment in self.segments:
            segment.close()

    def delete(self, sync: bool = True) -> str:
        """Close and rename the dir to ``<topic>-<partition>.<uuidhex>-delete``; returns the
        new path.  The LogManager removes it later.  Without ``sync`` the caller fsyncs the
        log dir itself (the LogDirMover does it off the event loop)."""
        self.close()
        target = os.path.join(self.log_dir, f"{self.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        with self.guard:
            os.rename(self.dir_path, target)
        if sync:
            fsync_dir(self.log_dir, self.guard)
        self.dir_path = target
        return target

    def rename_dir(self, new_path: str) -> None:
        """Rename this open log's directory within its log dir (a move's copy becoming the
        partition's dir) and repoint every path it holds; no fsync (the caller's)."""
        old = self.dir_path
        with self.guard:
            os.rename(old, new_path)

        def moved(path: str) -> str:
            return new_path + path[len(old):] if path.startswith(old + os.sep) else path

        self.dir_path = new_path
        for segment in [*self.segments, *(s for _, s in self._pending_deletes)]:
            segment.dir_path = new_path
            segment.log_path = moved(segment.log_path)
            segment.offset_index.file.path = moved(segment.offset_index.file.path)
            segment.time_index.file.path = moved(segment.time_index.file.path)
            segment.txn_index.path = moved(segment.txn_index.path)
        self.leader_epochs.set_dir(new_path)
        self.producer_state.dir_path = new_path

    def __repr__(self) -> str:
        return (f"Log({self.dir_path}, start={self.log_start_offset}, end={self._leo}, "
                f"hw={self.high_watermark}, segments={len(self.segments)})")
