"""Log compaction: the cleaner that keeps the latest record of each key of compacted logs.

As Kafka's LogCleaner. A compacted log (cleanup.policy has ``compact``) has a clean part, from
its start to its cleaner checkpoint (``Log.clean_until``), and a dirty part after it, up to the
first offset that may not be cleaned yet (the active segment, the last stable offset, records younger
than min.compaction.lag.ms). A clean:

  1. maps the latest offset of each key of the dirty part (``OffsetMap``; a part too large for
     the map is cleaned up to where the map filled, the rest in a later clean);
  2. rewrites every sealed segment from the log's start up to that point, in groups of
     consecutive segments that fit segment.bytes, each group into one ``<base>.log.cleaned``
     (with its indexes), keeping a record only if no later offset has its key; a tombstone (a
     record without a value) stays for delete.retention.ms after the clean that first sees it
     (KIP-534: its batch carries that horizon); records without a key are dropped; a batch
     that loses every record stays as an empty batch if it is its producer's last (so an
     idempotent producer's sequence survives), else goes; offsets never change (gaps are
     normal), nor do leader epochs or the high watermark;
  3. swaps each group in as it is done (``Log.replace_segments``: crash-safe, renames only);
  4. moves the cleaner checkpoint to the end of what was mapped and writes the dir's
     cleaner-offset-checkpoint.

``LogCleaner`` (event loop) owns the scheduling, the metrics and what each log's clean found; it
picks, every log.cleaner.backoff.ms, the filthiest log (highest dirty share over its
min.cleanable.dirty.ratio, or past max.compaction.lag.ms, or holding tombstones past their
horizon) of every log dir not being cleaned, at most log.cleaner.threads at once. Steps 1-2 run
in a process of the clean's own (``clean_log``; started when the last clean ended, so that its
start is not part of the next), which gets paths and plain values, never a Log, and shares no GIL
with the event loop: a Python thread would take the interpreter from the
produce and fetch paths for as long as it parses records. What the process wrote is checked on
the event loop before it is swapped in: if the log was truncated, trimmed, moved, deleted or
taken offline meanwhile, the clean is dropped. An I/O error of a clean takes only its log dir
offline (reported to the LogDirFailureChannel); a log whose data cannot be read is marked
uncleanable and left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext
from multiprocessing.process import BaseProcess
from typing import Any, Literal

from prometheus_client import Counter, Gauge

from minikafka.storage.checkpoints import fsync_dir_path
from minikafka.storage.crash_points import hook_point
from minikafka.storage.dir_io import DirGuard
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.index import OffsetIndex, TimeIndex
from minikafka.storage.log import Log
from minikafka.storage.log_manager import LogManager
from minikafka.storage.offset_map import OffsetMap
from minikafka.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    Segment,
    segment_name,
)
from minikafka.storage.throttle import Throttle
from minikafka.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, TransactionIndex
from minikafka.storage.units import format_bytes
from protocol.record_codec import batch_with_records, decompress
from protocol.record_scan import record_keys, record_spans
from protocol.records import (
    BATCH_HEADER_SIZE,
    INT32_MAX,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    parse_batch_header,
)

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

# What one key costs in the map here: a 16-byte digest object, an offset and a dict slot (Kafka's
# SkimpyOffsetMap packs the same in 24 bytes), so log.cleaner.dedupe.buffer.size bounds real memory.
MAP_ENTRY_BYTES = 160
UNLIMITED_IO = float("inf")
# A clean's process starts a fresh interpreter: a fork of the broker would copy its event loop,
# its threads' locks and its sockets.
PROCESS_START_METHOD: Literal["spawn"] = "spawn"
PR_SET_PDEATHSIG = 1

MAX_DIRTY_PERCENT = Gauge("kafka_log_LogCleanerManager_max_dirty_percent",
                          "The largest dirty share (percent) of any compacted log, at the last look")
RECOPY_PERCENT = Gauge("kafka_log_LogCleaner_cleaner_recopy_percent",
                       "Bytes written as a percentage of bytes read by the last clean")
MAX_CLEAN_TIME = Gauge("kafka_log_LogCleaner_max_clean_time_secs", "Duration of the last clean")
MAX_BUFFER_UTILIZATION = Gauge("kafka_log_LogCleaner_max_buffer_utilization_percent",
                               "How full the last clean's key map got (percent of its capacity)")
UNCLEANABLE_PARTITIONS = Gauge("kafka_log_LogCleanerManager_uncleanable_partitions_count",
                               "Compacted logs left alone because their data could not be read")
CLEANER_BYTES_READ = Counter("minikafka_log_cleaner_bytes_read", "Bytes of segments the cleaners read")
CLEANER_BYTES_WRITTEN = Counter("minikafka_log_cleaner_bytes_written", "Bytes of cleaned segments the cleaners wrote")
CLEANS = Counter("minikafka_log_cleaner_cleans", "Cleans finished, by outcome", ["outcome"])


@dataclass(frozen=True)
class CleanerConfig:
    enabled: bool = True
    threads: int = 1
    backoff_ms: int = 15_000
    dedupe_buffer_bytes: int = 128 * 1024 * 1024
    load_factor: float = 0.9
    io_bytes_per_second: float = UNLIMITED_IO

    @classmethod
    def from_broker(cls, config: Any) -> CleanerConfig:
        return cls(enabled=config["log.cleaner.enable"], threads=config["log.cleaner.threads"],
                   backoff_ms=config["log.cleaner.backoff.ms"],
                   dedupe_buffer_bytes=config["log.cleaner.dedupe.buffer.size"],
                   load_factor=config["log.cleaner.io.buffer.load.factor"],
                   io_bytes_per_second=config["log.cleaner.io.max.bytes.per.second"])

    @property
    def map_capacity(self) -> int:
        """Keys one clean's map holds (the buffer is shared by the cleans at once, as Kafka's threads
        share it)."""
        return max(int(self.dedupe_buffer_bytes / self.threads / MAP_ENTRY_BYTES * self.load_factor), 1)


# ---- what a clean works on: built on the event loop, sent to the clean's process --------------------

@dataclass(frozen=True)
class SourceSegment:
    """A sealed segment as a clean's process reads it: its path, and its size and offsets when
    the clean began (if its log changes meanwhile, the event loop drops the clean)."""

    base_offset: int
    path: str
    size: int
    next_offset: int


@dataclass
class CleanStats:
    dirty_bytes: int = 0  # of the part mapped: what this clean compacted for the first time
    map_bytes_read: int = 0
    bytes_read: int = 0  # by the rewrite
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    map_utilization: float = 0.0
    # The earliest time a tombstone written by this clean may go (None: it wrote none).
    delete_horizon_ms: int | None = None
    # The longest its partition waited for a swap (the event loop's part of a clean).
    longest_swap_s: float = 0.0


@dataclass(frozen=True)
class CleanRequest:
    """Everything a clean's process needs: plain values only."""

    dir_path: str
    log_dir: str
    sources: list[SourceSegment]  # the sealed segments below the first uncleanable offset's segment
    first_dirty: int
    first_uncleanable: int
    map_capacity: int
    segment_bytes: int
    index_interval_bytes: int
    producer_last_offsets: dict[int, int]
    delete_retention_ms: int
    now_ms: int
    # The aborted transactions of the segments (from their .txnindex), by segment base offset:
    # their records are neither mapped nor kept, and the cleaned copy indexes them again.
    aborted_txns: dict[int, list[AbortedTxn]] = field(default_factory=dict)

    def aborted(self, header: BatchHeader) -> bool:
        """Whether the batch belongs to an aborted transaction."""
        return header.is_transactional and not header.is_control and any(
            t.producer_id == header.producer_id and t.first_offset <= header.base_offset <= t.last_offset
            for txns in self.aborted_txns.values() for t in txns)


