"""The broker's log dirs and every partition log in them."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import stat
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from minikafka.storage.background_io import INLINE_IO, BackgroundIo
from minikafka.storage.checkpoints import (
    CLEANER_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    CorruptCheckpointError,
    format_properties,
    fsync_dir,
    fsync_path,
    parse_properties,
    read_offset_checkpoint,
    read_text,
    uuid_from_base64,
    uuid_to_base64,
    write_atomically,
    write_offset_checkpoint,
    write_partition_metadata,
)
from minikafka.storage.crash_points import hook_point
from minikafka.storage.dir_io import DirGuard
from minikafka.storage.errors import (
    InconsistentMetadataError,
    InconsistentTopicIdError,
    KafkaStorageError,
    LogDirLockedError,
    NoLiveLogDirError,
)
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.future_log import FutureLog
from minikafka.storage.log import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    ZERO_UUID,
    Log,
    LogConfig,
    future_dir_name,
    make_new_log_files,
    parse_future_dir,
    parse_partition_dir,
    partition_dir_name,
)

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
# A new dir gets the version a ZooKeeper-mode Kafka broker writes (0, with broker.id); a dir
# that has a file keeps its version, because Kafka 3.9 in ZooKeeper mode refuses to start on
# version 1 (KRaft's, with node.id) unless a migration is on.
NEW_META_PROPERTIES_VERSION = "0"
META_PROPERTIES_VERSIONS = ("0", "1")
# Kafka reserves the smallest uuids as markers (unknown, offline, lost dir).
_RESERVED_DIRECTORY_IDS = {uuid.UUID(int=i) for i in range(100)}

TopicPartition = tuple[str, int]
_Job = TypeVar("_Job")
# A log ``prepare_new_logs`` makes: its partition, dir path, topic id and first leader epoch.
_NewLog = tuple[TopicPartition, str, uuid.UUID, int | None]

# Threads making and fsyncing the logs ``creating_many`` makes: enough for their fsyncs to share
# journal commits.
CREATION_SYNC_THREADS = 16


def _each_in_turn(action: Callable[[_Job], object], jobs: list[_Job]) -> list[OSError | None]:
    """``action`` on each job in turn (a thread's share of a batch of new logs' file work); per
    job, the error it met or None."""
    outcomes: list[OSError | None] = []
    for job in jobs:
        try:
            action(job)
            outcomes.append(None)
        except OSError as exc:
            outcomes.append(exc)
    return outcomes


async def _in_threads(action: Callable[[_Job], object], jobs: list[_Job]) -> list[OSError | None]:
    """``action`` on every job, from CREATION_SYNC_THREADS threads side by side; per job, in
    order, the error it met or None. A share of the jobs per thread, not a future per job: the
    20,000 futures of 5,000 new replicas' fsyncs cost the event loop more than a second."""
    if not jobs:
        return []
    loop = asyncio.get_running_loop()
    threads = min(CREATION_SYNC_THREADS, len(jobs))
    shares = [jobs[i::threads] for i in range(threads)]
    with ThreadPoolExecutor(threads, thread_name_prefix="log-create") as pool:
        done = await asyncio.gather(*(loop.run_in_executor(pool, _each_in_turn, action, share) for share in shares))
    outcomes: list[OSError | None] = [None] * len(jobs)
    for i, results in enumerate(done):
        outcomes[i::threads] = results
    return outcomes


def _make_files(job: _NewLog) -> None:
    _, dir_path, topic_id, first_epoch = job
    make_new_log_files(dir_path, topic_id, first_epoch)


# Startup writes this much into every log dir (then removes it): a dir that cannot take it has
# no room for the checkpoints and metadata the broker must write, let alone for records.
ROOM_PROBE_FILE = ".minikafka-room-probe"
ROOM_PROBE_BYTES = 64 * 1024


# Written (durably) into a move's future dir before the swap starts: from then on the future
# log is the partition's data, whatever instant a crash hits (see replace_current_with_future).
MOVE_MARKER_FILE = "minikafka-move-committed.json"
def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class DirUsage:
    """Size of the file system a log dir is on (KIP-827's total and usable bytes)."""

    total_bytes: int
    usable_bytes: int


def _has_broker_data(log_dir: str) -> bool:
    try:
        return os.path.isfile(os.path.join(log_dir, META_PROPERTIES))
    except OSError:
        return False


def _is_not_a_dir(path: str) -> bool:
    return os.path.lexists(path) and not os.path.isdir(path)


def check_log_dirs(log_dirs: list[str], failure_channel: LogDirFailureChannel) -> dict[str, str]:
    """Find the log dirs that cannot be used at startup; report each to the failure channel.

    A dir is bad when it is missing, is not a directory, cannot be listed, or cannot take a
    small write (no room, read-only).  Missing dirs are created only on a broker's very first
    start (no dir holds a meta.properties yet, none is something else than a directory):
    later, a missing dir is far more likely an unmounted disk than a new one, and filling the
    mount point's parent would hide that.
    Returns {dir: why} for the bad ones, in configuration order.
    """
    first_start = not any(_has_broker_data(d) or _is_not_a_dir(d) for d in log_dirs)
    bad: dict[str, str] = {}
    for log_dir in log_dirs:
        if failure_channel.is_offline(log_dir):
            cause = failure_channel.causes.get(log_dir)
            bad[log_dir] = getattr(cause, "strerror", None) or str(cause)
            continue
        problem = _startup_problem(log_dir, first_start)
        if problem is None:
            continue
        bad[log_dir] = problem.strerror or str(problem)
        # The LogDirFailureHandler logs it (or the startup refusal names it): one line per dir.
        logger.debug("log dir %s cannot be used: %s", log_dir, problem.strerror)
        failure_channel.report(log_dir, problem)
    return bad


