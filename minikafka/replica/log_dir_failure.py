"""Taking a failed log dir offline: the one reaction to every report of the LogDirFailureChannel.

A dir fails when any OS call on it fails (dir_io.guard reports it), when a periodic check finds
its path no longer leads to the directory opened at startup (deleted, replaced by a file,
unmounted), or at startup (log_manager.check_log_dirs).  Whatever the cause, the same steps
follow, once per dir: its logs are closed and dropped, its replicas stop and answer
KAFKA_STORAGE_ERROR, requests waiting on them are answered, moves into or out of it stop, the
controller records that those partitions have no leader, the metrics change and one log line
names the dir, the error and the replicas.  A dir stays offline until the broker restarts.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Callable
from typing import Any

from prometheus_client import Gauge

from minikafka.replica.replica_manager import ReplicaManager, TopicPartition
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log_manager import LogManager

log = logging.getLogger(__name__)

# Named as Prometheus' JMX exporter names Kafka's MBeans (kafka_<domain>_<type>_<name>), so
# dashboards and alerts written for Apache Kafka find them.
OFFLINE_LOG_DIRECTORY_COUNT = Gauge(
    "kafka_log_LogManager_OfflineLogDirectoryCount", "Log directories of this broker that are offline")
OFFLINE_REPLICA_COUNT = Gauge(
    "kafka_server_ReplicaManager_OfflineReplicaCount",
    "Replicas this broker should host whose data is on an offline (or replaced) log directory")
LOG_DIRECTORY_OFFLINE = Gauge(
    "kafka_log_LogManager_LogDirectoryOffline", "1 when the log directory is offline, else 0", ["logDirectory"])

DEFAULT_CHECK_INTERVAL_MS = 1000


def describe_error(cause: BaseException | None) -> str:
    """``No space left on device (ENOSPC): '/d/t-0/00000000000000000000.log'`` for an OS
    error, str() for anything else."""
    if isinstance(cause, OSError) and cause.errno is not None:
        text = f"{cause.strerror or cause} ({errno.errorcode.get(cause.errno, cause.errno)})"
        return f"{text}: {cause.filename!r}" if cause.filename else text
    return str(cause) if cause is not None else "unknown error"


def format_replicas(keys: list[TopicPartition]) -> str:
    """Every replica, by name: the one log line of a failure says exactly what was lost."""
    return ", ".join(f"{topic}-{index}" for topic, index in sorted(keys)) or "none"


class LogDirFailureHandler:
    """Owns the reaction to a failed log dir, the periodic check of every live dir, and the
    offline-dir metrics.

    The failure channel calls ``on_dir_failure`` from inside whichever storage call failed;
    the work is deferred to the event loop so no Log is closed under a caller still using it
    (until then, the guard already refuses every call on that dir).  Event-loop thread only;
    the Broker creates it once its ReplicaManager and controller are up, and stops it.

    ``on_replicas_offline(log_dir, partitions, led)`` tells the controller (``led``: those this
    broker was leading); ``cancel_moves(log_dir, reason)``
    stops moves into or out of the dir; ``on_no_live_dir()`` is called when the last dir is
    gone (the broker halts, as Kafka does); ``min_free_bytes()`` is log.dir.min.free.bytes.
    """

    def __init__(
        self,
        log_manager: LogManager,
        replica_manager: ReplicaManager,
        failure_channel: LogDirFailureChannel,
        *,
        on_replicas_offline: Callable[[str, list[TopicPartition], list[TopicPartition]], Any],
        on_no_live_dir: Callable[[], Any],
        cancel_moves: Callable[[str, str], Any] | None = None,
        check_interval_ms: int = DEFAULT_CHECK_INTERVAL_MS,
        min_free_bytes: Callable[[], int] | None = None,
    ) -> None:
        self.log_manager = log_manager
        self.replica_manager = replica_manager
        self.failure_channel = failure_channel
        self.on_replicas_offline = on_replicas_offline
        self.on_no_live_dir = on_no_live_dir
        self.cancel_moves = cancel_moves
        self.check_interval_ms = check_interval_ms
        self.min_free_bytes = min_free_bytes
        self.low_on_room: set[str] = set()  # live dirs below log.dir.min.free.bytes
        self.replicas_by_dir: dict[str, list[TopicPartition]] = {}  # taken offline at runtime
        self._pending: list[tuple[str, Exception]] = []
        self._handled: set[str] = set()
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._checker: asyncio.Task[None] | None = None

    # ---- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Report what startup found offline and which dirs are low on room, listen for
        failures, start the periodic check."""
        self.failure_channel.add_listener(self.on_dir_failure)
        OFFLINE_LOG_DIRECTORY_COUNT.set_function(lambda: len(self.failure_channel.offline_dirs))
        OFFLINE_REPLICA_COUNT.set_function(lambda: len(self.replica_manager.offline_partitions))
        for log_dir in self.log_manager.log_dirs:
            LOG_DIRECTORY_OFFLINE.labels(log_dir).set(int(self.failure_channel.is_offline(log_dir)))
        self._report_startup()
        self._check_room()
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None  # no loop (unit tests): failures are handled as they are reported
        if self._loop is not None and self.check_interval_ms > 0:
            self._checker = self._loop.create_task(self._check_periodically())

    async def stop(self) -> None:
        if self._checker is not None:
            self._checker.cancel()
            await asyncio.gather(self._checker, return_exceptions=True)
            self._checker = None

    def _report_startup(self) -> None:
        for log_dir in self.log_manager.log_dirs:
            if not self.failure_channel.is_offline(log_dir):
                continue
            self._handled.add(log_dir)
            cause = self.failure_channel.causes.get(log_dir, OSError(errno.EIO, "offline"))
            if log_dir in self.log_manager.directory_ids:
                # It failed after its logs were loaded (say, while a replica was created).
                self._take_offline(log_dir, cause)
            else:
                log.error("log dir %s is offline since startup (%s); the broker serves the other dirs "
                          "and keeps it offline until a restart",
                          log_dir, describe_error(cause))
        offline = list(self.replica_manager.offline_partitions)
        if offline:
            log.error("%d replica(s) offline since startup, their data is in no live log dir: %s; they "
                      "answer KAFKA_STORAGE_ERROR and are not re-created empty (to accept the loss: "
                      "stop the broker, run `minikafka log-dirs --recreate TOPIC-PARTITION... --yes`)",
                      len(offline), format_replicas(offline))

    # ---- failures -----------------------------------------------------------------------

    def on_dir_failure(self, log_dir: str, cause: Exception) -> None:
        """The failure channel's listener: queue the dir, handle it on the next loop turn."""
        self._pending.append((log_dir, cause))
        if self._loop is None:
            self.process_pending()
        elif not self._scheduled:
            self._scheduled = True
            # Thread-safe: a mover's copy thread may be the one that met the error.
            self._loop.call_soon_threadsafe(self.process_pending)

    def process_pending(self) -> None:
        """Take every reported dir offline now (normally run by the event loop)."""
        self._scheduled = False
        while self._pending:
            log_dir, cause = self._pending.pop(0)
            if log_dir not in self._handled:
                self._handled.add(log_dir)
                self._take_offline(log_dir, cause)

    def _take_offline(self, log_dir: str, cause: Exception) -> None:
        error = describe_error(cause)
        reason = f"log dir {log_dir} failed ({error})"
        keys = set(self.log_manager.take_dir_offline(log_dir))
        keys.update(key for key, p in self.replica_manager.partitions.items() if p.log.log_dir == log_dir)
        replicas = sorted(keys)
        led = [key for key in replicas if (p := self.replica_manager.partitions.get(key)) is not None and p.is_leader]
        self.replica_manager.take_offline(replicas, reason)
        self.replicas_by_dir[log_dir] = replicas
        LOG_DIRECTORY_OFFLINE.labels(log_dir).set(1)
        log.error("log dir %s failed (%s); took %d replica(s) offline: %s; it stays offline until "
                  "the broker restarts", log_dir, error, len(replicas), format_replicas(replicas))
        if self.cancel_moves is not None:
            try:
                self.cancel_moves(log_dir, reason)
            except Exception:
                log.exception("stopping the moves involving %s failed", log_dir)
        try:
            self.on_replicas_offline(log_dir, replicas, led)
        except Exception:
            log.exception("could not tell the controller about the replicas of %s", log_dir)
        if not self.log_manager.live_dirs:
            log.critical("every log dir is offline (%s); the broker cannot serve anything and halts",
                         ", ".join(self.log_manager.log_dirs))
            self.on_no_live_dir()

    # ---- periodic check -----------------------------------------------------------------

    def check_now(self) -> list[str]:
        """Check that every live dir is still the directory opened at startup; a dir that is
        not is reported (and so taken offline).  Then see which dirs are low on room.
        Returns the dirs found failed."""
        failed = self.log_manager.check_dirs()
        self._check_room()
        return failed

    def _check_room(self) -> None:
        """Log when a live dir's free room crosses log.dir.min.free.bytes, either way: below
        it a dir gets no new replica and no move (placement skips it), so an operator sees a
        disk filling up before it fills and fails."""
        floor = self.min_free_bytes() if self.min_free_bytes is not None else 0
        live = self.log_manager.live_dirs
        self.low_on_room &= set(live)
        if floor <= 0:
            self.low_on_room.clear()
            return
        for log_dir in live:
            try:
                free = self.log_manager.dir_usage(log_dir).usable_bytes
            except KafkaStorageError:
                continue  # reported: the failure handling takes it from here
            if free < floor and log_dir not in self.low_on_room:
                self.low_on_room.add(log_dir)
                log.warning("log dir %s is nearly full: %d bytes free, below log.dir.min.free.bytes=%d; it gets "
                            "no new replica and no move until room is made, and goes offline if it fills up",
                            log_dir, free, floor)
            elif free >= floor and log_dir in self.low_on_room:
                self.low_on_room.discard(log_dir)
                log.info("log dir %s has room again: %d bytes free (log.dir.min.free.bytes=%d)", log_dir, free, floor)

    async def _check_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.check_interval_ms / 1000)
            try:
                self.check_now()
            except Exception:
                log.exception("log dir check failed")
