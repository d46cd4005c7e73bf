"""``minikafka reassign-partitions`` on a real cluster (ZooKeeper and three brokers, two log dirs
each): --execute with --progress moves replicas to other brokers and dirs while the data stays
readable, --verify sees it done and removes the throttles, --list shows a reassignment held up by a
stopped target and --cancel takes it back. The tests share one cluster, each with topics of its own."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.integration.broker_process import REPO_ROOT, wait_until
from tests.system.cluster import Cluster
from tests.system.load import read_all

# A paused broker keeps its ZooKeeper session through the held-up reassignment's steps.
pytestmark = pytest.mark.shared_cluster(**{"zookeeper.session.timeout.ms": "60000"})
RECORDS_PER_PARTITION = 2000
REPLICATION_THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


def tool(bootstrap: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minikafka", "reassign-partitions", "--bootstrap-server", bootstrap,
                           *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)


def _fill(cluster: Cluster, topic: str, partitions: int, records: int = RECORDS_PER_PARTITION) -> int:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for partition in range(partitions):
        for i in range(records):
            producer.produce(topic, key=b"%d-%d" % (partition, i), value=b"x" * 1000, partition=partition)
            if i % 500 == 0:
                producer.poll(0)
    assert producer.flush(60) == 0
    return partitions * records


def _replica_dirs(cluster: Cluster) -> dict[tuple[int, str], tuple[str, bool]]:
    """{(broker, "topic-partition"): (log dir, is future)} from ``log-dirs --describe``."""
    run = subprocess.run([sys.executable, "-m", "minikafka", "log-dirs", "--bootstrap-server", cluster.bootstrap,
                          "--describe"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    return {(broker["broker"], p["partition"]): (log_dir["logDir"], p["isFuture"])
            for broker in json.loads(run.stdout)["brokers"] for log_dir in broker["logDirs"]
            for p in log_dir["partitions"]}


@dataclass(frozen=True)
class Move:
    """One partition of a plan: its replica ``staying`` moves to its other dir, and ``newcomer``
    takes the place of its other replica, in its second dir."""

    partition: int
    newcomer: int
    newcomer_dir: str
    staying: int
    staying_dir: str

    def entry(self, topic: str) -> dict[str, object]:
        return {"topic": topic, "partition": self.partition, "replicas": [self.newcomer, self.staying],
                "log_dirs": [self.newcomer_dir, self.staying_dir]}


def _plan(cluster: Cluster, topic: str, partitions: int) -> tuple[list[Move], dict[int, list[int]]]:
    current = cluster.replicas(topic)
    dirs = _replica_dirs(cluster)
    moves = []
    for p in range(partitions):
        newcomer = next(b for b in sorted(cluster.brokers) if b not in current[p])
        staying = current[p][0]
        now_in = dirs[(staying, f"{topic}-{p}")][0]
        other_dir = next(str(d) for d in cluster.brokers[staying].log_dirs if str(d) != now_in)
        moves.append(Move(p, newcomer, str(cluster.brokers[newcomer].log_dirs[1]), staying, other_dir))
    return moves, current


def _write(path: Path, topic: str, moves: list[Move]) -> Path:
    path.write_text(json.dumps({"version": 1, "partitions": [m.entry(topic) for m in moves]}))
    return path


def test_execute_with_progress_then_verify_and_list(cluster: Cluster, tmp_path: Path) -> None:
    cluster.create_topic("moving", 3, 2)
    produced = _fill(cluster, "moving", 3)
    moves, before = _plan(cluster, "moving", 3)
    plan = _write(tmp_path / "plan.json", "moving", moves)

    run = tool(cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan), "--progress",
               "--interval", "0.2", "--timeout", "120")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[2]) == {"version": 1, "partitions": [
        {"topic": "moving", "partition": p, "replicas": before[p], "log_dirs": ["any", "any"]} for p in range(3)]}
    assert "Successfully started partition reassignments for moving-0,moving-1,moving-2" in run.stdout
    # The last view: every added replica and every dir move done.
    last = run.stdout.strip().split("\n\n")[-1].splitlines()
    for m in moves:
        name = f"moving-{m.partition}"
        # "new replica" while it was copying, or "replica" when the reassignment had ended already
        assert any(name in line and f"replica on broker {m.newcomer}" in line and "done" in line
                   for line in last), last
        assert any(name in line and f"broker {m.staying} -> {m.staying_dir}" in line and "done" in line
                   for line in last), last

    # The progress view follows the controller; a broker's Metadata shows the removed replicas gone
    # a moment later, once the partitions' leaders have read their LeaderAndIsr.
    target = {m.partition: [m.newcomer, m.staying] for m in moves}
    wait_until(lambda: cluster.replicas("moving") == target, 10, what=f"Metadata to show the replicas {target}")
    dirs = _replica_dirs(cluster)
    for m in moves:
        assert dirs[(m.newcomer, f"moving-{m.partition}")] == (m.newcomer_dir, False)
        assert dirs[(m.staying, f"moving-{m.partition}")] == (m.staying_dir, False)
    wait_until(lambda: all(len(found.isr_nodes) == 2 for found in cluster.partitions("moving").values()), 30,
               what="full ISRs after the reassignment")

    verify = tool(cluster.bootstrap, "--verify", "--reassignment-json-file", str(plan))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    for p in range(3):
        assert f"Reassignment of partition moving-{p} is completed." in verify.stdout
    assert verify.stdout.count("is completed.") == 3 + 6  # three partitions, two replicas of each given a dir
    assert "Clearing broker-level throttles on brokers 1,2,3" in verify.stdout

    listed = tool(cluster.bootstrap, "--list")
    assert listed.returncode == 0 and listed.stdout == "No partition reassignments found.\n"
    records = read_all(cluster.bootstrap, "moving", 3)
    assert len(records) == produced and len({r.key for r in records}) == produced


def _broker_config(cluster: Cluster, broker: int) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": cluster.brokers[broker].bootstrap})
    (future,) = admin.describe_configs([ConfigResource("broker", str(broker))]).values()
    return {name: entry.value for name, entry in future.result(timeout=20).items()}


def _topic_config(cluster: Cluster, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    (future,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
    return {name: entry.value for name, entry in future.result(timeout=20).items()}


def test_throttles_are_set_for_the_move_and_removed_by_verify(cluster: Cluster, tmp_path: Path) -> None:
    cluster.create_topic("throttled", 2, 2)
    _fill(cluster, "throttled", 2, records=5000)
    moves, before = _plan(cluster, "throttled", 2)
    plan = _write(tmp_path / "plan.json", "throttled", moves)
    run = tool(cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan), "--throttle", "500000",
               "--replica-alter-log-dirs-throttle", "60000000")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "The inter-broker throttle limit was set to 500000 B/s" in run.stdout
    topic = _topic_config(cluster, "throttled")
    leaders = sorted((p, b) for p, replicas in before.items() for b in replicas)
    followers = sorted((m.partition, m.newcomer) for m in moves)
    assert topic["leader.replication.throttled.replicas"] == ",".join(f"{p}:{b}" for p, b in leaders)
    assert topic["follower.replication.throttled.replicas"] == ",".join(f"{p}:{b}" for p, b in followers)
    for broker in cluster.brokers:  # every broker holds or gets a replica of some moving partition
        config = _broker_config(cluster, broker)
        assert config["leader.replication.throttled.rate"] == "500000"
        assert config["follower.replication.throttled.rate"] == "500000"
    for broker in {m.staying for m in moves} | {m.newcomer for m in moves}:
        assert _broker_config(cluster, broker)["replica.alter.log.dirs.io.max.bytes.per.second"] == "60000000"

    progress = tool(cluster.bootstrap, "--progress", "--reassignment-json-file", str(plan), "--interval", "0.2",
                    "--timeout", "120")
    assert progress.returncode == 0, progress.stdout + progress.stderr
    # At 500 kB/s the new replicas take seconds to copy their 5 MB: the view showed them on the way,
    # with the bytes copied of the bytes to copy, and a rate and an ETA once a second burst came.
    copying = [line for line in progress.stdout.splitlines() if "new replica on broker" in line and "ETA" in line]
    assert copying, progress.stdout
    assert all(re.search(r"\] +\d+\.\d% [\d.]+ [KM]?i?B of [\d.]+ [KM]?i?B ", line) for line in copying), copying
    assert any(re.search(r" [\d.]+ [KM]?i?B/s ETA \d+:\d\d:\d\d$", line) for line in copying), copying
    verify = tool(cluster.bootstrap, "--verify", "--reassignment-json-file", str(plan))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    topic = _topic_config(cluster, "throttled")
    assert not topic.get("leader.replication.throttled.replicas")
    assert not topic.get("follower.replication.throttled.replicas")
    for broker in cluster.brokers:
        config = _broker_config(cluster, broker)
        assert config.get("leader.replication.throttled.rate") != "500000"
        assert config.get("follower.replication.throttled.rate") != "500000"
        assert config.get("replica.alter.log.dirs.io.max.bytes.per.second") != "60000000"


def test_a_held_up_reassignment_is_listed_and_cancelled(cluster: Cluster, tmp_path: Path) -> None:
    cluster.create_topic("stuck", 1, 1)
    _fill(cluster, "stuck", 1)
    (home,) = cluster.partitions("stuck")[0].replica_nodes
    # The replica goes to a broker that is paused: it cannot copy anything, so the reassignment
    # stays under way.  Never the controller, which must go on answering.
    target = min(b for b in cluster.brokers if b not in (home, cluster.controller_id()))
    answering = ",".join(cluster.brokers[b].bootstrap for b in sorted(cluster.brokers) if b != target)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "stuck", "partition": 0,
                                                              "replicas": [target]}]}))
    cluster.pause(target)
    try:
        run = tool(answering, "--execute", "--reassignment-json-file", str(plan))
        assert run.returncode == 0, run.stdout + run.stderr

        listed = tool(answering, "--list")
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.splitlines()[0] == "Current partition reassignments:"
        assert listed.stdout.splitlines()[1] == f"stuck-0: replicas: {target},{home}. adding: {target}. removing: {home}."

        again = tool(answering, "--execute", "--reassignment-json-file", str(plan))
        assert again.returncode == 2 and "error: reassignments are already under way (stuck-0)" in again.stderr
        assert again.stdout == ""

        verify = tool(answering, "--verify", "--reassignment-json-file", str(plan))
        assert verify.returncode == 3, verify.stdout + verify.stderr
        assert "Reassignment of partition stuck-0 is still in progress." in verify.stdout

        cancel = tool(answering, "--cancel", "--reassignment-json-file", str(plan), "--preserve-throttles")
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        assert "Successfully cancelled partition reassignments for: stuck-0" in cancel.stdout
        wait_until(lambda: tool(answering, "--list").stdout == "No partition reassignments found.\n", 30,
                   interval=0.5, what="no reassignment left")
        assert list(cluster.partitions("stuck", cluster.brokers[home])[0].replica_nodes) == [home]
    finally:
        cluster.resume(target)
    wait_until(lambda: not any(d.startswith("stuck-") for d in cluster.brokers[target].partition_dirs()), 30,
               interval=0.2, what=f"no replica of stuck-0 left on broker {target}")
    assert len(read_all(cluster.bootstrap, "stuck", 1)) == RECORDS_PER_PARTITION