def _startup_problem(log_dir: str, first_start: bool) -> OSError | None:
    """Why ``log_dir`` cannot be used, as an OSError whose strerror says it for an operator."""
    try:
        st = os.stat(log_dir)
    except FileNotFoundError:
        if not first_start:
            return OSError(errno.ENOENT, "it is missing (an unmounted disk? to use a new, empty dir "
                                         "there, create it)")
        try:
            os.makedirs(log_dir, exist_ok=True)
            st = os.stat(log_dir)
        except OSError as exc:
            return OSError(exc.errno, f"it cannot be created: {exc.strerror or exc}")
    except OSError as exc:
        return OSError(exc.errno, f"it cannot be examined: {exc.strerror or exc}")
    if not stat.S_ISDIR(st.st_mode):
        return OSError(errno.ENOTDIR, "it is not a directory (a regular file or device is in its place)")
    try:
        os.listdir(log_dir)
    except OSError as exc:
        return OSError(exc.errno, f"it is unreadable: {exc.strerror or exc}")
    probe = os.path.join(log_dir, ROOM_PROBE_FILE)
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(bytes(ROOM_PROBE_BYTES))
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return OSError(exc.errno, f"it has no room left ({exc.strerror})")
        return OSError(exc.errno, f"it is not writable: {exc.strerror or exc}")
    return None


@dataclass
class _Placement:
    """What choosing a new replica's dir weighs, measured once for a batch of creations
    (``LogManager.creating_many``) and kept current by the creations themselves: a new log adds a
    partition and no bytes. Bytes appended meanwhile elsewhere are not seen until the next batch."""

    room: dict[str, int]  # usable bytes per dir
    placed: dict[str, int]  # bytes of the replicas per dir
    partitions: dict[str, int]  # replicas per dir
    per_topic: dict[str, dict[str, int]] = field(default_factory=dict)  # topic -> replicas per dir

    def of_topic(self, topic: str, logs: dict[TopicPartition, Log]) -> dict[str, int]:
        counts = self.per_topic.get(topic)
        if counts is None:
            counts = self.per_topic[topic] = {}
            for (log_topic, _), log in logs.items():
                if log_topic == topic:
                    counts[log.log_dir] = counts.get(log.log_dir, 0) + 1
        return counts

    def created(self, log_dir: str, topic: str) -> None:
        self.partitions[log_dir] = self.partitions.get(log_dir, 0) + 1
        counts = self.per_topic.get(topic)
        if counts is not None:
            counts[log_dir] = counts.get(log_dir, 0) + 1


