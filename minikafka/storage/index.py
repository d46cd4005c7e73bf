"""Sparse offset and time indexes of one segment, in Kafka's on-disk layout.

``<base>.index`` holds 8-byte entries (offset relative to the segment base: int32,
position in the .log: int32); ``<base>.timeindex`` holds 12-byte entries (timestamp:
int64, relative offset: int32); all big-endian, no header, no preallocation, so the file
length is always a whole number of entries.  Both keep a copy of their entries in memory
(arrays, a few bytes per 4 KiB of log) for lookups by binary search.

An index with no entries has no file (as the .txnindex): a new segment costs one file creation,
not three, and a missing file reads as no entries.  Kafka, finding one missing, rebuilds it from
the .log, which gives the same empty index.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right

from minikafka.storage.dir_io import DirGuard

_SWAP = sys.byteorder == "little"
_TIME_ENTRY = struct.Struct(">qi")


def _to_big_endian(values: array) -> bytes:
    if _SWAP:
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


class _IndexFile:
    """Owns one index file's fd: the file is created and opened by the first write, closed by
    ``close`` (a sealed segment's) and reopened by the next write; emptied, it is removed."""

    __slots__ = ("path", "io", "_fd", "known_absent")

    def __init__(self, path: str, io: DirGuard) -> None:
        self.path = path
        self.io = io
        self._fd: int | None = None
        # Set where the file is known not to exist (a new segment's): emptying it costs no syscall.
        self.known_absent = False

    def _open(self) -> int:
        if self._fd is None:
            with self.io:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self.known_absent = False
        return self._fd

    def read_all(self) -> bytes | None:
        with self.io:
            try:
                with open(self.path, "rb") as handle:
                    return handle.read()
            except FileNotFoundError:
                return None

    def write_at(self, data: bytes, position: int) -> None:
        fd = self._open()
        with self.io:
            view = memoryview(data)
            while view:
                written = os.pwrite(fd, view, position)
                view = view[written:]
                position += written

    def replace_content(self, data: bytes) -> None:
        if not data:
            self.remove()
            return
        fd = self._open()
        with self.io:
            os.ftruncate(fd, 0)
        self.write_at(data, 0)

    def truncate(self, length: int) -> None:
        if length == 0:
            self.remove()
            return
        fd = self._open()
        with self.io:
            os.ftruncate(fd, length)

    def remove(self) -> None:
        """No entries: no file (a missing one is fine, it reads as empty)."""
        self.close()
        if self.known_absent:
            return
        with self.io:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        self.known_absent = True

    def flush(self) -> None:
        if self._fd is not None:
            with self.io:
                os.fsync(self._fd)

    def duplicate_fd(self) -> int | None:
        """A duplicate of the open fd, for an fsync off the event loop (the caller closes it)."""
        if self._fd is None:
            return None
        with self.io:
            return os.dup(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass


class OffsetIndex:
    """Owns ``<base>.index`` and its in-memory copy; only its Segment touches it."""

    ENTRY_SIZE = 8

    __slots__ = ("base_offset", "file", "rel_offsets", "positions")

    def __init__(self, path: str, base_offset: int, io: DirGuard) -> None:
        self.base_offset = base_offset
        self.file = _IndexFile(path, io)
        self.rel_offsets = array("i")
        self.positions = array("i")

    def __len__(self) -> int:
        return len(self.positions)

    def load(self, log_size: int) -> bool:
        """Read the file into memory (a missing file: no entries); False (and empty) if it fails
        the sanity check."""
        self.rel_offsets = array("i")
        self.positions = array("i")
        data = self.file.read_all()
        if data is None:
            return True
        if len(data) % self.ENTRY_SIZE:
            return False
        pairs = array("i")
        pairs.frombytes(data)
        if _SWAP:
            pairs.byteswap()
        rel_offsets, positions = pairs[0::2], pairs[1::2]
        for i in range(len(positions)):
            if rel_offsets[i] < 0 or not 0 <= positions[i] < log_size:
                return False
            if i and (rel_offsets[i] <= rel_offsets[i - 1] or positions[i] <= positions[i - 1]):
                return False
        self.rel_offsets, self.positions = rel_offsets, positions
        return True

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.positions and (rel <= self.rel_offsets[-1] or position <= self.positions[-1]):
            return
        self.file.write_at(_to_big_endian(array("i", (rel, position))), len(self.positions) * self.ENTRY_SIZE)
        self.rel_offsets.append(rel)
        self.positions.append(position)

    def replace(self, offsets: list[int], positions: list[int]) -> None:
        """Swap in a rebuilt index (after recovery) and rewrite the file once (none: no file)."""
        self.rel_offsets = array("i", (o - self.base_offset for o in offsets))
        self.positions = array("i", positions)
        pairs = array("i", [0]) * (2 * len(positions))
        pairs[0::2] = self.rel_offsets
        pairs[1::2] = self.positions
        self.file.replace_content(_to_big_endian(pairs))

    def floor_entry(self, offset: int) -> tuple[int, int] | None:
        """(offset, position) of the last entry whose offset is <= ``offset``."""
        i = bisect_right(self.rel_offsets, offset - self.base_offset) - 1
        if i < 0:
            return None
        return self.rel_offsets[i] + self.base_offset, self.positions[i]

    def floor_position(self, position: int) -> int | None:
        """The greatest indexed position <= ``position``."""
        i = bisect_right(self.positions, position) - 1
        return self.positions[i] if i >= 0 else None

    def last_position(self) -> int:
        return self.positions[-1] if self.positions else 0

    def truncate_to_position(self, log_size: int) -> None:
        """Forget entries pointing at or past ``log_size`` (the .log was cut there)."""
        keep = bisect_right(self.positions, log_size - 1)
        if keep == len(self.positions):
            return
        del self.rel_offsets[keep:]
        del self.positions[keep:]
        self.file.truncate(keep * self.ENTRY_SIZE)


class TimeIndex:
    """Owns ``<base>.timeindex`` and its in-memory copy; only its Segment touches it.

    Entries are (max timestamp so far, offset of the batch that first reached it), added
    only when the timestamp grows, so both columns are increasing.
    """

    ENTRY_SIZE = 12

    __slots__ = ("base_offset", "file", "timestamps", "rel_offsets")

    def __init__(self, path: str, base_offset: int, io: DirGuard) -> None:
        self.base_offset = base_offset
        self.file = _IndexFile(path, io)
        self.timestamps = array("q")
        self.rel_offsets = array("i")

    def __len__(self) -> int:
        return len(self.timestamps)

    def load(self, next_offset: int | None) -> bool:
        """Read the file (a missing file: no entries); False (and empty) if insane.  ``next_offset``
        bounds entries."""
        self.timestamps = array("q")
        self.rel_offsets = array("i")
        data = self.file.read_all()
        if data is None:
            return True
        if len(data) % self.ENTRY_SIZE:
            return False
        timestamps = array("q")
        rel_offsets = array("i")
        for timestamp, rel in _TIME_ENTRY.iter_unpack(data):
            timestamps.append(timestamp)
            rel_offsets.append(rel)
        limit = None if next_offset is None else next_offset - self.base_offset
        for i in range(len(timestamps)):
            if rel_offsets[i] < 0 or (limit is not None and rel_offsets[i] >= limit):
                return False
            if i and (timestamps[i] <= timestamps[i - 1] or rel_offsets[i] < rel_offsets[i - 1]):
                return False
        self.timestamps, self.rel_offsets = timestamps, rel_offsets
        return True

    @staticmethod
    def _encode(timestamp: int, rel: int) -> bytes:
        return _TIME_ENTRY.pack(timestamp, rel)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        rel = offset - self.base_offset
        if self.timestamps and (timestamp <= self.timestamps[-1] or rel < self.rel_offsets[-1]):
            return
        self.file.write_at(self._encode(timestamp, rel), len(self.timestamps) * self.ENTRY_SIZE)
        self.timestamps.append(timestamp)
        self.rel_offsets.append(rel)

    def replace(self, timestamps: list[int], offsets: list[int]) -> None:
        self.timestamps = array("q", timestamps)
        self.rel_offsets = array("i", (o - self.base_offset for o in offsets))
        self.file.replace_content(
            b"".join(self._encode(t, r) for t, r in zip(self.timestamps, self.rel_offsets, strict=True))
        )

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the newest entry."""
        if not self.timestamps:
            return None
        return self.timestamps[-1], self.rel_offsets[-1] + self.base_offset

    def floor_offset(self, timestamp: int) -> int | None:
        """Offset of the last entry whose timestamp is <= ``timestamp``."""
        i = bisect_right(self.timestamps, timestamp) - 1
        return self.rel_offsets[i] + self.base_offset if i >= 0 else None

    def truncate_to_offset(self, next_offset: int) -> None:
        """Forget entries for offsets >= ``next_offset``."""
        keep = bisect_right(self.rel_offsets, next_offset - self.base_offset - 1)
        if keep == len(self.rel_offsets):
            return
        del self.timestamps[keep:]
        del self.rel_offsets[keep:]
        self.file.truncate(keep * self.ENTRY_SIZE)
