"""Blocking file work the event loop does not wait for: the fsync of a rolled segment, the start
of a writeback (minikafka.storage.writeback) and the removal of a deleted partition's dir, done
on a small thread pool, as Kafka's scheduler threads do the first and the last. Each can take a
large fraction of a second per GiB (writeback of a whole segment, freeing its cached pages), and
every client of the broker would wait that long on the loop.

``BackgroundIo.submit(guard, work, then)`` runs ``work`` in a thread. ``work`` makes plain OS
calls on fds it owns (duplicates) or on paths nothing else uses any more; it never touches a
Segment or Log. Back on the event loop, ``then`` runs once ``work`` succeeded, and an OSError
is reported through the guard's failure channel like any other I/O error of its log dir. Without
a running event loop (startup, shutdown, offline tools, unit tests) or without threads, the work
runs at once, inline, under the guard: an error then surfaces as KafkaStorageError to the
caller, as it would for any other OS call of a log dir.

Owned by the LogManager, which hands it to every Log it loads; ``submit`` is called on the
event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from minikafka.storage.dir_io import DirGuard

log = logging.getLogger(__name__)


class BackgroundIo:
    """A thread pool for blocking log-dir work (``threads`` 0: everything inline)."""

    def __init__(self, threads: int = 0) -> None:
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="log-background-io") if threads > 0 else None
        self._pending: set[asyncio.Future[None]] = set()

    def submit(self, guard: DirGuard, work: Callable[[], None], then: Callable[[], None] | None = None) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if self._executor is None or loop is None:
            with guard:
                work()
            if then is not None:
                then()
            return
        if guard.channel.is_offline(guard.log_dir):
            return  # nothing of an offline dir is touched again
        future = loop.run_in_executor(self._executor, work)
        self._pending.add(future)
        future.add_done_callback(lambda done: self._finished(done, guard, then))

    def _finished(self, future: asyncio.Future[None], guard: DirGuard, then: Callable[[], None] | None) -> None:
        self._pending.discard(future)
        if future.cancelled():
            return
        error = future.exception()
        if error is None:
            if then is not None:
                then()
        elif isinstance(error, OSError):
            where = f"log dir {guard.log_dir}" + (f" ({guard.partition})" if guard.partition else "")
            log.error("background I/O in %s failed: %s", where, error)
            guard.channel.report(guard.log_dir, error)
        else:
            log.error("background I/O in log dir %s failed", guard.log_dir, exc_info=error)

    async def drain(self) -> None:
        """Wait for the work submitted so far (a clean shutdown flushes after it)."""
        # Each future's own done callback (``_finished``) runs before ``wait`` returns: it was
        # added first. The loop picks up work a ``then`` submitted.
        while self._pending:
            await asyncio.wait(set(self._pending))

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)


INLINE_IO = BackgroundIo()
