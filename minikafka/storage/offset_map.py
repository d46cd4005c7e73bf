"""The offset map of a log clean: the latest offset of each key of the part of a log it maps.

Compiled to C by mypyc where minikafka is installed with a C compiler (setup.py), like
protocol/record_scan.py: ``put_batch`` runs once for every record of a log's dirty part. Without
a compiler it runs as the Python it is. A compiled class cannot be patched or subclassed from
Python; its users hold it as it is.
"""

from __future__ import annotations

import bisect
import hashlib

DIGEST_BYTES = 16  # MD5's; a shorter key is its own map key


class OffsetMap:
    """The latest offset of each key of the part of a log being mapped. Keys of 16 bytes or more
    are held as their MD5 digests (Kafka's choice), shorter ones as they are (no digest can equal
    them, and hashing each record's key was a fifth of a clean); at most ``capacity`` of them.
    Owned by one clean's process."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}
        self._latest: list[int] = []  # every key's latest offset, in order (``mapped``)

    @staticmethod
    def digest(key: bytes) -> bytes:
        return key if len(key) < DIGEST_BYTES else hashlib.md5(key, usedforsecurity=False).digest()

    def mapped(self) -> None:
        """Mapping is done: the lookups of ``holds_latest`` may begin."""
        self._latest = sorted(self._offsets.values())

    def holds_latest(self, first: int, last: int) -> bool:
        """Whether some key's latest offset is within ``first``..``last``."""
        at = bisect.bisect_left(self._latest, first)
        return at < len(self._latest) and self._latest[at] <= last

    def put_batch(self, base_offset: int, keys: list[tuple[int, bytes | None]], start: int, end: int) -> int | None:
        """Map the keys of one batch (``record_keys``) whose offsets are within ``start``..``end``
        (excluded); the offset of the first key that found the map full, None if none did. One
        call a batch, with its loop on locals: the map reads every record of the dirty part."""
        offsets, capacity, md5, short = self._offsets, self.capacity, hashlib.md5, DIGEST_BYTES
        for offset_delta, key in keys:
            offset = base_offset + offset_delta
            if key is None or not start <= offset < end:
                continue
            digest = key if len(key) < short else md5(key, usedforsecurity=False).digest()
            if len(offsets) >= capacity and digest not in offsets:
                return offset
            offsets[digest] = offset
        return None

    def get(self, digest: bytes) -> int:
        return self._offsets.get(digest, -1)

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.capacity
