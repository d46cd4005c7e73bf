"""One log segment: ``<base>.log`` plus its sparse ``.index`` and ``.timeindex``.

The index files exist only once they have an entry, and their fds are open only while the
segment is the active one (a sealed segment's reads use the indexes' in-memory copies): a
partition with one small segment holds one fd.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator

from minikafka.storage.dir_io import DirGuard
from minikafka.storage.errors import LegacyMessageFormatError
from minikafka.storage.index import OffsetIndex, TimeIndex
from minikafka.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from protocol.record_codec import (
    ControlMarker,
    Record,
    decode_control_marker,
    decode_records_section,
    decompress,
)
from protocol.records import (
    BATCH_HEADER_SIZE,
    INT32_MAX,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    CorruptRecordError,
    UnsupportedMagic,
    parse_batch_header,
    validate_batch,
)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
# A log cleaner writes a segment's replacement as ``.cleaned`` files and renames them ``.swap``
# once complete: the ``.log.swap`` rename decides the swap (Kafka's suffixes).
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

# Read-ahead when walking batch headers: large enough to cover a whole index interval of
# small batches in one pread, small enough not to drag in much record data.
_SCAN_CHUNK = 16 * 1024
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
# How many recent batches the active segment remembers (two int64 each); a consumer lagging
# further behind costs an index lookup plus a scan of at most one index interval of headers.
_RECENT_BATCHES = 4096

# A message of the formats before record batches (magic 0 and 1): offset, size, then a CRC-32
# of the rest, from the magic byte on. Its smallest body: CRC, magic, attributes, the lengths of
# a null key and value, and (magic 1) a timestamp.
_LEGACY_HEAD = struct.Struct(">qiI")
_LEGACY_MIN_SIZE = {0: 14, 1: 22}
_LEGACY_PEEK = 64  # bytes read from a segment's start to tell its format

# The batch timestamp type whose records all carry the batch's time (Kafka's numbering).
LOG_APPEND_TIME = 1


def close_fds(fds: list[int]) -> None:
    """Close every fd, whatever fails (duplicates handed to a thread, or on an error path)."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def sync_and_close_fds(fds: list[int]) -> None:
    """fsync every fd, then close them all (closed also when an fsync fails); for a thread."""
    try:
        for fd in fds:
            os.fsync(fd)
    finally:
        close_fds(fds)


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class FileSlice:
    """A byte range of a segment file, holding its own duplicate of the file's fd.

    Owned by whoever received it from Log.read; that owner must ``close`` it (the server
    does after os.sendfile).  Because the fd is a dup, the slice stays readable after the
    segment is closed, renamed or unlinked by retention.
    """

    __slots__ = ("fd", "position", "size", "guard")

    def __init__(self, fd: int, position: int, size: int, guard: DirGuard) -> None:
        self.fd = fd
        self.position = position
        self.size = size
        self.guard = guard

    def read_bytes(self) -> bytes:
        if self.fd < 0:
            raise ValueError("FileSlice is closed")
        parts: list[bytes] = []
        position, remaining = self.position, self.size
        with self.guard:
            while remaining > 0:
                chunk = os.pread(self.fd, remaining, position)
                if not chunk:
                    raise CorruptRecordError(f"segment file ended {remaining} bytes early")
                parts.append(chunk)
                position += len(chunk)
                remaining -= len(chunk)
        return b"".join(parts)

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> FileSlice:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileSlice(fd={self.fd}, position={self.position}, size={self.size})"


def refuse_legacy_message(data: bytes, off: int, pos: int, limit: int, read: Callable[[int, int], bytes],
                           path: str) -> None:
    """Raise LegacyMessageFormatError if a whole message of the legacy formats, its CRC right,
    starts at ``data[off:]`` (read from position ``pos`` of ``path``, whose data ends at ``limit``;
    ``read(pos, size)`` reads more of it). Anything else with magic 0 or 1 there (zeros past a crash's torn write) is
    left to the corruption checks, which cut a torn tail: legacy data must never be taken for
    one and cut away."""
    if len(data) - off <= MAGIC_OFFSET or data[off + MAGIC_OFFSET] not in _LEGACY_MIN_SIZE:
        return
    _, size, crc = _LEGACY_HEAD.unpack_from(data, off)
    magic = data[off + MAGIC_OFFSET]
    end = LOG_OVERHEAD + size
    if size < _LEGACY_MIN_SIZE[magic] or pos + end > limit:
        return
    if off + end > len(data):
        data, off = read(pos, end), 0
    if len(data) - off >= end and zlib.crc32(data[off + MAGIC_OFFSET:off + end]) == crc:
        raise LegacyMessageFormatError(
            f"{path} holds message format v{magic} (before Kafka 0.11) at position {pos}: minikafka reads only "
            "record batches (v2); run this broker as Kafka until that data has expired or been "
            "rewritten")


