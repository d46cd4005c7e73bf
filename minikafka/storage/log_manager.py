"""The broker's log dirs and every partition log in them."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import stat
import time
import uuid

from minikafka.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    CorruptCheckpointError,
    format_properties,
    fsync_dir,
    parse_properties,
    read_offset_checkpoint,
    read_text,
    uuid_from_base64,
    uuid_to_base64,
    write_atomically,
    write_offset_checkpoint,
)
from minikafka.storage.dir_io import DirGuard
from minikafka.storage.errors import (
    InconsistentMetadataError,
    InconsistentTopicIdError,
    KafkaStorageError,
    LogDirLockedError,
    NoLiveLogDirError,
)
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    ZERO_UUID,
    Log,
    LogConfig,
    parse_partition_dir,
    partition_dir_name,
)

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES_VERSION = "1"
# Kafka reserves the smallest uuids as markers (unknown, offline, lost dir).
_RESERVED_DIRECTORY_IDS = {uuid.UUID(int=i) for i in range(100)}

TopicPartition = tuple[str, int]


# Startup writes this much into every log dir (then removes it): a dir that cannot take it has
# no room for the checkpoints and metadata the broker must write, let alone for records.
ROOM_PROBE_FILE = ".minikafka-room-probe"
ROOM_PROBE_BYTES = 64 * 1024


def _now_ms() -> int:
    return int(time.time() * 1000)


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
        bad[log_dir] = problem.strerror
        logger.error("log dir %s cannot be used: %s", log_dir, problem.strerror)
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




class LogManager:
    """Owns the broker's log dirs: their locks, meta.properties and directory ids, the
    offset checkpoint files, placement of new logs, loading/recovery at startup, retention
    runs, deletion of removed logs, and the ``logs`` map of every loaded Log.

    Called from the broker's event-loop thread only (ReplicaManager creates and deletes
    logs; the broker's schedulers call ``checkpoint`` and ``run_retention``).  A dir whose
    I/O fails is reported to the LogDirFailureChannel and skipped from then on.
    """

    def __init__(
        self, log_dirs: list[str], broker_id: int, cluster_id: str, default_config: LogConfig,
        failure_channel: LogDirFailureChannel,
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
        self.logs: dict[TopicPartition, Log] = {}
        self.directory_ids: dict[str, uuid.UUID] = {}
        self._guards = {d: DirGuard(d, failure_channel) for d in self.log_dirs}
        self._lock_fds: dict[str, int] = {}
        # (st_dev, st_ino) of each dir as opened: a dir replaced or unmounted under us differs.
        self._identities: dict[str, tuple[int, int]] = {}
        self._pending_dir_deletes: list[tuple[int, str, str]] = []  # (due ms, log dir, path)
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
                    logger.info("leaving future log %s alone", path)
                    continue
                key = parse_partition_dir(name)
                if key is None:
                    continue
                if key in self.logs:
                    raise InconsistentMetadataError(
                        f"partition {name} is in two log dirs: {self.logs[key].log_dir} and {log_dir}"
                    )
                loaded[key] = Log.load(
                    log_dir, path, self.default_config, guard, clean=clean,
                    recovery_point=recovery_points.get(key), log_start_offset=log_start_offsets.get(key),
                    high_watermark=high_watermarks.get(key),
                )
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
        logger.info("loaded %d logs from %s (%s shutdown)", len(loaded), log_dir, "clean" if clean else "unclean")

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
        # Kafka reads node.id from a version-1 file and broker.id from version 0: write both.
        wanted = {
            "version": META_PROPERTIES_VERSION,
            "broker.id": str(self.broker_id),
            "node.id": str(self.broker_id),
            "cluster.id": self.cluster_id,
        }
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

    def choose_log_dir(self, topic: str) -> str:
        """Where a new replica of ``topic`` goes: the live dir with the fewest partitions of
        this topic, then the fewest partitions overall, then the first configured."""
        live = self.live_dirs
        if not live:
            raise NoLiveLogDirError("no live log dir to place a new partition in")
        per_topic = dict.fromkeys(live, 0)
        overall = dict.fromkeys(live, 0)
        for (log_topic, _), log in self.logs.items():
            if log.log_dir in overall:
                overall[log.log_dir] += 1
                if log_topic == topic:
                    per_topic[log.log_dir] += 1
        return min(live, key=lambda d: (per_topic[d], overall[d], self.log_dirs.index(d)))

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
        target = log_dir if log_dir is not None else self.choose_log_dir(topic)
        if target not in self._guards:
            raise ValueError(f"{target} is not one of the log dirs {self.log_dirs}")
        if target not in self.live_dirs:
            raise KafkaStorageError(target, partition_dir_name(topic, partition), None)
        log = Log.create(target, topic, partition, topic_id, config or self.default_config, self._guards[target])
        self.logs[key] = log
        return log

    def delete_log(self, topic: str, partition: int, now_ms: int | None = None) -> None:
        """Forget the partition's log and rename its dir ``...-delete``; the files go after
        file.delete.delay.ms (on a later ``run_retention``, or at the next startup)."""
        log = self.logs.pop((topic, partition), None)
        if log is None:
            return
        path = log.delete()
        delay = log.config.file_delete_delay_ms
        if delay <= 0:
            self._remove_tree(log.log_dir, path)
        else:
            now = now_ms if now_ms is not None else _now_ms()
            self._pending_dir_deletes.append((now + delay, log.log_dir, path))

    def _remove_tree(self, log_dir: str, path: str) -> None:
        with self._guards[log_dir]:
            shutil.rmtree(path)

    def take_dir_offline(self, log_dir: str) -> list[TopicPartition]:
        """Drop (and close, without I/O) every log of a failed dir; returns their partitions."""
        gone = [key for key, log in self.logs.items() if log.log_dir == log_dir]
        for key in gone:
            self.logs.pop(key).close()
        self.directory_ids.pop(log_dir, None)
        self._identities.pop(log_dir, None)
        self._pending_dir_deletes = [e for e in self._pending_dir_deletes if e[1] != log_dir]
        self._release_lock(log_dir)
        return gone

    # ---- periodic work ----------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the three offset checkpoint files of every live dir (atomically)."""
        for log_dir in self.live_dirs:
            try:
                self._checkpoint_dir(log_dir)
            except KafkaStorageError as exc:
                logger.error("checkpoint of %s failed: %s", log_dir, exc)

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
                    self._remove_tree(log_dir, path)
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
