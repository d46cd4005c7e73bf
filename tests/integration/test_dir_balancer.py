"""The disk balancer (issue 24) with a real broker whose three log dirs are three small tmpfs
disks: one disk holding most bytes is evened out under the threshold while producers and a
consumer run, losing nothing; a disk replaced by an empty one is refilled; a kill -9 in the
middle of a balance resumes cleanly; ``minikafka log-dirs --balance --dry-run`` changes
nothing, and ``--balance --progress`` does the same job from outside.

The used share of each disk is read with os.statvfs of its mount, not from the broker.  Moves
are fast here (small records, 1 MiB segments), so the whole file takes well under a minute.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.structs import TopicPartitionReplica

from tests.integration.broker_process import REPO_ROOT, BrokerProcess, wait_until
from tests.integration.clients import create_topic
from tests.integration.disk_faults import Tmpfs, assert_read_back, log_lines, mount_unavailable, produce_keyed
from tests.integration.test_a2_move_every_replica import replica_dirs
from tests.system.load import ConsumerRun, ProducerRun, assert_consumed_once, assert_exactly_once, read_all
from tests.system.observe import alter_configs, metric_sample

pytestmark = pytest.mark.integration

DISK_BYTES = 32 << 20
THRESHOLD = 5.0
BULK = "bulk"
BULK_PARTITIONS = 8
OVERRIDES = {"log.segment.bytes": str(1 << 20), "log.dirs.balancer.interval.ms": "200",
             "log.dirs.balancer.threshold.percent": str(THRESHOLD), "log.dir.check.interval.ms": "200"}


def used_share(path: Path) -> float:
    st = os.statvfs(path)
    return 100.0 * (st.f_blocks - st.f_bavail) / st.f_blocks


def spread(broker: BrokerProcess) -> float:
    shares = [used_share(d) for d in broker.log_dirs]
    return max(shares) - min(shares)


def set_balancer(broker: BrokerProcess, **configs: str) -> None:
    alter_configs(broker.bootstrap, ConfigResource(ConfigResourceType.BROKER, str(broker.broker_id), configs={
        f"log.dirs.balancer.{key.replace('_', '.')}": value for key, value in configs.items()}))


def on_disk(broker: BrokerProcess) -> list[tuple[str, str]]:
    """(log dir, entry) of every partition dir, future and retired copy in the log dirs."""
    return sorted((d.name, e.name) for d in broker.log_dirs for e in d.iterdir() if e.is_dir())


def settled(broker: BrokerProcess) -> bool:
    """Within the threshold, nothing moving, no copy left in any dir."""
    return (spread(broker) <= THRESHOLD and metric_sample(broker, "minikafka_log_dir_moves_in_progress") == 0
            and not any(e.endswith(("-future", "-delete")) for _, e in on_disk(broker)))


@pytest.fixture
def disks_broker(tmp_path: Path, made_brokers: list[BrokerProcess],
                 tmpfs_mounts: list[Tmpfs]) -> Iterator[Callable[..., BrokerProcess]]:
    """start(**overrides) -> a started broker whose three log dirs are tmpfs disks of DISK_BYTES."""
    if (why := mount_unavailable()) is not None:
        pytest.skip(f"the balancer's disks are tmpfs mounts: {why}")

    def start(**overrides: str) -> BrokerProcess:
        broker = BrokerProcess(tmp_path / "broker", log_dir_count=3, overrides={**OVERRIDES, **overrides})
        made_brokers.append(broker)
        tmpfs_mounts.extend(Tmpfs(d, DISK_BYTES).mount() for d in broker.log_dirs)
        return broker.start()

    yield start


def pile_into_first_dir(broker: BrokerProcess) -> dict[bytes, tuple[int, int]]:
    """The bulk topic, every partition moved into the first dir while empty, then filled with
    1.2 MB each (more than a move copies in its swap, so moves copy in rounds): that disk ends
    ~30% used, the others nearly empty.  Returns what was acknowledged."""
    create_topic(broker.bootstrap, BULK, BULK_PARTITIONS)
    first = str(broker.log_dirs[0])
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="balancer-tests")
    try:
        admin.alter_replica_log_dirs({TopicPartitionReplica(BULK, p, broker.broker_id): first
                                      for p in range(BULK_PARTITIONS)})
    finally:
        admin.close()
    wait_until(lambda: all(replica_dirs(broker.bootstrap).get((BULK, p)) == [(first, False)]
                           for p in range(BULK_PARTITIONS)), timeout=30, what=f"every {BULK} partition in {first}")
    acked = produce_keyed(broker, BULK, list(range(BULK_PARTITIONS)), 1200, "bulk", value_bytes=1000)
    assert spread(broker) > 20
    return acked


def test_a_full_disk_is_evened_out_under_the_threshold_while_clients_run(disks_broker) -> None:
    broker = disks_broker()
    acked = pile_into_first_dir(broker)
    create_topic(broker.bootstrap, "live", 4)
    producers = [ProducerRun("confluent", broker.bootstrap, "live", 4).start(),
                 ProducerRun("kafka-python", broker.bootstrap, "live", 4).start()]
    consumer = ConsumerRun(broker.bootstrap, "live", 4).start()
    try:
        wait_until(lambda: all(len(p.acked) > 100 for p in producers), timeout=30, what="producers under way")
        before = spread(broker)
        set_balancer(broker, enable="true")
        wait_until(lambda: settled(broker), timeout=60, interval=0.2, what=f"the spread under {THRESHOLD} points")
    except BaseException:
        consumer.stop()
        raise
    finally:
        for producer in producers:
            producer.stop()
    assert before > 20
    planned = log_lines(broker, "disk balancer plans to move bulk-")
    assert planned and all(f"from {broker.log_dirs[0]} (" in line and f"threshold {THRESHOLD:g}" in line
                           for line in planned)
    # The broker's own figure (from its last look, which may predate the last source's removal).
    wait_until(lambda: metric_sample(broker, "minikafka_log_dir_balancer_spread_percent") <= THRESHOLD, timeout=10,
               what="the spread metric under the threshold")
    assert metric_sample(broker, "minikafka_log_dir_balancer_moved_bytes_total") > 0
    assert metric_sample(broker, "minikafka_log_dir_balancer_planned_bytes_total") >= \
        metric_sample(broker, "minikafka_log_dir_balancer_moved_bytes_total") * 0.9
    records = read_all(broker.bootstrap, "live", 4)
    assert_exactly_once(producers, records)
    assert_consumed_once(consumer, records)
    assert_read_back(broker, BULK, list(range(BULK_PARTITIONS)), acked)


def test_a_disk_replaced_by_an_empty_one_is_refilled(disks_broker, tmpfs_mounts: list[Tmpfs]) -> None:
    broker = disks_broker(**{"log.dirs.balancer.enable": "true"})
    create_topic(broker.bootstrap, BULK, 6)  # placed two per disk
    acked = produce_keyed(broker, BULK, list(range(6)), 1200, "bulk", value_bytes=1000)
    wait_until(lambda: settled(broker), timeout=60, interval=0.2, what="balanced before the disk is replaced")
    third = broker.log_dirs[2]
    lost = {p for p in range(6) if replica_dirs(broker.bootstrap)[(BULK, p)] == [(str(third), False)]}
    assert lost, f"nothing on {third}"
    broker.stop()
    tmpfs_mounts[2].unmount()
    tmpfs_mounts.append(Tmpfs(third, DISK_BYTES).mount())  # a new, empty disk in its place
    broker.start()
    wait_until(lambda: settled(broker) and log_lines(broker, "disk balancer plans to move bulk-", f" to {third} (0."),
               timeout=60, interval=0.2, what=f"the new disk at {third} refilled")
    # What was on the other disks is all there; the replicas of the lost disk are gone for good.
    assert_read_back(broker, BULK, [p for p in range(6) if p not in lost], acked)


def test_kill9_in_the_middle_of_a_balance_resumes_cleanly(disks_broker, monkeypatch) -> None:
    monkeypatch.setenv("MINIKAFKA_TEST_PAUSE_AT", "move.copied_half")
    broker = disks_broker()
    monkeypatch.delenv("MINIKAFKA_TEST_PAUSE_AT")
    acked = pile_into_first_dir(broker)
    set_balancer(broker, enable="true")
    wait_until(lambda: "test hook: paused at move.copied_half" in broker.stderr_text(), timeout=30,
               what="a balancer move frozen half copied")
    assert any(e.endswith("-future") for _, e in on_disk(broker))
    broker.kill9()
    broker.start()
    wait_until(lambda: settled(broker), timeout=60, interval=0.2, what="the balance finished after the restart")
    text = broker.stderr_text(1_000_000).split("===== start #2", 1)[1]
    assert "resuming the move of bulk-" in text
    names = [entry for _, entry in on_disk(broker) if entry.startswith(f"{BULK}-")]
    assert sorted(names) == sorted(f"{BULK}-{p}" for p in range(BULK_PARTITIONS)), "a partition in two dirs"
    assert_read_back(broker, BULK, list(range(BULK_PARTITIONS)), acked)


def log_dirs_tool(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minikafka", "log-dirs", "--bootstrap-server", broker.bootstrap,
                           *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_the_dry_run_changes_nothing_and_the_tool_balances(disks_broker) -> None:
    broker = disks_broker()
    acked = pile_into_first_dir(broker)
    files = on_disk(broker)
    shares = [round(used_share(d), 1) for d in broker.log_dirs]
    moved_while_piling = len(log_lines(broker, "moving bulk-"))
    dry = log_dirs_tool(broker, "--balance", "--dry-run", "--interval", "0.2")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[0].startswith(f"broker 1: spread {max(shares) - min(shares):.0f}") or "over the threshold of 5" in lines[0]
    assert "move(s)" in lines[0] and "spread after" in lines[0]
    moves = [line for line in lines if line.startswith(f"  move {BULK}-")]
    assert moves and all(f"from {broker.log_dirs[0]} (" in line for line in moves)
    assert lines[-1] == "dry run: nothing was moved"
    assert on_disk(broker) == files and [round(used_share(d), 1) for d in broker.log_dirs] == shares
    assert len(log_lines(broker, "moving bulk-")) == moved_while_piling

    run = log_dirs_tool(broker, "--balance", "--progress", "--interval", "0.2", "--timeout", "60")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count(": moving") == len(moves) and "done" in run.stdout
    wait_until(lambda: settled(broker), timeout=30, interval=0.2, what="the spread under the threshold")
    again = log_dirs_tool(broker, "--balance", "--dry-run", "--interval", "0.2")
    assert "nothing to move" in again.stdout
    for args, why in ((["--balance", "--threshold", "150"], "--threshold: must be between 0 and 100, not 150"),
                      (["--describe", "--dry-run"], "--dry-run goes with --balance")):
        wrong = log_dirs_tool(broker, *args)
        assert (wrong.returncode, wrong.stderr) == (2, f"error: {why}\n")
    assert_read_back(broker, BULK, list(range(BULK_PARTITIONS)), acked)
