"""A log line for something that repeats (a refusal every client retry brings): the first
occurrence of each kind is logged at once, the next ones are counted, and at most one line per
interval says how many there were.

A client that retries a refused produce every 100 ms would otherwise write ten lines a second
per partition. The count of the last interval is written with the next occurrence after it, so
an operator sees that the refusals go on, and how often. Event-loop thread only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

INTERVAL_S = 60.0
# Kinds not seen for this many intervals are forgotten, so that the table stays small.
FORGET_AFTER_INTERVALS = 10


@dataclass
class _Seen:
    logged_at: float
    since: int = 0  # occurrences not logged since then


class RepeatedLog:
    def __init__(self, logger: logging.Logger, interval_s: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        self._seen: dict[Hashable, _Seen] = {}

    def log(self, level: int, kind: Hashable, message: str, *args: object) -> None:
        """Log ``message % args`` if ``kind`` was not logged within the interval, with how many
        times it happened since it last was; otherwise only count it."""
        now = self.clock()
        seen = self._seen.get(kind)
        if seen is not None and now - seen.logged_at < self.interval_s:
            seen.since += 1
            return
        if seen is not None and seen.since:
            message += f" (and {seen.since} more like it in the {now - seen.logged_at:.0f} s before)"
        self._seen[kind] = _Seen(now)
        self.logger.log(level, message, *args)
        if len(self._seen) > 1000:
            horizon = now - self.interval_s * FORGET_AFTER_INTERVALS
            self._seen = {k: s for k, s in self._seen.items() if s.logged_at >= horizon}
