"""Scenario A5 of ACCEPTANCE.md: the broker starts with a bad log dir.

For each fault kind, a broker writes a topic over both dirs and stops; its second dir then
fails (replaced by a regular file; its tmpfs filled up; its tmpfs lazily unmounted under the
running broker, leaving the empty mount point) and the broker starts again. It serves the good
dir (every acknowledged record read back once, new records accepted), reports the bad one
(a log line naming the dir and why, the metrics, Metadata and DescribeLogDirs), answers
KAFKA_STORAGE_ERROR for the replicas it lost and does not re-create them. With every dir bad it
refuses to start, naming each dir and why.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from tests.integration import disk_faults
from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import create_topic
from tests.integration.disk_faults import FAULT_KINDS, KAFKA_STORAGE_ERROR, LEADER_NOT_AVAILABLE, Tmpfs

pytestmark = pytest.mark.integration

TOPIC = "a5"
PARTITIONS = 4


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_a5_starts_with_one_bad_dir(kind: str, tmp_path: Path, made_brokers: list[BrokerProcess],
                                    tmpfs_mounts: list[Tmpfs]) -> None:
    broker, tmpfs = disk_faults.start_broker_with_doomed_dir(kind, tmp_path / "broker", made_brokers,
                                                             tmpfs_mounts)
    bad_dir = broker.log_dirs[1]
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    good, lost = disk_faults.split_by_dir(broker, TOPIC)
    acked = disk_faults.produce_keyed(broker, TOPIC, good + lost, 20, "before")

    if kind == "lazy-unmount":
        disk_faults.inject(kind, bad_dir, tmpfs)  # under the running broker
        wait_until(lambda: disk_faults.offline_counts(broker)[0] == 1.0, timeout=10,
                   what="the unmounted dir found offline")
        assert broker.stop() == 0
    else:
        assert broker.stop() == 0
        disk_faults.inject(kind, bad_dir, tmpfs)
    broker.start()

    # Reported: the dir itself (a file, a full disk), or, for the disk that is simply not
    # mounted any more, an empty dir whose replicas are all gone.
    dir_bad = kind != "lazy-unmount"
    assert broker.is_running()
    assert disk_faults.offline_counts(broker) == (float(dir_bad), float(len(lost)))
    if dir_bad:
        why = {"regular-file": "not a directory", "enospc": "no room"}[kind]
        assert disk_faults.log_lines(broker, f"log dir {bad_dir} is offline since startup", why)
    else:
        assert disk_faults.log_lines(broker, f"log dir {bad_dir} has no meta.properties")
    lines = disk_faults.log_lines(broker, "replica(s) offline since startup")
    assert lines and all(f"{TOPIC}-{p}" in lines[-1] for p in lost), lines

    metadata = disk_faults.partition_metadata(broker, TOPIC)
    for p in lost:
        m = metadata[p]
        assert (m.error_code, m.leader_id, list(m.offline_replicas)) == (LEADER_NOT_AVAILABLE, -1, [1]), m
        assert disk_faults.raw_produce(broker, TOPIC, p, b"x") == KAFKA_STORAGE_ERROR
    for p in good:
        assert (metadata[p].error_code, metadata[p].leader_id, list(metadata[p].offline_replicas)) == (0, 1, [])
    log_dirs = disk_faults.describe_log_dirs(broker)
    if log_dirs is not None:
        assert log_dirs[str(bad_dir)][0] == (KAFKA_STORAGE_ERROR if dir_bad else 0), log_dirs
        error, names = log_dirs[str(broker.log_dirs[0])]
        assert (error, {n for n in names if n.startswith(f"{TOPIC}-")}) == (0, {f"{TOPIC}-{p}" for p in good})

    # The good dir serves what it had and takes more; nothing was re-created in it.
    disk_faults.assert_read_back(broker, TOPIC, good, acked)
    more = disk_faults.produce_keyed(broker, TOPIC, good, 10, "after")
    disk_faults.assert_read_back(broker, TOPIC, good, {**acked, **more})
    on_disk = broker.partition_dirs()
    assert all(on_disk.get(f"{TOPIC}-{p}") != broker.log_dirs[0] for p in lost), on_disk
    if not dir_bad:
        assert not any(f"{TOPIC}-{p}" in on_disk for p in lost), on_disk
    # A new topic goes only where it can live.
    create_topic(broker.bootstrap, "a5-new", 2)
    placed = {d for n, d in broker.partition_dirs().items() if n.startswith("a5-new-")}
    assert placed == ({broker.log_dirs[0]} if dir_bad else set(broker.log_dirs)), placed
    if tmpfs is not None:
        tmpfs.unmount()
    shutil.rmtree(bad_dir, ignore_errors=True)


def test_a5_refuses_to_start_only_when_every_dir_is_bad(tmp_path: Path, made_brokers: list[BrokerProcess],
                                                        tmpfs_mounts: list[Tmpfs]) -> None:
    broker = BrokerProcess(tmp_path / "broker")
    made_brokers.append(broker)
    broker.start()
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    assert broker.stop() == 0
    first, second = broker.log_dirs
    disk_faults.replace_with_file(first)
    shutil.rmtree(second)
    expected = {first: "not a directory", second: "missing"}
    if disk_faults.mount_unavailable() is None:
        # A third dir that is full, when this machine can show one.
        third = tmp_path / "broker" / "logdir3"
        full = Tmpfs(third, 1 << 20).mount()
        tmpfs_mounts.append(full)
        full.fill()
        expected[third] = "no room"
    dirs = ",".join(str(d) for d in expected)

    command = [c if not c.startswith("log.dirs=") else f"log.dirs={dirs}" for c in broker.command()]
    result = subprocess.run(command, cwd=broker.root, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0, result
    refusal = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert len(refusal) == 1, result.stderr
    for log_dir, why in expected.items():
        assert f"{log_dir}: it" in refusal[0] and why in refusal[0].split(f"{log_dir}: ", 1)[1], refusal[0]
    assert "Traceback" not in result.stderr, result.stderr

    # With one dir good again, it starts.
    disk_faults.replace_with_empty_dir(second)
    broker.start()
    assert disk_faults.offline_counts(broker)[0] == 1.0


def test_segments_of_kafka_before_0_11_are_refused_at_startup_and_kept(tmp_path: Path,
                                                                       made_brokers: list[BrokerProcess]) -> None:
    """A Kafka broker's dirs may hold messages older than record batches (magic 0 and 1): the
    broker says so and stops, and leaves them for a Kafka broker to start on again."""
    broker = BrokerProcess(tmp_path / "broker")
    made_brokers.append(broker)
    broker.start()
    create_topic(broker.bootstrap, TOPIC, 1)
    assert broker.stop() == 0
    (segment,) = [Path(d) / f"{TOPIC}-0" / "00000000000000000000.log" for d in broker.log_dirs
                  if (Path(d) / f"{TOPIC}-0").is_dir()]
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for offset in range(3):
        builder.append(offset, timestamp=1_000 + offset, key=None, value=b"written by Kafka 0.10")
    legacy = bytes(builder.build())
    segment.write_bytes(legacy)

    result = subprocess.run(broker.command(), cwd=broker.root, capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode != 0, result
    refusal = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert len(refusal) == 1 and f"{segment} holds message format v1" in refusal[0], result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert segment.read_bytes() == legacy
