"""The three ways tests make a log dir fail (ACCEPTANCE.md, "How to make a disk fail here").

Tests run as root, so permissions fail nothing. Instead:
- ``replace_with_file``: the dir is removed and a regular file takes its path (KIP-112's own
  recipe); needs nothing and always runs.
- ``Tmpfs.fill``: a small tmpfs mounted on the dir is filled until writes get ENOSPC.
- ``Tmpfs.lazy_unmount``: ``umount -l`` under a running broker; its open files keep working
  but every path in the dir now leads to the empty mount point beneath.
The mount-based ones need ``mount``; ``mount_unavailable()`` says why not, for a clear skip.

A ``Tmpfs`` belongs to the test that made it; ``close()`` (also run at exit for any forgotten
one) leaves nothing mounted.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.memory_records import MemoryRecordsBuilder

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import confluent_consume, confluent_produce

FAULT_KINDS = ("regular-file", "enospc", "lazy-unmount")
MOUNT_KINDS = frozenset({"enospc", "lazy-unmount"})

_mounted: set[Tmpfs] = set()
_mount_check: list[str | None] = []


def replace_with_file(path: Path) -> None:
    """Remove the dir (whatever is open in it stays open) and put a regular file in its place.
    The dir is moved aside first: a broker writing into it meanwhile made rmtree fail with
    "Directory not empty"; what it still writes there is no longer the log dir's path. Its name
    is one a broker deletes on sight (Kafka's for a deleted partition), should it be left over."""
    aside = path.with_name(f"{path.name}.{uuid.uuid4().hex}-delete")
    path.rename(aside)
    path.write_text("this used to be a log dir\n")
    shutil.rmtree(aside, ignore_errors=True)


def replace_with_empty_dir(path: Path) -> None:
    """What an operator does after swapping the failed disk for a new one."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.mkdir()


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)


def mount_unavailable() -> str | None:
    """None when this machine lets the tests mount a tmpfs; otherwise why it does not."""
    if not _mount_check:
        _mount_check.append(_probe_mount())
    return _mount_check[0]


def _probe_mount() -> str | None:
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "the mount and umount commands are not installed"
    target = tempfile.mkdtemp(prefix="minikafka-mount-probe-")
    try:
        result = _run("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", target)
        if result.returncode != 0:
            return f"mount -t tmpfs is refused here ({(result.stderr or result.stdout).strip()})"
        _run("umount", target)
        return None
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(target)


class Tmpfs:
    """A tmpfs of ``size_bytes`` mounted on ``path`` (created if missing)."""

    def __init__(self, path: Path, size_bytes: int = 32 << 20) -> None:
        self.path = Path(path)
        self.size_bytes = size_bytes
        self.mounted = False
        self.detached = False  # lazily unmounted: gone from the tree, alive while files are open

    def mount(self) -> Tmpfs:
        self.path.mkdir(parents=True, exist_ok=True)
        result = _run("mount", "-t", "tmpfs", "-o", f"size={self.size_bytes}", "tmpfs", str(self.path))
        if result.returncode != 0:
            raise RuntimeError(f"mount on {self.path} failed: {(result.stderr or result.stdout).strip()}")
        self.mounted = True
        _mounted.add(self)
        return self

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill(self, leave_free: int = 0) -> int:
        """Write a filler file until the tmpfs has no block left (or only about ``leave_free``
        bytes); returns the bytes written."""
        assert self.mounted and not self.detached, "fill needs the tmpfs mounted"
        written = 0
        with open(self.path / "filler", "ab", buffering=0) as f:
            for chunk in (1 << 20, 64 << 10, 4 << 10, 512):
                block = b"\0" * chunk
                while self.free_bytes() - chunk >= leave_free:
                    try:
                        written += f.write(block) or 0
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        break
        return written

    def lazy_unmount(self) -> None:
        """``umount -l``: the dir's path now shows the empty mount point underneath."""
        result = _run("umount", "-l", str(self.path))
        if result.returncode != 0:
            raise RuntimeError(f"umount -l {self.path} failed: {(result.stderr or result.stdout).strip()}")
        self.detached = True
        self.mounted = False
        _mounted.discard(self)

    def unmount(self) -> None:
        """Unmount (lazily, in case a broker still has files open); the mount point stays."""
        if self.mounted:
            self.lazy_unmount()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.unmount()

    def __enter__(self) -> Tmpfs:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@atexit.register
def _unmount_forgotten() -> None:
    for tmpfs in list(_mounted):
        tmpfs.close()


def start_broker_with_doomed_dir(kind: str, root: Path, brokers: list[BrokerProcess], mounts: list[Tmpfs],
                                 size_bytes: int = 32 << 20) -> tuple[BrokerProcess, Tmpfs | None]:
    """A started broker whose second log dir will fail by ``kind``: for the mount-based kinds
    that dir is a small tmpfs.  Skips (saying why) when ``kind`` needs mount and mount is
    refused.  The broker and mount are appended to ``brokers`` and ``mounts`` for cleanup."""
    if kind in MOUNT_KINDS and (why := mount_unavailable()) is not None:
        import pytest

        pytest.skip(f"the {kind} fault needs a tmpfs mount: {why}")
    broker = BrokerProcess(root, overrides={"log.dir.check.interval.ms": "200"})
    brokers.append(broker)
    tmpfs = None
    if kind in MOUNT_KINDS:
        tmpfs = Tmpfs(broker.log_dirs[1], size_bytes).mount()
        mounts.append(tmpfs)
    return broker.start(), tmpfs


def inject(kind: str, log_dir: Path, tmpfs: Tmpfs | None) -> None:
    """Make ``log_dir`` fail by ``kind`` (its tmpfs for the mount-based kinds)."""
    if kind == "regular-file":
        replace_with_file(log_dir)
    elif kind == "enospc":
        assert tmpfs is not None and tmpfs.mounted
        tmpfs.fill()
    elif kind == "lazy-unmount":
        assert tmpfs is not None and tmpfs.mounted
        tmpfs.lazy_unmount()
    else:
        raise ValueError(f"unknown fault kind {kind!r}")


def split_by_dir(broker: BrokerProcess, topic: str) -> tuple[list[int], list[int]]:
    """(partitions in the first log dir, partitions in the second), from the files on disk."""
    placed = {name: d for name, d in broker.partition_dirs().items() if name.rsplit("-", 1)[0] == topic}
    first = sorted(int(n.rsplit("-", 1)[1]) for n, d in placed.items() if d == broker.log_dirs[0])
    second = sorted(int(n.rsplit("-", 1)[1]) for n, d in placed.items() if d == broker.log_dirs[1])
    assert first and second, f"{topic} is not spread over both log dirs: {placed}"
    return first, second


# ---------------------------------------------------------------- what the tests look at afterwards

def offline_counts(broker: BrokerProcess) -> tuple[float | None, float | None]:
    """(OfflineLogDirectoryCount, OfflineReplicaCount) as the broker exports them."""
    text = broker.metrics_text()
    values = []
    for name in (OFFLINE_DIRS_METRIC, OFFLINE_REPLICAS_METRIC):
        match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        values.append(float(match[1]) if match else None)
    return values[0], values[1]


OFFLINE_DIRS_METRIC = "kafka_log_LogManager_OfflineLogDirectoryCount"
OFFLINE_REPLICAS_METRIC = "kafka_server_ReplicaManager_OfflineReplicaCount"
KAFKA_STORAGE_ERROR = 56
NOT_LEADER_OR_FOLLOWER = 6
LEADER_NOT_AVAILABLE = 5


def partition_metadata(broker: BrokerProcess, topic: str) -> dict[int, Any]:
    """{partition: kafka-python's Metadata v9 partition} of one topic."""
    with broker.wire() as wire:
        response = wire.metadata([topic], version=9)
    (found,) = response.topics
    assert found.error_code == 0, found
    return {p.partition_index: p for p in found.partitions}


def records_blob(value: bytes, key: bytes = b"k") -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=max(1 << 20, 2 * len(value)))
    builder.append(timestamp=int(time.time() * 1000), key=key, value=value)
    builder.close()
    return bytes(builder.buffer())