class LogManager:
    """Owns the broker's log dirs: their locks, meta.properties and directory ids, the
    offset checkpoint files, placement of new logs, loading/recovery at startup, retention
    runs, deletion of removed logs, and the ``logs`` map of every loaded Log.

    Called from the broker's event-loop thread only (ReplicaManager creates and deletes
    logs; the broker's schedulers call ``checkpoint`` and ``run_retention``); its
    ``background`` threads only fsync rolled segments, start the writeback of appended data
    and remove retired dirs.  A dir whose I/O fails is reported to the LogDirFailureChannel and
    skipped from then on.
    """

    def __init__(
        self, log_dirs: list[str], broker_id: int, cluster_id: str, default_config: LogConfig,
        failure_channel: LogDirFailureChannel, *, min_free_bytes: int = 0, background: BackgroundIo = INLINE_IO,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        if len(set(log_dirs)) != len(log_dirs):
            raise ValueError(f"log dirs listed twice: {log_dirs}")
        self.log_dirs = list(log_dirs)
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.default_config = default_config
        self.failure_channel = failure_channel
        # Blocking work off the event loop: rolled segments' fsyncs (each Log's) and removals.
        self.background = background
        self.logs: dict[TopicPartition, Log] = {}
        # Logs created while ``creating_many`` is open, not fsynced yet (see there).
        self._creating_many = 0
        self._unsynced: list[Log] = []
        # New logs whose files ``prepare_new_logs`` made, until created: their dir, first epoch.
        self._prepared: dict[TopicPartition, tuple[str, int | None]] = {}
        # While ``creating_many`` is open: what placement weighs, measured once for the batch.
        self._placement: _Placement | None = None
        self.directory_ids: dict[str, uuid.UUID] = {}
        self._guards = {d: DirGuard(d, failure_channel) for d in self.log_dirs}
        self._lock_fds: dict[str, int] = {}
        # (st_dev, st_ino) of each dir as opened: a dir replaced or unmounted under us differs.
        self._identities: dict[str, tuple[int, int]] = {}
        self._pending_dir_deletes: list[tuple[int, str, str]] = []  # (due ms, log dir, path)
        # Moves between dirs: the future log of each partition being moved, the dirs asked for
        # replicas not created yet (AlterReplicaLogDirs before the replica exists), and the
        # floor of free room below which a dir gets no new replica nor move.
        self.future_logs: dict[TopicPartition, FutureLog] = {}
        self.preferred_log_dirs: dict[TopicPartition, str] = {}
        self.min_free_bytes = min_free_bytes
        self._found_futures: list[tuple[str, str]] = []  # (log dir, path), startup only
        # Moved logs whose dir still holds the swap's marker (-> source dir), and those of them
        # whose source is retired, so that the next checkpoint of their dir may drop the marker.
        self._moved: dict[TopicPartition, str] = {}
        self._marker_clearable: set[TopicPartition] = set()
        self._first_start = True

    # ---- startup ------------------------------------------------------------------------

    def startup(self) -> None:
        """Lock and load every log dir; a dir failing with an I/O error is left offline.

        Raises LogDirLockedError, InconsistentMetadataError (fatal configuration problems)
        or NoLiveLogDirError when no dir could be opened.
        """
        self._first_start = not any(_has_broker_data(d) for d in self.log_dirs)
        try:
            for log_dir in self.log_dirs:
                if self.failure_channel.is_offline(log_dir):
                    continue
                try:
                    self._open_dir(log_dir)
                except KafkaStorageError as exc:
                    logger.error("log dir %s is offline after a failure at startup: %s", log_dir, exc)
                    self._release_lock(log_dir)
            self._settle_moves()
        except BaseException:
            for log in self.logs.values():
                log.close()
            self.logs = {}
            for log_dir in list(self._lock_fds):
                self._release_lock(log_dir)
            raise
        if not self.live_dirs:
            causes = self.failure_channel.causes
            raise NoLiveLogDirError("no log dir can be used: " + "; ".join(
                f"{d}: {getattr(causes.get(d), 'strerror', None) or causes.get(d, 'offline')}"
                for d in self.log_dirs))

    def _open_dir(self, log_dir: str) -> None:
        guard = self._guards[log_dir]
        with guard:
            os.makedirs(log_dir, exist_ok=True)
        self._take_lock(log_dir)
        with guard:
            st = os.stat(log_dir)
        identity = (st.st_dev, st.st_ino)
        directory_id = self._load_meta_properties(log_dir)
        clean_marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
        with guard:
            clean = os.path.exists(clean_marker)
        recovery_points = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
        high_watermarks = self._read_checkpoint(log_dir, REPLICATION_CHECKPOINT)
        log_start_offsets = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
        clean_until = self._read_checkpoint(log_dir, CLEANER_CHECKPOINT)
        with guard:
            names = sorted(os.listdir(log_dir))
        loaded: dict[TopicPartition, Log] = {}
        try:
            for name in names:
                path = os.path.join(log_dir, name)
                with guard:
                    if not os.path.isdir(path):
                        continue
                if name.endswith(DELETE_DIR_SUFFIX):
                    self._remove_tree(log_dir, path)
                    continue
                if name.endswith(FUTURE_DIR_SUFFIX):
                    self._found_futures.append((log_dir, path))
                    continue
                key = parse_partition_dir(name)
                if key is None:
                    continue
                twin = self.logs.get(key)
                if twin is not None and not self._move_explains(twin.dir_path, path):
                    raise InconsistentMetadataError(
                        f"partition {name} is in two log dirs: {self.logs[key].log_dir} and {log_dir}"
                    )
                offsets: tuple[int | None, ...] = (recovery_points.get(key), log_start_offsets.get(key),
                                                   high_watermarks.get(key), clean_until.get(key))
                if key not in log_start_offsets:
                    offsets = self._marker_offsets(log_dir, path, offsets)
                found = Log.load(
                    log_dir, path, self.default_config, guard, clean=clean,
                    recovery_point=offsets[0], log_start_offset=offsets[1], high_watermark=offsets[2],
                    clean_until=offsets[3], background=self.background,
                )
                if twin is not None and self._settle_twins(twin, found) is twin:
                    continue
                loaded[key] = found
            if clean:
                with guard:
                    os.unlink(clean_marker)
                fsync_dir(log_dir, guard)
        except BaseException:
            for log in loaded.values():
                log.close()
            raise
        self.logs.update(loaded)
        self.directory_ids[log_dir] = directory_id
        self._identities[log_dir] = identity
        if not loaded:
            logger.info("log dir %s holds no partitions yet", log_dir)
        elif clean:
            logger.info("loaded %d logs from %s after a clean shutdown", len(loaded), log_dir)
        else:
            logger.info("loaded %d logs from %s after an unclean shutdown (tails checked from the recovery "
                        "points)", len(loaded), log_dir)

    def _take_lock(self, log_dir: str) -> None:
        locked_elsewhere = False
        with self._guards[log_dir]:
            fd = os.open(os.path.join(log_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                locked_elsewhere = True
        if locked_elsewhere:
            raise LogDirLockedError(f"log dir {log_dir} is locked by another broker process")
        self._lock_fds[log_dir] = fd

    def _release_lock(self, log_dir: str) -> None:
        fd = self._lock_fds.pop(log_dir, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def _load_meta_properties(self, log_dir: str) -> uuid.UUID:
        guard = self._guards[log_dir]
        path = os.path.join(log_dir, META_PROPERTIES)
        text = read_text(path, guard)
        props = parse_properties(text) if text is not None else {}
        if text is None and not self._first_start:
            logger.warning("log dir %s has no %s: it is new, or a replacement for a lost disk; any replica "
                           "it held before is gone", log_dir, META_PROPERTIES)
        if text is not None:
            stored_cluster = props.get("cluster.id")
            if stored_cluster is not None and stored_cluster != self.cluster_id:
                raise InconsistentMetadataError(
                    f"{path} belongs to cluster {stored_cluster}, but this broker is in cluster {self.cluster_id}"
                )
            stored_broker = props.get("broker.id", props.get("node.id"))
            if stored_broker is not None and stored_broker != str(self.broker_id):
                raise InconsistentMetadataError(
                    f"{path} belongs to broker {stored_broker}, but this is broker {self.broker_id}"
                )
        directory_id = None
        if "directory.id" in props:
            try:
                directory_id = uuid_from_base64(props["directory.id"])
            except ValueError as exc:
                raise InconsistentMetadataError(f"{path}: malformed directory.id {props['directory.id']!r}") from exc
        if directory_id in self.directory_ids.values():
            raise InconsistentMetadataError(f"{path}: directory.id {directory_id} is used by another log dir")
        version = props.get("version", NEW_META_PROPERTIES_VERSION)
        if version not in META_PROPERTIES_VERSIONS:
            raise InconsistentMetadataError(
                f"{path} has version {version!r}; this broker reads versions {', '.join(META_PROPERTIES_VERSIONS)}")
        # Kafka reads broker.id from a version-0 file and node.id from version 1.
        wanted = {"version": version, "broker.id" if version == "0" else "node.id": str(self.broker_id),
                  "cluster.id": self.cluster_id}
        if directory_id is None:
            directory_id = uuid.uuid4()
            while directory_id in _RESERVED_DIRECTORY_IDS:
                directory_id = uuid.uuid4()
        wanted["directory.id"] = uuid_to_base64(directory_id)
        if any(props.get(k) != v for k, v in wanted.items()):
            props.update(wanted)
            write_atomically(path, format_properties(props, time.strftime("%a %b %d %H:%M:%S %Z %Y")), guard)
        return directory_id

    def _read_checkpoint(self, log_dir: str, name: str) -> dict[TopicPartition, int]:
        try:
            return read_offset_checkpoint(os.path.join(log_dir, name), self._guards[log_dir])
        except CorruptCheckpointError as exc:
            # Every consumer of these values has a safe default (full recovery, start of log).
            logger.warning("ignoring unreadable checkpoint: %s", exc)
            return {}

    # ---- queries -------------------------------------------------------------------------

    @property
    def live_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if d in self.directory_ids and not self.failure_channel.is_offline(d)]

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def dir_of(self, topic: str, partition: int) -> str | None:
        log = self.logs.get((topic, partition))
        return log.log_dir if log is not None else None

    def logs_in_dir(self, log_dir: str) -> list[Log]:
        return [log for log in self.logs.values() if log.log_dir == log_dir]

    def verify_dir(self, log_dir: str) -> None:
        """Raise KafkaStorageError (reporting the dir) unless the path still leads to the very
        directory opened at startup.

        Open file descriptors keep working after a dir is deleted, replaced by a file or
        lazily unmounted, so writes through them would succeed into files nobody can reach;
        one stat of the path catches all three before anything is acknowledged.
        """
        expected = self._identities.get(log_dir)
        with self._guards[log_dir]:
            st = os.stat(log_dir)
            if expected is not None and (st.st_dev, st.st_ino) != expected:
                raise OSError(errno.ESTALE, "the directory was replaced or unmounted while in use")
            if not stat.S_ISDIR(st.st_mode):
                raise OSError(errno.ENOTDIR, "the path is no longer a directory")

    def check_dirs(self) -> list[str]:
        """verify_dir on every live dir; returns the dirs found failed."""
        failed = []
        for log_dir in self.live_dirs:
            try:
                self.verify_dir(log_dir)
            except KafkaStorageError:
                failed.append(log_dir)
        return failed

    # ---- creation, placement, deletion ------------------------------------------------

    def dir_usage(self, log_dir: str) -> DirUsage:
        """Total and usable bytes of the file system holding ``log_dir``."""
        with self._guards[log_dir]:
            st = os.statvfs(log_dir)
        return DirUsage(st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)

    def file_system_of(self, log_dir: str) -> int:
        """An id of the file system holding ``log_dir`` (its device): dirs that share one share its room."""
        with self._guards[log_dir]:
            return os.stat(log_dir).st_dev

    def placed_bytes(self, log_dir: str) -> int:
        """Bytes of the replicas (and future replicas) in ``log_dir``."""
        total = sum(log.size_bytes for log in self.logs.values() if log.log_dir == log_dir)
        return total + sum(f.size_bytes for f in self.future_logs.values() if f.log_dir == log_dir)

    def free_room(self) -> dict[str, int]:
        """Usable bytes of each live dir whose file system answers; dirs sharing a file system
        get the same figure (one statvfs each), so only their placed bytes tell them apart."""
        by_device: dict[int, int] = {}
        room: dict[str, int] = {}
        for log_dir in self.live_dirs:
            try:
                device = self.file_system_of(log_dir)
                if device not in by_device:
                    by_device[device] = self.dir_usage(log_dir).usable_bytes
            except KafkaStorageError as exc:
                logger.error("log dir %s left out of placement: %s", log_dir, exc)
                continue
            room[log_dir] = by_device[device]
        return room

    def choose_log_dir(self, topic: str) -> str:
        """Where a new replica of ``topic`` goes.

        Among the live dirs with at least ``min_free_bytes`` of usable room: the one holding
        the fewest partitions of ``topic`` (a topic spreads over the dirs), then the one with
        the most free room, then the fewest bytes already placed there (what tells apart dirs
        on one file system), then the fewest partitions, then the first configured.
        """
        live = self.live_dirs
        if not live:
            raise NoLiveLogDirError("no live log dir to place a new partition in")
        placement = self._placement if self._placement is not None else self._measure_placement()
        if self._creating_many:
            self._placement = placement
        room = placement.room
        eligible = [d for d in live if room.get(d, -1) >= self.min_free_bytes]
        if not eligible:
            raise NoLiveLogDirError(
                f"no live log dir has log.dir.min.free.bytes={self.min_free_bytes} bytes free: " + ", ".join(
                    f"{d}: {room[d]} usable" if d in room else f"{d}: unreadable" for d in live))
        per_topic = placement.of_topic(topic, self.logs)
        overall, placed = placement.partitions, placement.placed
        return min(eligible, key=lambda d: (per_topic.get(d, 0), -room[d], placed.get(d, 0), overall.get(d, 0),
                                            self.log_dirs.index(d)))

    def _measure_placement(self) -> _Placement:
        """Each dir's room, placed bytes and partition count: a pass over every log, which a
        CreateTopics of thousands of partitions made once per partition (the ten-thousandth
        partition took 35 ms to place where the first took 9)."""
        partitions: dict[str, int] = {}
        for log in self.logs.values():
            partitions[log.log_dir] = partitions.get(log.log_dir, 0) + 1
        return _Placement(self.free_room(), {d: self.placed_bytes(d) for d in self.live_dirs}, partitions)

    def get_or_create_log(
        self, topic: str, partition: int, topic_id: uuid.UUID, config: LogConfig | None = None,
        log_dir: str | None = None,
    ) -> Log:
        """The existing log of the partition, or a new one in ``log_dir`` (or a chosen dir)."""
        key = (topic, partition)
        log = self.logs.get(key)
        if log is not None:
            if log.topic_id != ZERO_UUID and log.topic_id != topic_id:
                raise InconsistentTopicIdError(
                    f"{partition_dir_name(topic, partition)} has topic id {log.topic_id}, not {topic_id}"
                )
            return log
        prepared, first_epoch = self._prepared.pop(key, (None, None))
        target = log_dir or prepared or self._take_preferred_dir(key)
        if target is None:
            target = self.choose_log_dir(topic)
        if target not in self._guards:
            raise ValueError(f"{target} is not one of the log dirs {self.log_dirs}")
        if target not in self.live_dirs:
            raise KafkaStorageError(target, partition_dir_name(topic, partition), None)
        deferred = self._creating_many > 0
        log = Log.create(target, topic, partition, topic_id, config or self.default_config, self._guards[target],
                         self.background, sync=not deferred, made=target == prepared, first_epoch=first_epoch)
        if deferred:
            self._unsynced.append(log)
        if self._placement is not None and prepared is None:  # counted when it was prepared
            self._placement.created(target, topic)
        self.logs[key] = log
        return log

    @contextlib.asynccontextmanager
    async def creating_many(self) -> AsyncIterator[None]:
        """Logs created inside are made without fsyncs, which are all made together when it
        closes, from threads of their own, before the caller goes on. Each fsync waits for a
        journal commit of the disk: three per new log one after the other on the event loop
        made a LeaderAndIsr of a hundred new replicas take seconds, and fsyncs made at once
        share their commits. Event-loop thread only; it may be entered again while open."""
        self._creating_many += 1
        try:
            yield
        finally:
            self._creating_many -= 1
            if not self._creating_many:
                self._placement = None
                self._discard_unused_prepared()
                await self._sync_created()

    async def prepare_new_logs(self, wanted: Sequence[tuple[str, int, uuid.UUID, int | None]]) -> None:
        """Inside ``creating_many``: make the files of these new logs, given as (topic, partition,
        topic id, the leader epoch it starts leading in or None), from threads side by side
        (``make_new_log_files``); ``get_or_create_log`` then only opens them. On the event loop
        one after the other, the file creations of 10,000 new replicas took seconds of one core
        in the kernel. A log that exists, or whose files cannot be made, is left to
        ``get_or_create_log`` (a dir that failed is offline)."""
        assert self._creating_many, "prepared logs are created, or discarded, as creating_many closes"
        jobs: list[_NewLog] = []
        for topic, partition, topic_id, first_epoch in wanted:
            key = (topic, partition)
            if key in self.logs or key in self._prepared:
                continue
            try:
                target = self._take_preferred_dir(key) or self.choose_log_dir(topic)
            except NoLiveLogDirError:
                break  # left to get_or_create_log, which says so
            if self._placement is not None:
                self._placement.created(target, topic)
            self._prepared[key] = (target, first_epoch)
            jobs.append((key, os.path.join(target, partition_dir_name(*key)), topic_id, first_epoch))
        for (key, dir_path, _, _), error in zip(jobs, await _in_threads(_make_files, jobs), strict=True):
            if error is None:
                continue
            target, _ = self._prepared.pop(key)
            if not isinstance(error, FileExistsError):
                logger.error("creating %s failed: %s", dir_path, error)
                self._guards[target].channel.report(target, error)

    def _discard_unused_prepared(self) -> None:
        """Prepared logs nobody created (their partition was not taken after all): their files go."""
        unused, self._prepared = self._prepared, {}
        for key, (target, _) in unused.items():
            dir_path = os.path.join(target, partition_dir_name(*key))
            logger.info("removing %s, made for a new replica that was not created", dir_path)
            with contextlib.suppress(OSError):
                shutil.rmtree(dir_path)

    async def _sync_created(self) -> None:
        logs, self._unsynced = self._unsynced, []
        guards = {path: log.guard if path != log.log_dir else self._guards[log.log_dir]
                  for log in logs if not log.closed for path in log.unsynced_paths()}
        paths = list(guards)
        for path, outcome in zip(paths, await _in_threads(fsync_path, paths), strict=True):
            if isinstance(outcome, FileNotFoundError):
                continue  # no epoch written (a follower's), or the new log deleted or moved meanwhile
            if outcome is not None:
                logger.error("fsync of %s, just created, failed: %s", path, outcome)
                guards[path].channel.report(guards[path].log_dir, outcome)

    def _take_preferred_dir(self, key: TopicPartition) -> str | None:
        preferred = self.preferred_log_dirs.pop(key, None)
        if preferred is not None and preferred not in self.live_dirs:
            logger.warning("%s was to be created in %s, which is offline; placing it elsewhere",
                           partition_dir_name(*key), preferred)
            return None
        return preferred

    def delete_log(self, topic: str, partition: int, now_ms: int | None = None) -> None:
        """Forget the partition's log and rename its dir ``...-delete``; the files go after
        file.delete.delay.ms (on a later ``run_retention``, or at the next startup)."""
        self._moved.pop((topic, partition), None)
        self._marker_clearable.discard((topic, partition))
        if (topic, partition) in self.future_logs:
            retired = self.abandon_future_log(topic, partition)
            if retired is not None:
                self._pending_dir_deletes.append((now_ms if now_ms is not None else _now_ms(),) + retired)
        log = self.logs.pop((topic, partition), None)
        if log is None:
            return
        path = log.delete()
        delay = log.config.file_delete_delay_ms
        if delay <= 0:
            self._remove_tree_in_background(log.log_dir, path)
        else:
            now = now_ms if now_ms is not None else _now_ms()
            self._pending_dir_deletes.append((now + delay, log.log_dir, path))

    def _remove_tree(self, log_dir: str, path: str) -> None:
        with self._guards[log_dir]:
            shutil.rmtree(path)

    def _remove_tree_in_background(self, log_dir: str, path: str) -> None:
        """Remove a retired dir off the event loop: freeing a GiB of cached pages takes a
        good part of a second. Nothing refers to the dir any more, so nothing waits for it."""
        self.background.submit(self._guards[log_dir], lambda: shutil.rmtree(path))

    def take_dir_offline(self, log_dir: str) -> list[TopicPartition]:
        """Drop (and close, without I/O) every log of a failed dir; returns their partitions."""
        gone = [key for key, log in self.logs.items() if log.log_dir == log_dir]
        for key in gone:
            self.logs.pop(key).close()
        for key in [key for key, future in self.future_logs.items() if future.log_dir == log_dir]:
            del self.future_logs[key]
        self.directory_ids.pop(log_dir, None)
        self._identities.pop(log_dir, None)
        self._pending_dir_deletes = [e for e in self._pending_dir_deletes if e[1] != log_dir]
        self._release_lock(log_dir)
        return gone

    # ---- moves between log dirs (KIP-113) ----------------------------------------------
    #
    # A move copies the current log of a partition into a future dir in another log dir (a
    # FutureLogCopy of future_log.py does, driven by the LogDirMover) and then swaps it in.  The
    # swap, and a startup after a crash at any instant of it, go through the marker file written
    # into the future dir first:
    #
    #   1. the future dir is a complete, durable image of the current log (FutureLogCopy.complete);
    #   2. ``commit_future_log``: write MOVE_MARKER_FILE into it (atomic, fsynced) and serve the
    #      partition from the future dir: the swap is decided, appends go there from now on;
    #   3. ``retire_moved_source``: rename the old dir ``-delete`` in the source dir;
    #   4. ``promote_future_log``: rename the future dir ``<topic>-<partition>``;
    #   5. the marker goes with the destination's next checkpoint (which then lists the log).
    #
    # Only 1-2 must happen with no append in between; 3-5 may interleave with appends.  A
    # startup that finds a future dir with the marker finishes 3-5 (recovering what was appended
    # after 2), unless the current log took appends the future never saw (its dir was offline
    # when the broker ran without it); a future dir without the marker resumes the move.  A
    # partition in two dirs is legitimate only when one holds the marker naming the other's dir
    # (the source was offline when the swap was finished); then the source copy goes.

    def create_future_log(self, topic: str, partition: int, log_dir: str) -> FutureLog:
        """Make the empty future dir of a move of the partition into ``log_dir``; registers it.

        Raises ValueError when the partition has no log here, already has a future log, or
        is in ``log_dir`` already; KafkaStorageError when ``log_dir`` is offline or fails.
        """
        key = (topic, partition)
        current = self.logs.get(key)
        if current is None:
            raise ValueError(f"{partition_dir_name(topic, partition)} has no log on this broker")
        if key in self.future_logs:
            raise ValueError(f"{current.name} is already being moved to {self.future_logs[key].log_dir}")
        if log_dir == current.log_dir:
            raise ValueError(f"{current.name} is in {log_dir} already")
        if log_dir not in self._guards:
            raise ValueError(f"{log_dir} is not one of the log dirs {self.log_dirs}")
        if log_dir not in self.live_dirs:
            raise KafkaStorageError(log_dir, current.name, None)
        guard = self._guards[log_dir].for_partition(current.name)
        path = os.path.join(log_dir, future_dir_name(topic, partition))
        with guard:
            os.mkdir(path)
        write_partition_metadata(os.path.join(path, PARTITION_METADATA), current.topic_id, guard)
        fsync_dir(log_dir, guard)
        future = FutureLog(topic, partition, current.topic_id, log_dir, path)
        self.future_logs[key] = future
        return future

    def abandon_future_log(self, topic: str, partition: int) -> tuple[str, str] | None:
        """Drop the partition's future log and rename its dir ``-delete``; returns (log dir,
        new path) for the caller to remove (it may be large), None if there was none."""
        future = self.future_logs.pop((topic, partition), None)
        if future is None:
            return None
        guard = self._guards[future.log_dir].for_partition(future.name)
        target = os.path.join(future.log_dir, f"{future.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        with guard:
            os.rename(future.dir_path, target)
        return future.log_dir, target

    def forget_future_log(self, topic: str, partition: int) -> FutureLog | None:
        """Stop tracking the partition's future log without touching its files (used when its
        dir or its source's dir failed: the files may be all that is left of the data)."""
        return self.future_logs.pop((topic, partition), None)

    def remove_retired(self, log_dir: str, path: str) -> None:
        """Remove a ``-delete`` dir now (blocking: callers run it off the event loop only if
        they turn an OSError into a report of ``log_dir`` themselves)."""
        self._remove_tree(log_dir, path)

    def commit_future_log(self, topic: str, partition: int) -> tuple[Log, Log]:
        """Steps 2 of the swap: decide it durably and serve the partition from the future dir;
        returns (new log, old log).  The old log is closed, its files untouched.

        The caller made the future dir a durable byte image of the current log (segments,
        index files, leader-epoch checkpoint, a producer snapshot at the log end) and lets no
        append in between.  Raises KafkaStorageError if the destination fails; the current
        log is then still the partition's.
        """
        key = (topic, partition)
        future = self.future_logs[key]
        current = self.logs[key]
        dest_guard = self._guards[future.log_dir].for_partition(current.name)
        marker = {
            "topic": topic,
            "partition": partition,
            "topic_id": str(current.topic_id),
            "source_dir": current.log_dir,
            "log_end_offset": current.log_end_offset,
            "log_start_offset": current.log_start_offset,
            "high_watermark": current.high_watermark,
            "clean_until": current.clean_until,
        }
        write_atomically(os.path.join(future.dir_path, MOVE_MARKER_FILE), json.dumps(marker).encode(), dest_guard)
        hook_point("swap.marker_written")
        new = Log.load(future.log_dir, future.dir_path, current.config, self._guards[future.log_dir], clean=True,
                       recovery_point=current.log_end_offset, log_start_offset=current.log_start_offset,
                       high_watermark=current.high_watermark, clean_until=current.clean_until,
                       background=self.background)
        current.close()
        del self.future_logs[key]
        self.logs[key] = new
        self._moved[key] = current.log_dir
        return new, current

    def retire_moved_source(self, old: Log, sync: bool = True) -> str:
        """Step 3: rename the old dir of a moved partition ``-delete``; returns its new path."""
        return old.delete(sync=sync)

    def promote_future_log(self, topic: str, partition: int, sync: bool = True) -> str | None:
        """Step 4: give the moved log (served from its future dir) the partition's dir name;
        None if there is nothing to rename (the partition was deleted meanwhile)."""
        log = self.logs.get((topic, partition))
        if log is None or not log.dir_path.endswith(FUTURE_DIR_SUFFIX):
            return None
        final = os.path.join(log.log_dir, log.name)
        log.rename_dir(final)
        if sync:
            fsync_dir(log.log_dir, log.guard)
        hook_point("swap.future_promoted")
        return final

    def source_retired(self, topic: str, partition: int) -> None:
        """Steps 3-4 are durable: the marker may go with the destination's next checkpoint."""
        if (topic, partition) in self._moved:
            self._marker_clearable.add((topic, partition))

    def replace_current_with_future(self, topic: str, partition: int) -> tuple[Log, str]:
        """The whole swap at once, fsyncs included (for callers that need not let appends in
        between the steps); returns the new log and the ``-delete`` path of the old one."""
        new, old = self.commit_future_log(topic, partition)
        retired = self.retire_moved_source(old)
        hook_point("swap.source_retired")
        self.promote_future_log(topic, partition)
        self.source_retired(topic, partition)
        self._checkpoint_dir(new.log_dir)
        self._clear_markers(new.log_dir)
        return new, retired

    def _remove_marker(self, dir_path: str, guard: DirGuard) -> None:
        with guard:
            os.unlink(os.path.join(dir_path, MOVE_MARKER_FILE))
        fsync_dir(dir_path, guard)

    def _read_marker(self, log_dir: str, dir_path: str) -> dict[str, object] | None:
        """The move marker in ``dir_path``, None if there is none or it does not parse (it is
        written atomically, so an unreadable one was never a decision)."""
        text = read_text(os.path.join(dir_path, MOVE_MARKER_FILE), self._guards[log_dir])
        if text is None:
            return None
        try:
            marker = json.loads(text)
            int(marker["log_end_offset"])
            str(marker["source_dir"])
        except (ValueError, KeyError, TypeError):
            logger.warning("ignoring the unreadable move marker in %s", dir_path)
            return None
        return marker

    def _marker_offsets(self, log_dir: str, path: str, offsets: tuple[int | None, ...]) -> tuple[int | None, ...]:
        """Offsets for a log its dir's checkpoints do not list yet: a moved log still holding its
        swap marker has them there (everything up to its log end then was fsynced)."""
        marker = self._read_marker(log_dir, path)
        if marker is None:
            return offsets
        return (int(marker["log_end_offset"]), int(marker["log_start_offset"]),  # type: ignore[call-overload]
                int(marker["high_watermark"]), int(marker.get("clean_until", 0)))  # type: ignore[call-overload]

    def _move_explains(self, first: str, second: str) -> bool:
        """Whether one of two dirs of the same partition holds a move marker naming the
        other's log dir as the source (a swap finished while the source dir was offline)."""
        for winner, other in ((first, second), (second, first)):
            log_dir = os.path.dirname(winner)
            marker = self._read_marker(log_dir, winner)
            if marker is not None and marker["source_dir"] == os.path.dirname(other):
                return True
        return False

    def _settle_twins(self, first: Log, second: Log) -> Log:
        """Keep the moved copy of a partition found in two dirs (``_move_explains`` said why),
        unless the other copy took appends after the swap; retire the loser. Returns the winner."""
        moved, source = (first, second)
        marker = self._read_marker(first.log_dir, first.dir_path)
        if marker is None or marker["source_dir"] != second.log_dir:
            moved, source = second, first
            marker = self._read_marker(second.log_dir, second.dir_path)
        assert marker is not None
        if source.log_end_offset > int(marker["log_end_offset"]):  # type: ignore[call-overload]
            winner, loser = source, moved
            logger.error("%s is in %s and %s: the copy in %s took appends after the move's swap, so it is "
                         "kept and the moved copy (ending at offset %s) is retired", source.name,
                         source.log_dir, moved.log_dir, source.log_dir, marker["log_end_offset"])
        else:
            winner, loser = moved, source
            logger.warning("%s: finishing a move swapped while %s was offline; retiring the copy there",
                           source.name, source.log_dir)
        key = (loser.topic, loser.partition)
        if self.logs.get(key) is loser:
            self.logs[key] = winner
        self._remove_tree(loser.log_dir, loser.delete())
        self._remove_marker(moved.dir_path, self._guards[moved.log_dir].for_partition(moved.name))
        return winner

    def _settle_moves(self) -> None:
        """At startup: finish the swaps that were decided, resume the other moves, and drop
        markers left in moved logs once their source dir is known to be clean."""
        found, self._found_futures = self._found_futures, []
        for log_dir, path in found:
            if log_dir not in self.live_dirs:
                continue
            try:
                self._settle_future(log_dir, path)
            except KafkaStorageError as exc:
                logger.error("could not settle the move in %s: %s", path, exc)
        for log in list(self.logs.values()):
            if log.log_dir not in self.live_dirs:
                continue
            try:
                marker = self._read_marker(log.log_dir, log.dir_path)
                if marker is not None and marker["source_dir"] in self.live_dirs:
                    self._checkpoint_dir(log.log_dir)
                    self._remove_marker(log.dir_path, log.guard)
                    logger.info("finished the swap of %s into %s, decided before the broker stopped", log.name,
                                log.log_dir)
            except KafkaStorageError as exc:
                logger.error("could not check %s for a move marker: %s", log.dir_path, exc)

    def _settle_future(self, log_dir: str, path: str) -> None:
        parsed = parse_future_dir(os.path.basename(path))
        if parsed is None:
            logger.warning("leaving %s alone: not a future dir name this broker makes", path)
            return
        key = parsed
        name = partition_dir_name(*key)
        guard = self._guards[log_dir].for_partition(name)
        marker = self._read_marker(log_dir, path)
        current = self.logs.get(key)
        if marker is None:
            if current is None:
                logger.warning("leaving %s alone: a move's copy whose source is in no live log dir", path)
            elif current.log_dir == log_dir or key in self.future_logs:
                logger.info("removing %s: a stale copy of an unfinished move", path)
                self._remove_tree(log_dir, path)
            else:
                self.future_logs[key] = FutureLog(key[0], key[1], current.topic_id, log_dir, path, resumed=True)
                logger.info("resuming the move of %s from %s to %s", name, current.log_dir, log_dir)
            return
        if current is not None and (current.log_dir != marker["source_dir"]
                                    or current.log_end_offset > int(marker["log_end_offset"])):  # type: ignore[call-overload]
            logger.warning("removing %s: its swap was decided, but %s in %s has moved on since", path, name,
                           current.log_dir)
            self._remove_tree(log_dir, path)
            return
        if current is not None:
            del self.logs[key]
            self._remove_tree(current.log_dir, current.delete())
        final = os.path.join(log_dir, name)
        with guard:
            os.rename(path, final)
        fsync_dir(log_dir, guard)
        # Appends may have followed the decision: recover from the log end it had then.
        end = int(marker["log_end_offset"])  # type: ignore[call-overload]
        self.logs[key] = Log.load(log_dir, final, self.default_config, self._guards[log_dir], clean=False,
                                  recovery_point=end, log_start_offset=int(marker["log_start_offset"]),  # type: ignore[call-overload]
                                  high_watermark=int(marker["high_watermark"]),  # type: ignore[call-overload]
                                  clean_until=int(marker.get("clean_until", 0)),  # type: ignore[call-overload]
                                  background=self.background)
        logger.info("finished the swap of %s into %s, decided before the broker stopped", name, log_dir)
        if marker["source_dir"] in self.live_dirs:
            self._checkpoint_dir(log_dir)
            self._remove_marker(final, guard)

    # ---- periodic work ----------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the three offset checkpoint files of every live dir (atomically)."""
        for log_dir in self.live_dirs:
            try:
                self._checkpoint_dir(log_dir)
                self._clear_markers(log_dir)
            except KafkaStorageError as exc:
                logger.error("checkpoint of %s failed: %s", log_dir, exc)

    def _clear_markers(self, log_dir: str) -> None:
        """Drop the swap markers of logs moved into ``log_dir`` whose source is retired: its
        checkpoints, just written, list them now."""
        for key in [k for k in self._marker_clearable if k in self.logs and self.logs[k].log_dir == log_dir]:
            log = self.logs[key]
            self._remove_marker(log.dir_path, log.guard)
            self._marker_clearable.discard(key)
            self._moved.pop(key, None)

    def _checkpoint_dir(self, log_dir: str) -> None:
        # Written by path: make sure the path still leads to the dir (not a bare mount point).
        self.verify_dir(log_dir)
        guard = self._guards[log_dir]
        logs = {(log.topic, log.partition): log for log in self.logs_in_dir(log_dir)}
        write_offset_checkpoint(
            os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT),
            {key: log.recovery_point for key, log in logs.items()}, guard,
        )
        write_offset_checkpoint(
            os.path.join(log_dir, REPLICATION_CHECKPOINT),
            {key: log.high_watermark for key, log in logs.items()}, guard,
        )
        write_offset_checkpoint(
            os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT),
            {key: log.log_start_offset for key, log in logs.items()}, guard,
        )
        self._write_cleaner_checkpoint(log_dir, logs)

    def write_cleaner_checkpoint(self, log_dir: str) -> None:
        """Record where the dirty part of each cleaned log of ``log_dir`` starts (after a clean)."""
        self.verify_dir(log_dir)
        self._write_cleaner_checkpoint(log_dir, {(log.topic, log.partition): log for log in self.logs_in_dir(log_dir)})

    def _write_cleaner_checkpoint(self, log_dir: str, logs: dict[TopicPartition, Log]) -> None:
        write_offset_checkpoint(os.path.join(log_dir, CLEANER_CHECKPOINT),
                                {key: log.clean_until for key, log in logs.items() if log.clean_until > 0},
                                self._guards[log_dir])

    def flush(self) -> None:
        """fsync every log's unflushed data, moving recovery points to the log ends."""
        for log in list(self.logs.values()):
            if log.log_dir in self.live_dirs:
                try:
                    log.flush()
                except KafkaStorageError as exc:
                    logger.error("flush of %s failed: %s", log.name, exc)

    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every live log and finish due deletions; returns segments deleted."""
        deleted = 0
        live = set(self.live_dirs)
        for log in list(self.logs.values()):
            if log.log_dir not in live:
                continue
            try:
                deleted += log.enforce_retention(now_ms)
            except KafkaStorageError as exc:
                logger.error("retention of %s failed: %s", log.name, exc)
        due = [entry for entry in self._pending_dir_deletes if entry[0] <= now_ms]
        self._pending_dir_deletes = [entry for entry in self._pending_dir_deletes if entry[0] > now_ms]
        for _, log_dir, path in due:
            if log_dir in live:
                try:
                    self._remove_tree_in_background(log_dir, path)
                except KafkaStorageError as exc:
                    logger.error("removing %s failed: %s", path, exc)
        return deleted

    # ---- shutdown ---------------------------------------------------------------------

    def shutdown(self) -> None:
        """Flush, snapshot producer state, checkpoint, mark each healthy dir cleanly shut
        down, close every log and release the locks."""
        live = set(self.live_dirs)
        for log_dir in self.log_dirs:
            logs = self.logs_in_dir(log_dir)
            healthy = log_dir in live
            if healthy:
                try:
                    for log in logs:
                        log.flush()
                        log.take_producer_snapshot()
                    self._checkpoint_dir(log_dir)
                    self._clear_markers(log_dir)
                    for _, pending_dir, path in self._pending_dir_deletes:
                        if pending_dir == log_dir:
                            self._remove_tree(log_dir, path)
                except KafkaStorageError as exc:
                    logger.error("clean shutdown of %s failed: %s", log_dir, exc)
                    healthy = False
            for log in logs:
                log.close()
            if healthy:
                try:
                    guard = self._guards[log_dir]
                    with guard:
                        os.close(os.open(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), os.O_WRONLY | os.O_CREAT, 0o644))
                    fsync_dir(log_dir, guard)
                except KafkaStorageError as exc:
                    logger.error("could not mark %s cleanly shut down: %s", log_dir, exc)
            self._release_lock(log_dir)
        self._pending_dir_deletes = []
        self.logs = {}
        self.future_logs = {}
        self.background.close()
