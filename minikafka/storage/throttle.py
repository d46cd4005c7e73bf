"""The byte rate that bulk copies of log data share: the moves between log dirs
(replica.alter.log.dirs.io.max.bytes.per.second) and the log cleaner's cleans
(log.cleaner.io.max.bytes.per.second) each have one Throttle.

Each acquire of ``n`` bytes books the next ``n / rate`` seconds of one timeline shared by every
copier of that throttle, and waits until its slot starts: the copiers' combined rate is the
configured one, without bursts, however many there are.  A new rate restarts the timeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from multiprocessing.context import BaseContext
from typing import Any

# Kafka's "no limit" for these rates (Long.MAX_VALUE; the cleaner's default, Double.MAX_VALUE, is above it).
UNLIMITED_RATE = 2**63 - 1
CHUNK_BYTES = 8 << 20
MIN_CHUNK_BYTES = 64 << 10


class _Cell:
    """One value of a throttle used on a single event loop: the same interface as a
    multiprocessing Value, with nothing to lock."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def get_lock(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()


class Throttle:
    """Owns one byte rate and the timeline of its slots; the rate may change at any time.

    Without ``context`` it belongs to one event loop (the LogDirMover's): its copiers call
    ``await acquire`` there.  With a multiprocessing ``context`` its state lives in shared
    memory behind a lock, so the processes started from that context with the throttle as an
    argument (the LogCleaner's cleans) share it, calling the blocking ``acquire_blocking``; the
    event loop that made it may still call ``set_rate``.  Both clocks are CLOCK_MONOTONIC.
    """

    def __init__(self, bytes_per_second: float, context: BaseContext | None = None) -> None:
        self._rate: Any
        self._next: Any
        self._generation: Any
        if context is None:
            self._rate, self._next, self._generation = _Cell(bytes_per_second), _Cell(0.0), _Cell(0)
        else:
            self._rate = context.Value("d", bytes_per_second)
            self._next = context.Value("d", 0.0, lock=False)
            self._generation = context.Value("q", 0, lock=False)

    @property
    def rate(self) -> float:
        return self._rate.value

    @property
    def unlimited(self) -> bool:
        return self._rate.value >= UNLIMITED_RATE

    def set_rate(self, bytes_per_second: float) -> None:
        if not bytes_per_second > 0:
            raise ValueError(f"a throttle's rate must be more than 0 bytes per second, not {bytes_per_second}")
        with self._rate.get_lock():
            self._rate.value, self._next.value = bytes_per_second, 0.0
            self._generation.value += 1

    def chunk_bytes(self) -> int:
        """How much a copier copies per acquire: a twentieth of a second's worth when throttled,
        so a rate change takes effect at once and the rate holds over short spans."""
        if self.unlimited:
            return CHUNK_BYTES
        return int(max(MIN_CHUNK_BYTES, min(CHUNK_BYTES, self._rate.value // 20)))

    def _book(self, nbytes: int, clock: Callable[[], float]) -> tuple[float, float, int] | None:
        """Book the next ``nbytes / rate`` seconds: (now, when the slot starts, the rate's
        generation), or None when unlimited (the clock is not even read then)."""
        with self._rate.get_lock():
            rate = self._rate.value
            if rate >= UNLIMITED_RATE:
                return None
            now = clock()
            start = max(now, self._next.value)
            self._next.value = start + nbytes / rate
            return now, start, self._generation.value

    async def acquire(self, nbytes: int) -> None:
        """Wait (on the event loop) for a slot of ``nbytes``; a rate change ends the wait."""
        if nbytes <= 0:
            return
        loop = asyncio.get_running_loop()
        booked = self._book(nbytes, loop.time)
        if booked is None:
            return
        _, start, generation = booked
        while (delay := start - loop.time()) > 0 and generation == self._generation.value:
            await asyncio.sleep(min(delay, 0.1))

    def acquire_blocking(self, nbytes: int) -> None:
        """Sleep (a thread or a process of its own) until the slot of ``nbytes`` starts."""
        booked = self._book(nbytes, time.monotonic)
        if booked is not None and booked[1] > booked[0]:
            time.sleep(booked[1] - booked[0])