def raw_produce(broker: BrokerProcess, topic: str, partition: int, value: bytes, timeout: float = 15.0) -> int:
    """Produce one record (acks=all) over a bare connection; the partition's error code.

    A broker that does not answer fails the call with a socket timeout: never a hang."""
    request = ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=records_blob(value))])])
    with broker.wire(timeout=timeout) as wire:
        response = wire.request(request, 9, ProduceResponse)
    (topic_response,) = response.responses
    (partition_response,) = topic_response.partition_responses
    return partition_response.error_code


def raw_fetch(broker: BrokerProcess, topic: str, partition: int, offset: int, max_wait_ms: int,
              timeout: float = 15.0) -> Any:
    """One Fetch (v12) of one partition; its partition response."""
    fetch_partition = FetchRequest.FetchTopic.FetchPartition
    request = FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[fetch_partition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id="")
    with broker.wire(timeout=timeout) as wire:
        response = wire.request(request, 12, FetchResponse)
    (topic_response,) = response.responses
    (partition_response,) = topic_response.partitions
    return partition_response


def describe_log_dirs(broker: BrokerProcess) -> dict[str, tuple[int, set[str]]] | None:
    """{log dir: (error code, {'topic-partition'})} from DescribeLogDirs; None when the broker
    does not offer the API."""
    if 35 not in broker.advertised_versions():
        return None
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="tests-log-dirs")
    try:
        (answer,) = admin.describe_log_dirs()
    finally:
        admin.close()
    found: dict[str, tuple[int, set[str]]] = {}
    for result in answer["log_dirs"]:
        names = {f"{t['name']}-{p['partition_index']}" for t in result["topics"] for p in t["partitions"]}
        found[result["log_dir"]] = (result["error_code"], names)
    return found


