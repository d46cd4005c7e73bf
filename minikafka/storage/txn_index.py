"""The aborted-transaction index of one segment, ``<base>.txnindex``, in Kafka's layout.

One 34-byte entry per transaction aborted by a marker in the segment (all big-endian): version
int16 (0), producer id int64, first offset int64, last offset int64 (the abort marker's),
last stable offset int64 (when the marker was written). A read_committed fetch asks every
segment from the one holding its fetch offset for the aborted transactions that overlap what it
returns. The file exists only once a segment has an aborted transaction.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from minikafka.storage.dir_io import DirGuard

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """Owns one segment's .txnindex and its entries in memory (loaded on first use); only its
    Segment touches it."""

    __slots__ = ("path", "guard", "_entries")

    def __init__(self, path: str, guard: DirGuard) -> None:
        self.path = path
        self.guard = guard
        self._entries: list[AbortedTxn] | None = None

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        with self.guard:
            try:
                with open(self.path, "rb") as handle:
                    data = handle.read()
            except FileNotFoundError:
                return []
        whole = len(data) - len(data) % _ENTRY.size  # a torn last entry is dropped
        return [AbortedTxn(pid, first, last, lso) for _, pid, first, last, lso in _ENTRY.iter_unpack(data[:whole])]

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        with self.guard:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, _ENTRY.pack(_VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
                                         txn.last_stable_offset))
            finally:
                os.close(fd)
        entries.append(txn)

    def replace(self, entries: list[AbortedTxn]) -> None:
        """Rewrite the file with ``entries`` (none: the file goes)."""
        self._entries = list(entries)
        with self.guard:
            if not entries:
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass
                return
            with open(self.path, "wb") as handle:
                handle.write(encode_entries(entries))

    def truncate_from(self, offset: int) -> None:
        """Forget the transactions whose abort marker is at or after ``offset`` (the log was cut there)."""
        if any(txn.last_offset >= offset for txn in self.entries):
            self.replace([txn for txn in self.entries if txn.last_offset < offset])

    def overlapping(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions with records in [start, end)."""
        return [txn for txn in self.entries if txn.last_offset >= start and txn.first_offset < end]

    def flush(self) -> None:
        fd = self.open_for_sync()
        if fd is not None:
            with self.guard:
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def open_for_sync(self) -> int | None:
        """An fd of the file for an fsync (the caller closes it); None if there is no file."""
        if not self._entries:
            return None
        with self.guard:
            return os.open(self.path, os.O_RDONLY)


def encode_entries(entries: list[AbortedTxn]) -> bytes:
    return b"".join(_ENTRY.pack(_VERSION, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
                    for t in entries)