class _BatchScan:
    """Walks the batch headers of a segment file from a position, reading in chunks.

    After iteration, ``end`` is the position just past the last batch yielded and
    ``error`` says why the walk stopped early (None if it reached ``limit``).
    """

    def __init__(self, fd: int, start: int, limit: int, guard: DirGuard, validate: bool, path: str) -> None:
        self.fd = fd
        self.path = path
        self.start = start
        self.limit = limit
        self.guard = guard
        self.validate = validate
        self.end = start
        self.error: str | None = None

    def __iter__(self) -> Iterator[tuple[int, BatchHeader]]:
        pos = self.start
        chunk = b""
        chunk_start = pos
        while pos < self.limit:
            off = pos - chunk_start
            if off + BATCH_HEADER_SIZE > len(chunk):
                chunk = self._read(pos, _SCAN_CHUNK)
                chunk_start, off = pos, 0
                if len(chunk) < BATCH_HEADER_SIZE:
                    # A legacy message may be shorter than a batch header.
                    refuse_legacy_message(chunk, 0, pos, self.limit, self._read, self.path)
                    self.error = f"torn batch header at position {pos}"
                    return
            refuse_legacy_message(chunk, off, pos, self.limit, self._read, self.path)
            header = parse_batch_header(chunk, off)
            end = pos + header.batch_length + LOG_OVERHEAD
            if header.batch_length < _MIN_BATCH_LENGTH or end > self.limit:
                self.error = f"batch at position {pos} runs past the end of the segment"
                return
            if self.validate:
                if off + header.size > len(chunk):
                    chunk = self._read(pos, max(_SCAN_CHUNK, header.size))
                    chunk_start, off = pos, 0
                try:
                    validate_batch(chunk, off, header, exact_count=False)
                except (CorruptRecordError, UnsupportedMagic) as exc:
                    self.error = str(exc)
                    return
            elif header.magic != 2:
                self.error = f"batch at position {pos} has magic {header.magic}"
                return
            self.end = end
            yield pos, header
            pos = end

    def _read(self, pos: int, size: int) -> bytes:
        size = min(size, self.limit - pos)
        with self.guard:
            return os.pread(self.fd, size, pos)


def last_offset_in_file(path: str, guard: DirGuard) -> int:
    """The last offset of the last whole batch of a segment file (-1 if it holds none)."""
    with guard:
        fd = os.open(path, os.O_RDONLY)
    try:
        with guard:
            size = os.fstat(fd).st_size
        last = -1
        for _, header in _BatchScan(fd, 0, size, guard, validate=False, path=path):
            last = header.last_offset
        return last
    finally:
        os.close(fd)