def log_lines(broker: BrokerProcess, *needles: str) -> list[str]:
    """Lines of the broker's stderr (all starts) that contain every needle."""
    text = broker.stderr_path.read_text(errors="replace") if broker.stderr_path.exists() else ""
    return [line for line in text.splitlines() if all(n in line for n in needles)]


def produce_keyed(broker: BrokerProcess, topic: str, partitions: list[int], per_partition: int,
                  tag: str, value_bytes: int = 0) -> dict[bytes, tuple[int, int]]:
    """Produce ``per_partition`` keyed records to each partition (idempotent, acks=all), each
    value ``value of <key>`` padded with dots to ``value_bytes``; {key: (partition, offset)} of
    every acknowledged one."""
    acked: dict[bytes, tuple[int, int]] = {}
    for p in partitions:
        keys = [f"{tag}-{p}-{i}".encode() for i in range(per_partition)]
        where = confluent_produce(broker.bootstrap, topic, [(k, (b"value of " + k).ljust(value_bytes, b"."))
                                                            for k in keys], partition=p)
        acked.update(zip(keys, where, strict=True))
    return acked


def assert_read_back(broker: BrokerProcess, topic: str, partitions: list[int],
                     acked: dict[bytes, tuple[int, int]]) -> None:
    """Every acknowledged record of ``partitions`` is read back once, where it was acknowledged
    and with its value, and nothing else is there."""
    read = confluent_consume(broker.bootstrap, topic, partitions, timeout=60)
    keys = [r.key for r in read]
    assert len(keys) == len(set(keys)), "a record was read twice"
    found = {r.key: (r.partition, r.offset) for r in read}
    expected = {k: at for k, at in acked.items() if at[0] in partitions}
    assert found == expected, (f"{len(set(expected) - set(found))} acknowledged records missing, "
                               f"{len(set(found) - set(expected))} unexpected")
    assert all(r.value is not None and r.value.rstrip(b".") == b"value of " + r.key for r in read)