@dataclass(frozen=True)
class CleanProcess:
    """A clean's process and its two pipes: one request in, one answer out."""

    process: BaseProcess
    requests: Connection
    answers: Connection

    def close_pipes(self) -> None:
        self.requests.close()
        self.answers.close()


@dataclass
class CleanResult:
    """What a clean's process did: where mapping stopped, and the groups it wrote as .cleaned
    files (the base offsets of the segments each replaces)."""

    map_end: int
    groups: list[list[int]]
    stats: CleanStats


class _Abandoned(Exception):
    """The clean must stop: the cleaner is stopping, or its log changed under it."""


# ---- the clean's process --------------------------------------------------------------------------

def _batches(source: SourceSegment, throttle: Throttle) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every batch of a segment, whole."""
    fd = os.open(source.path, os.O_RDONLY)
    try:
        position = 0
        while position + BATCH_HEADER_SIZE <= source.size:
            header = parse_batch_header(os.pread(fd, BATCH_HEADER_SIZE, position))
            end = position + header.batch_length + LOG_OVERHEAD
            if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or end > source.size:
                raise CorruptRecordError(f"batch at position {position} of segment {source.base_offset} runs past "
                                         "its end")
            throttle.acquire_blocking(header.size)
            data = os.pread(fd, header.size, position)
            if len(data) != header.size:
                raise CorruptRecordError(f"segment {source.base_offset} ended inside the batch at {position}")
            yield header, data
            position = end
    finally:
        os.close(fd)


def _section(header: BatchHeader, data: bytes) -> bytes:
    return decompress(data[BATCH_HEADER_SIZE:], header.compression)


def _map_dirty_part(request: CleanRequest, offset_map: OffsetMap, throttle: Throttle, stats: CleanStats) -> int:
    """Map the latest offset of each key in the dirty part; returns where mapping stopped (its
    end, or the first offset whose key found the map full). Aborted transactions are not mapped:
    their records never hide a committed value."""
    start, end = request.first_dirty, request.first_uncleanable
    for source in request.sources:
        if source.next_offset <= start:
            continue  # wholly in the clean part
        for header, data in _batches(source, throttle):
            stats.map_bytes_read += header.size
            if header.last_offset < start or header.is_control or request.aborted(header):
                continue
            if header.base_offset >= end:
                return end
            stats.dirty_bytes += header.size
            full_at = offset_map.put_batch(header.base_offset, record_keys(_section(header, data), header), start, end)
            if full_at is not None:
                return full_at
    return end


@dataclass
class _CleanedWriter:
    """The ``.cleaned`` files of one group: the .log and its two indexes, built as Segment does."""

    stem: str
    base_offset: int
    index_interval_bytes: int
    guard: DirGuard
    fd: int = -1
    size: int = 0
    index_offsets: list[int] = field(default_factory=list)
    index_positions: list[int] = field(default_factory=list)
    time_stamps: list[int] = field(default_factory=list)
    time_offsets: list[int] = field(default_factory=list)
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    bytes_since_index_entry: int = 0

    def open(self) -> None:
        self.fd = os.open(self.stem + LOG_SUFFIX + CLEANED_SUFFIX, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def write(self, header: BatchHeader, batch: bytes) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = header.max_timestamp, header.last_offset
        if self.bytes_since_index_entry > self.index_interval_bytes:
            self.index_offsets.append(header.last_offset)
            self.index_positions.append(self.size)
            if self.max_timestamp > (self.time_stamps[-1] if self.time_stamps else -1):
                self.time_stamps.append(self.max_timestamp)
                self.time_offsets.append(self.offset_of_max_timestamp)
            self.bytes_since_index_entry = 0
        view = memoryview(batch)
        while view:
            view = view[os.pwrite(self.fd, view, self.size + len(batch) - len(view)):]
        self.size += len(batch)
        self.bytes_since_index_entry += len(batch)

    def finish(self) -> None:
        """Write the indexes and fsync the three files."""
        if self.max_timestamp > (self.time_stamps[-1] if self.time_stamps else -1):
            self.time_stamps.append(self.max_timestamp)
            self.time_offsets.append(self.offset_of_max_timestamp)
        os.fsync(self.fd)
        offset_index = OffsetIndex(self.stem + INDEX_SUFFIX + CLEANED_SUFFIX, self.base_offset, self.guard)
        offset_index.replace(self.index_offsets, self.index_positions)
        time_index = TimeIndex(self.stem + TIME_INDEX_SUFFIX + CLEANED_SUFFIX, self.base_offset, self.guard)
        time_index.replace(self.time_stamps, self.time_offsets)
        for index_file in (offset_index.file, time_index.file):
            index_file.flush()
            index_file.close()

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            with contextlib.suppress(OSError):
                os.close(fd)


def _clean_group(group: list[SourceSegment], request: CleanRequest, offset_map: OffsetMap, map_end: int,
                 throttle: Throttle, stats: CleanStats) -> None:
    """Write the cleaned copy of ``group`` as ``<first base>.{log,index,timeindex}.cleaned``."""
    base = group[0].base_offset
    # A private failure channel: an OSError reaches the event loop, which reports the dir itself.
    guard = DirGuard(request.log_dir, LogDirFailureChannel())
    writer = _CleanedWriter(os.path.join(request.dir_path, segment_name(base)), base, request.index_interval_bytes,
                            guard)
    writer.open()
    try:
        for source in group:
            for header, data in _batches(source, throttle):
                stats.bytes_read += header.size
                kept = _cleaned_batch(header, data, offset_map, map_end, request, stats)
                if kept is not None:
                    throttle.acquire_blocking(len(kept))
                    writer.write(parse_batch_header(kept), kept)
                    stats.bytes_written += len(kept)
        writer.finish()
    finally:
        writer.close()
    aborted = [txn for source in group for txn in request.aborted_txns.get(source.base_offset, [])]
    if aborted:
        TransactionIndex(writer.stem + TXN_INDEX_SUFFIX + CLEANED_SUFFIX, guard).replace(aborted)


def _cleaned_batch(header: BatchHeader, data: bytes, offset_map: OffsetMap, map_end: int, request: CleanRequest,
                   stats: CleanStats) -> bytes | None:
    """What of one batch a clean keeps: the batch as it was, rebuilt with fewer records, an empty
    batch (its producer's last), or nothing."""
    if header.is_control:
        return data  # transaction markers stay: a read_committed reader may still need them
    if request.first_dirty <= header.base_offset and header.last_offset < map_end \
            and not offset_map.holds_latest(header.base_offset, header.last_offset) \
            and request.producer_last_offsets.get(header.producer_id) != header.last_offset:
        # Every key of the batch was mapped and has a later record: nothing of it stays, which
        # its offsets alone tell (most batches of a log of updates, read without their records).
        stats.records_read += header.records_count
        return None
    section = _section(header, data)
    spans = record_spans(section, header)
    stats.records_read += len(spans)
    horizon = header.delete_horizon_ms
    keep_tombstones = horizon is None or request.now_ms < horizon
    aborted = request.aborted(header)
    kept = []
    for span in spans:
        offset = header.base_offset + span.offset_delta
        if aborted:
            continue  # no reader ever sees them
        if offset >= map_end:
            kept.append(span)  # past what was mapped: the next clean decides
        elif span.key is not None and offset >= offset_map.get(offset_map.digest(span.key)) \
                and (span.has_value or keep_tombstones):
            kept.append(span)
    stats.records_kept += len(kept)
    set_horizon = horizon is None and any(not span.has_value for span in kept)
    if set_horizon:
        horizon = request.now_ms + request.delete_retention_ms
    if horizon is not None and any(not span.has_value for span in kept):
        stats.delete_horizon_ms = horizon if stats.delete_horizon_ms is None else min(stats.delete_horizon_ms,
                                                                                        horizon)
    if len(kept) == len(spans) and not set_horizon:
        return data
    if not kept and request.producer_last_offsets.get(header.producer_id) != header.last_offset:
        return None
    return batch_with_records(header, section, kept, horizon if set_horizon else None)


def group_segments(segments: list[SourceSegment], max_bytes: int) -> list[list[SourceSegment]]:
    """Consecutive segments cleaned into one when together they fit segment.bytes and their
    offsets fit an int32 from the first base (Kafka's groupSegmentsBySize)."""
    groups: list[list[SourceSegment]] = []
    for segment in segments:
        current = groups[-1] if groups else None
        if current is not None and sum(s.size for s in current) + segment.size <= max_bytes \
                and segment.next_offset - 1 - current[0].base_offset <= INT32_MAX:
            current.append(segment)
        else:
            groups.append([segment])
    return groups


def clean_log(request: CleanRequest, throttle: Throttle) -> CleanResult:
    """Map the dirty part, then write every group up to where mapping stopped as .cleaned files."""
    stats = CleanStats()
    offset_map = OffsetMap(request.map_capacity)
    map_end = _map_dirty_part(request, offset_map, throttle, stats)
    offset_map.mapped()
    stats.map_utilization = offset_map.utilization
    if map_end <= request.first_dirty < request.first_uncleanable:
        raise CorruptRecordError(f"log.cleaner.dedupe.buffer.size holds {offset_map.capacity} keys, too few for "
                                 "one record of the dirty part")
    groups = group_segments([s for s in request.sources if s.base_offset < max(map_end, request.first_dirty + 1)],
                            request.segment_bytes)
    written: list[list[int]] = []
    try:
        for group in groups:
            written.append([s.base_offset for s in group])
            _clean_group(group, request, offset_map, map_end, throttle, stats)
    except BaseException:
        for bases in written:
            remove_cleaned_files(request.dir_path, bases[0])
        raise
    return CleanResult(map_end, written, stats)


def _clean_when_asked(requests: Connection, answer: Connection, throttle: Throttle, broker_pid: int) -> None:
    """The entry point of a clean's process: it waits for its one request (it may be started
    before there is one), then sends its result, or what went wrong, down the other pipe. The
    request pipe closed without a request (the cleaner stopping): it exits."""
    _die_with_the_broker(broker_pid)
    try:
        request: CleanRequest = requests.recv()
    except EOFError:
        answer.close()
        return
    finally:
        requests.close()
    try:
        answer.send(("done", clean_log(request, throttle)))
    except OSError as exc:
        answer.send(("os", exc.errno, exc.strerror, exc.filename))
    except KafkaStorageError as exc:  # from the indexes' private guard: the OSError is its cause
        cause = exc.cause if isinstance(exc.cause, OSError) else OSError(0, str(exc))
        answer.send(("os", cause.errno, cause.strerror, cause.filename))
    except CorruptRecordError as exc:
        answer.send(("corrupt", str(exc)))
    finally:
        answer.close()


def _die_with_the_broker(broker_pid: int) -> None:
    """Linux: this process is killed with its broker (kill -9 included), so that it never writes
    .cleaned files beside the broker's next run."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != broker_pid:  # the broker died before that took effect
        os._exit(1)


def _answered(readable: asyncio.Future[None]) -> None:
    if not readable.done():
        readable.set_result(None)


def remove_cleaned_files(dir_path: str, base: int) -> None:
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(dir_path, segment_name(base) + suffix + CLEANED_SUFFIX))


# ---- the event loop side --------------------------------------------------------------------------

@dataclass(frozen=True)
class Cleanable:
    """A compacted log's state as the cleaner sees it when choosing."""

    log: Log
    first_dirty: int
    first_uncleanable: int
    dirty_ratio: float
    overdue: bool  # dirty records older than max.compaction.lag.ms
    tombstones_due: bool  # tombstones past their delete horizon


def cleanable(log_: Log, now_ms: int, tombstone_horizon_ms: int | None) -> Cleanable | None:
    """How dirty a compacted log is (None: nothing can be cleaned): the dirty part runs from its
    cleaner checkpoint to the first uncleanable offset (the active segment, the last stable offset,
    the first segment with records younger than min.compaction.lag.ms)."""
    config = log_.config
    if not config.compact or len(log_.segments) < 2:
        return None
    first_dirty = min(max(log_.clean_until, log_.log_start_offset), log_.log_end_offset)
    first_uncleanable = min(log_.segments[-1].base_offset, log_.last_stable_offset)
    sealed = [s for s in log_.segments[:-1] if s.next_offset > first_dirty and s.base_offset < first_uncleanable]
    if config.min_compaction_lag_ms > 0:
        for segment in sealed:
            if segment.largest_timestamp > now_ms - config.min_compaction_lag_ms:
                first_uncleanable = min(first_uncleanable, segment.base_offset)
                break
    first_uncleanable = max(first_uncleanable, first_dirty)
    clean_bytes = log_.bytes_below(first_dirty) - log_.bytes_below(log_.log_start_offset)
    dirty_bytes = log_.bytes_below(first_uncleanable) - log_.bytes_below(first_dirty)
    ratio = dirty_bytes / (clean_bytes + dirty_bytes) if dirty_bytes > 0 else 0.0
    overdue = False
    if dirty_bytes > 0 and config.max_compaction_lag_ms < now_ms:
        first_times = [t for s in sealed if s.base_offset < first_uncleanable
                       and (t := s.first_batch_timestamp()) is not None and t > 0]
        overdue = bool(first_times) and min(first_times) < now_ms - config.max_compaction_lag_ms
    tombstones_due = tombstone_horizon_ms is not None and tombstone_horizon_ms <= now_ms and clean_bytes > 0
    return Cleanable(log_, first_dirty, first_uncleanable, ratio, overdue, tombstones_due)


@dataclass
class CleanJob:
    """One clean of one log, from its choice to its checkpoint. Event loop only; its process gets
    ``request``, plain values."""

    log: Log
    generation: int
    segments: dict[int, Segment]  # the sealed segments its process reads, by base offset
    request: CleanRequest
    stats: CleanStats = field(default_factory=CleanStats)

    @property
    def key(self) -> TopicPartition:
        return self.log.topic, self.log.partition


class LogCleaner:
    """Cleans the compacted logs of a LogManager (see the module's docstring). Event loop only;
    the reading, mapping and writing of each clean run in a process of its own."""

    def __init__(self, log_manager: LogManager, failure_channel: LogDirFailureChannel, config: CleanerConfig,
                 now_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.log_manager = log_manager
        self.failure_channel = failure_channel
        self.config = config
        self.now_ms = now_ms
        self._context: SpawnContext = multiprocessing.get_context(PROCESS_START_METHOD)
        self.throttle = Throttle(config.io_bytes_per_second, self._context)
        self._stop = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._running: dict[str, asyncio.Task[None]] = {}  # log dir -> its clean
        self._processes: dict[TopicPartition, BaseProcess] = {}
        # A clean's process started ahead of its clean (see _clean_process), once cleans happen.
        self._spare: CleanProcess | None = None
        self.in_progress: dict[TopicPartition, CleanJob] = {}
        self.uncleanable: dict[TopicPartition, str] = {}  # -> why
        self._horizons: dict[TopicPartition, int] = {}  # earliest tombstone horizon of each log

    # ---- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        if self.config.enabled:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="log-cleaner")

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        """Abandon the cleans under way: their processes are stopped, their .cleaned files go."""
        self._stop = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for process in list(self._processes.values()):
            process.terminate()
        if self._spare is not None:
            spare, self._spare = self._spare, None
            spare.process.terminate()  # it holds nothing of a clean yet
            spare.close_pipes()
            await asyncio.to_thread(spare.process.join)
        await self.wait_for_cleans()

    async def wait_for_cleans(self) -> None:
        """Until the cleans under way have ended (swapped in, abandoned or failed)."""
        while self._running:
            await asyncio.gather(*list(self._running.values()), return_exceptions=True)

    async def _run(self) -> None:
        while not self._stop:
            self.clean_what_is_due()
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.backoff_ms / 1000):
                    await self._wake.wait()

    # ---- choosing -----------------------------------------------------------------------------
    def candidates(self) -> list[Cleanable]:
        """Every compacted log that may be cleaned now (not moving, not already being cleaned)."""
        now = self.now_ms()
        found = []
        live_dirs = set(self.log_manager.live_dirs)
        for key, log_ in list(self.log_manager.logs.items()):
            # Compacted logs with a sealed segment first: every log is looked at each backoff.
            if not log_.config.compact or len(log_.segments) < 2:
                continue
            if key in self.in_progress or key in self.uncleanable or key in self.log_manager.future_logs \
                    or log_.log_dir not in live_dirs or log_.closed:
                continue
            try:
                state = cleanable(log_, now, self._horizons.get(key))
            except KafkaStorageError as exc:
                log.error("cannot look at %s for cleaning: %s", log_.name, exc)
                continue
            if state is not None:
                found.append(state)
        return found

    def clean_what_is_due(self) -> list[TopicPartition]:
        """Start a clean in every idle log dir that has a log due (at most log.cleaner.threads in
        all); returns the partitions started."""
        found = self.candidates()
        MAX_DIRTY_PERCENT.set(max((c.dirty_ratio for c in found), default=0.0) * 100)
        started = []
        for candidate in sorted(found, key=lambda c: (not c.overdue, -c.dirty_ratio)):
            log_dir = candidate.log.log_dir
            if len(self._running) >= self.config.threads or log_dir in self._running:
                continue
            due = candidate.overdue or (candidate.dirty_ratio > 0
                                        and candidate.dirty_ratio >= candidate.log.config.min_cleanable_dirty_ratio)
            if not due and not candidate.tombstones_due:
                continue
            job = self._job(candidate)
            self.in_progress[job.key] = job
            task = asyncio.get_running_loop().create_task(self._clean(job), name=f"clean-{job.log.name}")
            self._running[log_dir] = task
            task.add_done_callback(functools.partial(self._done, log_dir, job.key))
            started.append(job.key)
        return started

    def _done(self, log_dir: str, key: TopicPartition, _task: asyncio.Task[None]) -> None:
        self._running.pop(log_dir, None)
        self.in_progress.pop(key, None)
        if not self._stop:
            if self._spare is None:
                self._spare = self._start_clean_process()
            self._wake.set()  # another log of this dir may be waiting

    def _job(self, candidate: Cleanable) -> CleanJob:
        log_ = candidate.log
        config = log_.config
        segments = [s for s in log_.segments[:-1] if s.base_offset < max(candidate.first_uncleanable,
                                                                         candidate.first_dirty + 1)]
        request = CleanRequest(
            log_.dir_path, log_.log_dir, [SourceSegment(s.base_offset, s.log_path, s.size, s.next_offset)
                                          for s in segments],
            candidate.first_dirty, candidate.first_uncleanable, self.config.map_capacity, config.segment_bytes,
            config.index_interval_bytes, log_.producer_state.last_offsets(), config.delete_retention_ms,
            self.now_ms(), {s.base_offset: list(s.txn_index.entries) for s in segments if s.txn_index.entries})
        return CleanJob(log_, log_.segments_generation, {s.base_offset: s for s in segments}, request)

    # ---- one clean ----------------------------------------------------------------------------
    def _current(self, job: CleanJob) -> bool:
        """Whether the log is still as the job found it (else what the job wrote is dropped)."""
        log_ = job.log
        return (not self._stop and not log_.closed and self.log_manager.logs.get(job.key) is log_
                and job.key not in self.log_manager.future_logs and log_.segments_generation == job.generation
                and log_.log_dir in self.log_manager.live_dirs)

    def _start_clean_process(self) -> CleanProcess:
        requests_reader, requests = self._context.Pipe(duplex=False)
        answers, answer_writer = self._context.Pipe(duplex=False)
        process = self._context.Process(target=_clean_when_asked,
                                        args=(requests_reader, answer_writer, self.throttle, os.getpid()),
                                        name="log-cleaner", daemon=True)
        process.start()
        requests_reader.close()
        answer_writer.close()
        return CleanProcess(process, requests, answers)

    def _clean_process(self) -> CleanProcess:
        """A process for the next clean: the spare started when the last clean ended, else a new
        one. A new interpreter importing what a clean needs takes about 0.3 s, as long as a whole
        clean of hundreds of MiB takes; the spare has done that by the time it is asked."""
        spare, self._spare = self._spare, None
        if spare is not None and spare.process.is_alive():
            return spare
        if spare is not None:  # killed while it waited: nothing of a clean was in it
            spare.close_pipes()
            spare.process.join(0)
        return self._start_clean_process()

    async def _in_process(self, job: CleanJob) -> CleanResult:
        """Run the clean's reading, mapping and writing in a process of its own (no GIL shared
        with the event loop) and wait for its answer without blocking the loop."""
        clean = self._clean_process()
        process, reader = clean.process, clean.answers
        self._processes[job.key] = process
        loop = asyncio.get_running_loop()
        try:
            with contextlib.suppress(OSError):  # a process that died is found at its answer
                clean.requests.send(job.request)
            clean.requests.close()
            readable: asyncio.Future[None] = loop.create_future()
            loop.add_reader(reader.fileno(), _answered, readable)
            try:
                await readable
                answer = reader.recv()
            finally:
                loop.remove_reader(reader.fileno())
        except EOFError:
            raise _Abandoned(f"its process ended with exit code {process.exitcode} and no answer") from None
        finally:
            reader.close()
            del self._processes[job.key]
            await asyncio.to_thread(process.join)
        if answer[0] == "os":
            raise OSError(answer[1], answer[2], answer[3])
        if answer[0] == "corrupt":
            raise CorruptRecordError(answer[1])
        result: CleanResult = answer[1]
        return result

    async def _clean(self, job: CleanJob) -> None:
        log_ = job.log
        started = time.monotonic()
        swapped = 0
        groups: list[list[int]] = []
        try:
            result = await self._in_process(job)
            job.stats, groups = result.stats, result.groups
            hook_point("clean.cleaned_written")
            for bases in groups:
                if not self._current(job):
                    raise _Abandoned("the log changed")
                swap_started = time.monotonic()
                log_.replace_segments([job.segments[base] for base in bases], self.now_ms(), sync=False)
                job.stats.longest_swap_s = max(job.stats.longest_swap_s, time.monotonic() - swap_started)
                swapped += 1
                job.generation = log_.segments_generation
                await asyncio.sleep(0)  # appends and reads go on between two swaps
            if swapped:
                await asyncio.to_thread(fsync_dir_path, log_.dir_path)
            log_.clean_until = max(log_.clean_until, min(result.map_end, log_.log_end_offset))
            self.log_manager.write_cleaner_checkpoint(log_.log_dir)
            hook_point("clean.checkpointed")
        except _Abandoned as exc:
            CLEANS.labels("abandoned").inc()
            log.info("cleaning of %s abandoned: %s", log_.name, exc)
            return
        except KafkaStorageError as exc:  # from a swap: reported by the guard that raised it
            CLEANS.labels("failed").inc()
            log.error("cleaning of %s failed: %s", log_.name, exc)
            return
        except OSError as exc:
            CLEANS.labels("failed").inc()
            if self._current(job):
                log.error("cleaning of %s failed: I/O error in log dir %s: %s", log_.name, log_.log_dir, exc)
                self.failure_channel.report(log_.log_dir, exc)
            return
        except CorruptRecordError as exc:
            CLEANS.labels("failed").inc()
            if self._current(job):
                self.uncleanable[job.key] = str(exc)
                UNCLEANABLE_PARTITIONS.set(len(self.uncleanable))
                log.error("%s cannot be cleaned and is left alone until the broker restarts: %s", log_.name, exc)
            return
        finally:
            for bases in groups[swapped:]:
                remove_cleaned_files(log_.dir_path, bases[0])
        self._finished(job, time.monotonic() - started)

    def _finished(self, job: CleanJob, seconds: float) -> None:
        stats = job.stats
        CLEANS.labels("done").inc()
        CLEANER_BYTES_READ.inc(stats.map_bytes_read + stats.bytes_read)
        CLEANER_BYTES_WRITTEN.inc(stats.bytes_written)
        RECOPY_PERCENT.set(100 * stats.bytes_written / stats.bytes_read if stats.bytes_read else 0)
        MAX_CLEAN_TIME.set(seconds)
        MAX_BUFFER_UTILIZATION.set(100 * stats.map_utilization)
        if stats.delete_horizon_ms is not None:
            self._horizons[job.key] = stats.delete_horizon_ms
        else:
            self._horizons.pop(job.key, None)
        kept = 100 * stats.bytes_written / stats.bytes_read if stats.bytes_read else 0
        log.info("cleaned %s in %s: %s of dirty log compacted in %.2f s (%s/s), offsets below %d are clean; "
                 "rewrote %s (%d records) into %s (%d records: %.0f%% of the bytes kept), key map %.0f%% full, "
                 "longest swap %.1f ms", job.log.name, job.log.log_dir, format_bytes(stats.dirty_bytes), seconds,
                 format_bytes(stats.dirty_bytes / seconds if seconds > 0 else 0), job.log.clean_until,
                 format_bytes(stats.bytes_read), stats.records_read, format_bytes(stats.bytes_written),
                 stats.records_kept, kept, 100 * stats.map_utilization, 1000 * stats.longest_swap_s)