class Segment:
    """Owns one segment's files (the .log; its indexes once they have entries), their fds and
    the in-memory copy of its indexes.

    Only the Log that holds it touches it, from the broker's event-loop thread; it is not
    thread-safe.  Appends go to the end of the .log with pwrite (no fsync: ``flush`` does
    that).  Non-active segments load their indexes lazily, on the first lookup.
    """

    def __init__(self, dir_path: str, base_offset: int, guard: DirGuard, index_interval_bytes: int) -> None:
        self.dir_path = dir_path
        self.base_offset = base_offset
        self.guard = guard
        self.index_interval_bytes = index_interval_bytes
        stem = os.path.join(dir_path, segment_name(base_offset))
        self.log_path = stem + LOG_SUFFIX
        self.offset_index = OffsetIndex(stem + INDEX_SUFFIX, base_offset, guard)
        self.time_index = TimeIndex(stem + TIME_INDEX_SUFFIX, base_offset, guard)
        self.txn_index = TransactionIndex(stem + TXN_INDEX_SUFFIX, guard)
        self._log_fd = -1
        self.size = 0
        # Where the Log last started the writeback of this .log up to (minikafka.storage.writeback).
        self.written_back_to = 0
        self._loaded = False
        self._next_offset = base_offset
        self._max_timestamp = -1
        self._offset_of_max_timestamp = -1
        # The most recent batches (last offset, start position), so that a fetch at or near
        # the end of the active segment, the common case, is answered without any I/O.
        # Every batch whose last offset is > _recent_floor is listed.
        self._recent_last_offsets = array("q")
        self._recent_positions = array("q")
        self._recent_floor = base_offset - 1
        self._bytes_since_index_entry = 0
        # Time the segment started to fill, for segment.ms rolling.
        self.rolling_base_ms: int | None = None

    # ---- opening -------------------------------------------------------------------------

    @classmethod
    def create(cls, dir_path: str, base_offset: int, guard: DirGuard, index_interval_bytes: int) -> Segment:
        segment = cls(dir_path, base_offset, guard, index_interval_bytes)
        with guard:
            segment._log_fd = os.open(segment.log_path, os.O_RDWR | os.O_CREAT, 0o644)
            segment.size = os.fstat(segment._log_fd).st_size
        if segment.size:
            segment.recover()
        else:
            # Empty indexes, and no files for them: none can be left over from an earlier
            # segment at this base (a deleted segment's go with it, a restart drops orphans).
            segment.offset_index.file.known_absent = segment.time_index.file.known_absent = True
            segment._loaded = True
        return segment

    @classmethod
    def open(cls, dir_path: str, base_offset: int, guard: DirGuard, index_interval_bytes: int) -> Segment:
        """Open an existing segment without reading it; indexes load on first use."""
        segment = cls(dir_path, base_offset, guard, index_interval_bytes)
        with guard:
            segment._log_fd = os.open(segment.log_path, os.O_RDWR)
            segment.size = os.fstat(segment._log_fd).st_size
        return segment

    def refuse_legacy_format(self) -> None:
        """LegacyMessageFormatError if the segment starts with a message of the formats before
        record batches: read at startup from every segment, whose older ones are otherwise
        read only when a consumer asks for them."""
        if not self.size:
            return

        def read(pos: int, size: int) -> bytes:
            with self.guard:
                return os.pread(self._log_fd, size, pos)

        refuse_legacy_message(read(0, _LEGACY_PEEK), 0, 0, self.size, read, self.log_path)

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        if not self.offset_index.load(self.size):
            self._rebuild(validate=False)
            return
        scan = _BatchScan(self._log_fd, self.offset_index.last_position(), self.size, self.guard, False,
                          self.log_path)
        tail = list(scan)
        if scan.error is not None:
            # A segment believed clean holds a broken batch: treat it like a crash tail.
            self.recover()
            return
        if not self.offset_index and tail and tail[-1][0] > self.index_interval_bytes:
            # No offset index (no file), yet the segment is large enough to have entries: the
            # file was lost (a crash before its creation reached the disk), not empty.
            self._rebuild(validate=False)
            return
        next_offset = tail[-1][1].last_offset + 1 if tail else self.base_offset
        if not self.time_index.load(next_offset) or (self.offset_index and not self.time_index):
            # An entry of the offset index comes with one of the time index (unless no batch so
            # far had a timestamp): an empty time index beside it was lost, too.
            self._rebuild(validate=False)
            return
        self._set_tail(tail)
        last = self.time_index.last_entry()
        if last is not None and last[0] > self._max_timestamp:
            self._max_timestamp, self._offset_of_max_timestamp = last
        self._loaded = True
        self.rolling_base_ms = self.first_batch_timestamp()

    def _set_tail(self, tail: list[tuple[int, BatchHeader]]) -> None:
        """Adopt the batches from the last offset-index entry to the end of the file."""
        self._recent_last_offsets = array("q", (header.last_offset for _, header in tail))
        self._recent_positions = array("q", (pos for pos, _ in tail))
        self._recent_floor = (tail[0][1].base_offset if tail else self.base_offset) - 1
        # An empty tail means an empty segment: the first batch is never indexed.
        self._next_offset = tail[-1][1].last_offset + 1 if tail else self.base_offset
        self._bytes_since_index_entry = self.size - self.offset_index.last_position()
        self._max_timestamp, self._offset_of_max_timestamp = -1, -1
        for _, header in tail:
            if header.max_timestamp > self._max_timestamp:
                self._max_timestamp, self._offset_of_max_timestamp = header.max_timestamp, header.last_offset

    def _trim_recent(self, keep: int) -> None:
        drop = len(self._recent_positions) - keep
        if drop > 0:
            self._recent_floor = self._recent_last_offsets[drop - 1]
            del self._recent_last_offsets[:drop]
            del self._recent_positions[:drop]

    def first_batch_timestamp(self) -> int | None:
        """The first batch's max timestamp (else the file's mtime); None for an empty segment."""
        if self.size < BATCH_HEADER_SIZE:
            return None
        with self.guard:
            header = parse_batch_header(os.pread(self._log_fd, BATCH_HEADER_SIZE, 0))
        if header.max_timestamp >= 0:
            return header.max_timestamp
        with self.guard:
            return int(os.fstat(self._log_fd).st_mtime * 1000)

    def _rebuild(self, validate: bool) -> int:
        """Re-derive both indexes and the tail from the .log; truncate after the last good batch.

        Returns the number of bytes cut off.
        """
        scan = _BatchScan(self._log_fd, 0, self.size, self.guard, validate, self.log_path)
        index_offsets: list[int] = []
        index_positions: list[int] = []
        time_stamps: list[int] = []
        time_offsets: list[int] = []
        max_ts, offset_of_max = -1, -1
        bytes_since = 0
        expected = self.base_offset
        tail: list[tuple[int, BatchHeader]] = []
        for pos, header in scan:
            if header.base_offset < expected or header.last_offset - self.base_offset > INT32_MAX:
                scan.end = pos
                scan.error = f"batch at position {pos} has out-of-order offset {header.base_offset}"
                break
            expected = header.last_offset + 1
            if header.max_timestamp > max_ts:
                max_ts, offset_of_max = header.max_timestamp, header.last_offset
            if bytes_since > self.index_interval_bytes:
                index_offsets.append(header.last_offset)
                index_positions.append(pos)
                if max_ts > (time_stamps[-1] if time_stamps else -1):
                    time_stamps.append(max_ts)
                    time_offsets.append(offset_of_max)
                bytes_since = 0
                tail = []
            tail.append((pos, header))
            bytes_since += header.size
        truncated = self.size - scan.end
        if truncated:
            with self.guard:
                os.ftruncate(self._log_fd, scan.end)
            self.size = scan.end
            self.txn_index.truncate_from(expected)
        self.offset_index.replace(index_offsets, index_positions)
        self.time_index.replace(time_stamps, time_offsets)
        self._set_tail(tail)
        if max_ts > self._max_timestamp:
            self._max_timestamp, self._offset_of_max_timestamp = max_ts, offset_of_max
        self._loaded = True
        self.rolling_base_ms = self.first_batch_timestamp()
        return truncated

    def recover(self) -> int:
        """Re-scan every batch (CRC included), cut a torn or corrupt tail, rebuild the indexes.

        Returns the number of bytes truncated; everything before the first bad batch is kept.
        """
        return self._rebuild(validate=True)

    # ---- properties ----------------------------------------------------------------------

    @property
    def next_offset(self) -> int:
        """One past the last offset stored here (the base offset if empty)."""
        self._ensure_loaded()
        return self._next_offset

    @property
    def max_timestamp(self) -> int:
        """Largest batch max-timestamp in the segment, -1 if none."""
        self._ensure_loaded()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        """Last offset of the first batch that reached ``max_timestamp``; -1 if none."""
        self._ensure_loaded()
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What retention compares: the max timestamp, or the file's mtime if there is none."""
        if self.max_timestamp >= 0:
            return self._max_timestamp
        with self.guard:
            return int(os.fstat(self._log_fd).st_mtime * 1000)

    # ---- appending -----------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]], now_ms: int) -> None:
        """Write ``data`` (whole batches, offsets already assigned) at the end of the .log.

        ``batches`` holds (position within data, header) of each batch.  The file size only
        moves once the write succeeded, so a failed write is overwritten by the next one.
        """
        self._ensure_loaded()
        position = self.size
        view = memoryview(data)
        with self.guard:
            while view:
                written = os.pwrite(self._log_fd, view, position)
                view = view[written:]
                position += written
        base = self.size
        for pos, header in batches:
            physical = base + pos
            if header.max_timestamp > self._max_timestamp:
                self._max_timestamp, self._offset_of_max_timestamp = header.max_timestamp, header.last_offset
            if self._bytes_since_index_entry > self.index_interval_bytes:
                self.offset_index.append(header.last_offset, physical)
                self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
                self._bytes_since_index_entry = 0
            self._recent_last_offsets.append(header.last_offset)
            self._recent_positions.append(physical)
            self._bytes_since_index_entry += header.size
        if len(self._recent_positions) > _RECENT_BATCHES:
            self._trim_recent(_RECENT_BATCHES // 2)
        self.size = position
        if batches:
            self._next_offset = batches[-1][1].last_offset + 1
        if self.rolling_base_ms is None:
            self.rolling_base_ms = now_ms

    def fits_offsets(self, last_offset: int) -> bool:
        """Whether ``last_offset`` is still expressible as an int32 relative to the base."""
        return last_offset - self.base_offset <= INT32_MAX

    def on_become_inactive(self, sync_later: bool = False) -> list[int]:
        """Record the segment's max timestamp in the time index (retention reads it) and drop the
        index fds. With ``sync_later``, returns ``fds_to_sync`` (taken before the index fds close)
        for the caller to fsync off the event loop; else nothing."""
        self._ensure_loaded()
        if self._max_timestamp >= 0:
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
        fds = self.fds_to_sync() if sync_later else []
        self.offset_index.file.close()
        self.time_index.file.close()
        # Lagging consumers of an old segment can afford an index lookup; free the memory.
        unindexed = bisect_left(self._recent_positions, self.offset_index.last_position())
        self._trim_recent(len(self._recent_positions) - unindexed)
        return fds

    # ---- lookups -------------------------------------------------------------------------

    def _scan_from(self, position: int, validate: bool = False) -> _BatchScan:
        return _BatchScan(self._log_fd, position, self.size, self.guard, validate, self.log_path)

    def find(self, offset: int) -> int | None:
        """Position of the first batch whose last offset is >= ``offset``; None if past the end."""
        self._ensure_loaded()
        if offset > self._recent_floor:
            i = bisect_left(self._recent_last_offsets, offset)
            return self._recent_positions[i] if i < len(self._recent_positions) else None
        entry = self.offset_index.floor_entry(offset)
        start = entry[1] if entry is not None else 0
        for pos, header in self._scan_from(start):
            if header.last_offset >= offset:
                return pos
        return None

    def boundary_at_or_below(self, position: int) -> int:
        """The greatest batch boundary (batch start or end of file) <= ``position``."""
        self._ensure_loaded()
        if position >= self.size:
            return self.size
        if self._recent_positions and position >= self._recent_positions[0]:
            return self._recent_positions[bisect_right(self._recent_positions, position) - 1]
        boundary = self.offset_index.floor_position(position) or 0
        for pos, header in self._scan_from(boundary):
            if pos + header.size > position:
                return pos
        return boundary

    def header_at(self, position: int) -> BatchHeader:
        with self.guard:
            return parse_batch_header(os.pread(self._log_fd, BATCH_HEADER_SIZE, position))

    def find_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``min_offset`` whose timestamp is
        >= ``timestamp``, as Kafka's ListOffsets answers.

        Only the one batch that holds the answer is decoded (this is not the produce or fetch
        path); a batch compressed with a codec other than gzip is answered at batch granularity.
        """
        if self.max_timestamp < timestamp:
            return None
        start_offset = max(self.time_index.floor_offset(timestamp) or self.base_offset, min_offset)
        position = self.find(start_offset)
        if position is None:
            return None
        for batch_position, header in self._scan_from(position):
            if header.max_timestamp >= timestamp and header.last_offset >= min_offset:
                return (self._record_at_or_after(batch_position, header, timestamp, min_offset)
                        or (max(header.base_offset, min_offset), header.max_timestamp))
        return None

    def _record_at_or_after(self, position: int, header: BatchHeader, timestamp: int,
                            min_offset: int) -> tuple[int, int] | None:
        if header.timestamp_type == LOG_APPEND_TIME:
            return None  # every record carries the batch's time
        for record in self._records(position, header):
            if record.offset >= min_offset and record.timestamp >= timestamp:
                return record.offset, record.timestamp
        return None

    def _records(self, position: int, header: BatchHeader) -> list[Record]:
        """The records of the batch at ``position`` (decompressed: off the produce/fetch path)."""
        with self.guard:
            section = os.pread(self._log_fd, header.size - BATCH_HEADER_SIZE, position + BATCH_HEADER_SIZE)
        return decode_records_section(decompress(section, header.compression), header)

    def max_timestamp_record(self, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the segment's largest timestamp, as
        ListOffsets MAX_TIMESTAMP answers (KIP-734): the record itself, not its batch."""
        if self.max_timestamp < 0:
            return None
        position = self.find(max(self.offset_of_max_timestamp, min_offset))
        if position is None or position >= self.size:
            return None
        header = self.header_at(position)
        if header.timestamp_type != LOG_APPEND_TIME:
            for record in self._records(position, header):
                if record.offset >= min_offset and record.timestamp == header.max_timestamp:
                    return record.offset, record.timestamp
        return max(header.base_offset, min_offset), header.max_timestamp

    def iter_for_replay(self, from_offset: int) -> Iterator[tuple[BatchHeader, ControlMarker | None]]:
        """Headers of the batches holding offsets >= ``from_offset``, with the transaction marker
        of each control batch (for producer-state replay)."""
        position = self.find(from_offset)
        if position is None:
            return
        for batch_position, header in self._scan_from(position):
            marker = None
            if header.is_control:
                with self.guard:
                    data = os.pread(self._log_fd, header.size, batch_position)
                marker = decode_control_marker(data, 0, header)
            yield header, marker

    def duplicate_fd(self) -> int:
        """A duplicate of the .log's fd, for a reader outside the event loop (a log cleaner's
        thread) that must keep reading after this segment is closed or renamed; the caller
        closes it."""
        with self.guard:
            return os.dup(self._log_fd)

    def slice(self, start: int, end: int) -> FileSlice:
        with self.guard:
            fd = os.dup(self._log_fd)
        return FileSlice(fd, start, end - start, self.guard)

    # ---- truncation, durability, lifecycle ----------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Drop every batch holding an offset >= ``offset``; returns the bytes removed.

        Cuts at a batch boundary, so a batch straddling ``offset`` goes entirely.
        """
        position = self.find(offset)
        if position is None:
            return 0
        cut_base = self.header_at(position).base_offset if position < self.size else offset
        removed = self.size - position
        with self.guard:
            os.ftruncate(self._log_fd, position)
        self.size = position
        self.written_back_to = min(self.written_back_to, position)
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(cut_base)
        self.txn_index.truncate_from(cut_base)
        tail = list(self._scan_from(self.offset_index.last_position() if self.offset_index else 0))
        self._set_tail(tail)
        last = self.time_index.last_entry()
        if last is not None and last[0] > self._max_timestamp:
            self._max_timestamp, self._offset_of_max_timestamp = last
        if self.size == 0:
            self.rolling_base_ms = None
        return removed

    def flush(self) -> None:
        with self.guard:
            os.fsync(self._log_fd)
        self.offset_index.file.flush()
        self.time_index.file.flush()
        self.txn_index.flush()

    def fds_to_sync(self) -> list[int]:
        """Duplicates of the fds of every file ``flush`` would fsync, for an fsync off the event
        loop that this segment's closing or deletion cannot disturb (the caller closes them)."""
        fds: list[int] = []
        try:
            with self.guard:
                fds.append(os.dup(self._log_fd))
            for fd in (self.offset_index.file.duplicate_fd(), self.time_index.file.duplicate_fd(),
                       self.txn_index.open_for_sync()):
                if fd is not None:
                    fds.append(fd)
        except BaseException:
            close_fds(fds)
            raise
        return fds

    def close(self) -> None:
        """Release the fds; never raises (FileSlices keep their own dups)."""
        self.offset_index.file.close()
        self.time_index.file.close()
        if self._log_fd >= 0:
            fd, self._log_fd = self._log_fd, -1
            try:
                os.close(fd)
            except OSError:
                pass

    def _paths(self) -> list[str]:
        return [self.log_path, self.offset_index.file.path, self.time_index.file.path, self.txn_index.path]

    def rename_for_delete(self) -> None:
        """Add the ``.deleted`` suffix to the three files; removal happens later (``delete``)."""
        self.offset_index.file.close()
        self.time_index.file.close()
        with self.guard:
            for path in self._paths():
                try:
                    os.rename(path, path + DELETED_SUFFIX)
                except FileNotFoundError:
                    pass
        self.log_path += DELETED_SUFFIX
        self.offset_index.file.path += DELETED_SUFFIX
        self.time_index.file.path += DELETED_SUFFIX
        self.txn_index.path += DELETED_SUFFIX

    def delete(self) -> None:
        """Close and unlink the files (under whatever name they have now)."""
        self.close()
        with self.guard:
            for path in self._paths():
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass

    def __repr__(self) -> str:
        return f"Segment({self.log_path}, size={self.size})"
