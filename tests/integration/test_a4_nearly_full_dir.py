"""A disk that fills up is visible before it fails (issue 5, item 5).

A log dir on a small tmpfs drops below log.dir.min.free.bytes: the broker logs it as nearly
full and stops placing new replicas there, while its replicas keep serving. Then it fills up:
the write that meets ENOSPC answers KAFKA_STORAGE_ERROR and the dir goes offline, as Kafka does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration import disk_faults
from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import create_topic
from tests.integration.disk_faults import KAFKA_STORAGE_ERROR, Tmpfs

pytestmark = pytest.mark.integration

SIZE = 32 << 20
FLOOR = 12 << 20


def test_nearly_full_dir_is_visible_then_enospc_takes_it_offline(
        tmp_path: Path, made_brokers: list[BrokerProcess], tmpfs_mounts: list[Tmpfs]) -> None:
    if (why := disk_faults.mount_unavailable()) is not None:
        pytest.skip(f"needs a tmpfs mount: {why}")
    broker = BrokerProcess(tmp_path / "broker", overrides={
        "log.dir.check.interval.ms": "200", "log.dir.min.free.bytes": str(FLOOR)})
    made_brokers.append(broker)
    small = Tmpfs(broker.log_dirs[1], SIZE).mount()
    tmpfs_mounts.append(small)
    broker.start()
    small_dir = broker.log_dirs[1]
    create_topic(broker.bootstrap, "early", 4)
    _, on_small = disk_faults.split_by_dir(broker, "early")

    small.fill(leave_free=FLOOR // 2)
    wait_until(lambda: disk_faults.log_lines(broker, "nearly full", str(small_dir)), timeout=10,
               what="the nearly-full dir logged")
    line = disk_faults.log_lines(broker, "nearly full", str(small_dir))[0]
    assert "WARNING" in line and f"log.dir.min.free.bytes={FLOOR}" in line, line
    assert len(disk_faults.log_lines(broker, "nearly full")) == 1, "logged once, not at every check"
    # Still online and serving; new replicas go elsewhere.
    assert disk_faults.offline_counts(broker) == (0.0, 0.0)
    assert disk_faults.raw_produce(broker, "early", on_small[0], b"still fine") == 0
    create_topic(broker.bootstrap, "late", 4)
    placed = {d for n, d in broker.partition_dirs().items() if n.startswith("late-")}
    assert placed == {broker.log_dirs[0]}, placed

    small.fill()
    code = disk_faults.raw_produce(broker, "early", on_small[0], bytes(range(256)) * 256)
    assert code == KAFKA_STORAGE_ERROR
    wait_until(lambda: disk_faults.offline_counts(broker) == (1.0, float(len(on_small))), timeout=10,
               what="the full dir offline")
    (failed,) = disk_faults.log_lines(broker, "ERROR minikafka.replica.log_dir_failure", f"log dir {small_dir} failed")
    assert "ENOSPC" in failed, failed
    assert broker.is_running()
