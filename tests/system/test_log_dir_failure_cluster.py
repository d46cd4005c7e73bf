"""Scenarios C2, C3 and C4 of ACCEPTANCE.md: a log dir fails in a three-broker cluster (KIP-112,
KIP-858), and a broker that cannot tell the controller shuts itself down.

A dir fails by being replaced with a regular file (KIP-112's recipe; the lazy unmount of a
tmpfs too where this machine can mount). After every step ``validate`` checks what the page
asks: every broker runs and said what happened; Metadata shows the leaders, ISR and offline
replicas expected; DescribeLogDirs (through ``minikafka log-dirs --describe``) shows each
replica in its dir and each failed dir with KafkaStorageException; the controller's partition
state records the directory id of the dir each replica is in. At the end every acknowledged
record is read back exactly once, by a fresh reader and by a consumer that ran throughout.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient
from kafka.structs import TopicPartitionReplica
from kazoo.client import KazooClient

from tests.integration.broker_process import REPO_ROOT, BrokerProcess, wait_until
from tests.integration.disk_faults import Tmpfs, mount_unavailable, replace_with_file
from tests.system.cluster import Cluster
from tests.system.conftest import _CLUSTERS_KEY
from tests.system.load import (
    ConsumerRun,
    ProducerRun,
    assert_consumed_once,
    assert_exactly_once,
    read_all,
    wait_acked,
)
from tests.system.zookeeper import ZooKeeperProcess

# Every test breaks dirs, so each has brokers of its own; ZooKeeper is the module's, each
# test's cluster under a chroot of its own.
pytestmark = pytest.mark.shared_zookeeper
CHROOT = "/minikafka"  # what a cluster of the default chroot uses (the dir balancer test's)
STORAGE_ERROR = "org.apache.kafka.common.errors.KafkaStorageException"
Replica = tuple[int, str, int]  # (broker, topic, partition)


def _replica_dirs(broker: BrokerProcess, topic: str, partitions: int) -> dict[str, Path] | None:
    """Where the broker holds each replica of ``topic``, once it holds them all."""
    found = broker.partition_dirs()
    return found if all(f"{topic}-{p}" in found for p in range(partitions)) else None


@dataclass
class Scenario:
    """A running cluster, the topics under traffic, where each replica was put, and what failed."""

    cluster: Cluster
    zookeeper: ZooKeeperProcess
    topics: dict[str, int] = field(default_factory=dict)  # -> partition count
    placement: dict[Replica, Path] = field(default_factory=dict)
    directory_ids: dict[Path, str] = field(default_factory=dict)
    failed: dict[int, set[Path]] = field(default_factory=dict)
    producers: dict[str, list[ProducerRun]] = field(default_factory=dict)
    consumers: dict[str, ConsumerRun] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for broker in self.cluster.brokers.values():
            for log_dir in broker.log_dirs:
                self.directory_ids[log_dir] = _directory_id(log_dir)

    def create_topic(self, name: str, partitions: int, dir_of: dict[int, int], **configs: str) -> None:
        """An RF 3 topic whose partition p is in log dir ``dir_of[p]`` (0 or 1) of every broker:
        AlterReplicaLogDirs before the replicas exist, as kafka-reassign-partitions does."""
        wanted = {TopicPartitionReplica(name, p, b): str(broker.log_dirs[dir_of[p]])
                  for b, broker in self.cluster.brokers.items() for p in range(partitions)}
        admin = KafkaAdminClient(bootstrap_servers=self.cluster.bootstrap)
        try:
            answers = admin.alter_replica_log_dirs(wanted)
        finally:
            admin.close()
        assert {e.__name__ for e in answers.values()} == {"UnknownTopicOrPartitionError"}, answers
        self.cluster.create_topic(name, partitions, 3, **configs)
        self.topics[name] = partitions
        for b, broker in self.cluster.brokers.items():
            # A follower makes its replica when its LeaderAndIsr comes, which Metadata may precede.
            on_disk = wait_until(functools.partial(_replica_dirs, broker, name, partitions), 30,
                                 what=f"the replicas of {name} on broker {b}")
            for p in range(partitions):
                assert on_disk[f"{name}-{p}"] == broker.log_dirs[dir_of[p]], f"{name}-{p} on broker {b}: {on_disk}"
                self.placement[(b, name, p)] = broker.log_dirs[dir_of[p]]

    def start_traffic(self, topic: str) -> None:
        partitions = self.topics[topic]
        bootstrap = self.cluster.bootstrap
        self.producers[topic] = [ProducerRun("confluent", bootstrap, topic, partitions).start(),
                                 ProducerRun("kafka-python", bootstrap, topic, partitions, pace_s=0.005).start()]
        self.consumers[topic] = ConsumerRun(bootstrap, topic, partitions).start()
        wait_acked(self.producers[topic], {})

    def fail_dir(self, broker: int, log_dir: Path) -> None:
        replace_with_file(log_dir)
        self.noticed(broker, log_dir)

    def noticed(self, broker: int, log_dir: Path) -> None:
        """``log_dir`` has failed: wait until its running broker says so."""
        self.failed.setdefault(broker, set()).add(log_dir)
        process = self.cluster.brokers[broker]
        if process.is_running():
            wait_until(lambda: f"log dir {log_dir} failed" in process.stderr_text(2_000_000), 30, interval=0.1,
                       what=f"broker {broker} noticing that {log_dir} failed")

    def offline(self, topic: str, partition: int) -> set[int]:
        return {b for b in self.cluster.brokers
                if self.placement.get((b, topic, partition)) in self.failed.get(b, set())}

    def keeps_working(self, *topics: str) -> None:
        """The producers of ``topics`` get acknowledgements again after what just happened."""
        for topic in topics:
            wait_acked(self.producers[topic], {r.client: len(r.acked) for r in self.producers[topic]})

    def finish(self, topic: str) -> None:
        """Stop the traffic on ``topic``; every acknowledged record is stored once, and the consumer
        that ran throughout was given exactly what is stored."""
        runs = self.producers.pop(topic)
        for run in runs:
            run.stop()
        stored = read_all(self.cluster.bootstrap, topic, self.topics[topic])
        assert_exactly_once(runs, stored)
        assert_consumed_once(self.consumers.pop(topic), stored)

    def stop_everything(self) -> None:
        for runs in self.producers.values():
            for run in runs:
                run._stop.set()
        for consumer in self.consumers.values():
            consumer._stop.set()


def _directory_id(log_dir: Path) -> str:
    for line in (log_dir / "meta.properties").read_text().splitlines():
        if line.startswith("directory.id="):
            return line.split("=", 1)[1].strip()
    raise AssertionError(f"{log_dir}/meta.properties has no directory.id")


@pytest.fixture
def scenario(cluster: Cluster, zookeeper: ZooKeeperProcess) -> Iterator[Scenario]:
    made = Scenario(cluster, zookeeper)
    try:
        yield made
    finally:
        made.stop_everything()


# ---------------------------------------------------------------- "validate client/cluster state"

def validate(s: Scenario, down: frozenset[int] = frozenset()) -> None:
    _brokers_said_what_happened(s, down)
    _metadata_shows_offline_replicas(s)
    _log_dirs_show_replicas_and_failed_dirs(s, down)
    _controller_knows_each_replicas_dir(s)


def _brokers_said_what_happened(s: Scenario, down: frozenset[int]) -> None:
    for b, broker in s.cluster.brokers.items():
        assert broker.is_running() == (b not in down), broker.describe_failure(f"broker {b} running: {b not in down}")
    def controller_said(lines: tuple[str, ...]) -> bool:
        everything = "\n".join(broker.stderr_text(2_000_000) for broker in s.cluster.brokers.values())
        return any(line in everything for line in lines)

    for b, dirs in s.failed.items():
        own = s.cluster.brokers[b].stderr_text(2_000_000)
        for log_dir in dirs:
            assert f"log dir {log_dir} failed" in own or f"log dir {log_dir} is offline since startup" in own, (
                f"broker {b} never said that {log_dir} failed")
            # One line of the controller's names the broker and the dir. The broker says it first,
            # and nothing the test waited for needed the controller when no partition lost its leader.
            lines = (f"broker {b}: log dir {log_dir} failed", f"broker {b} registered with log dir(s) {log_dir} offline")
            wait_until(functools.partial(controller_said, lines), 15, interval=0.1,
                       what=f"a controller saying that {log_dir} of broker {b} failed")


def _metadata_shows_offline_replicas(s: Scenario) -> None:
    def as_expected() -> list[str]:
        wrong = []
        for topic, count in s.topics.items():
            via = next(b for b in s.cluster.running())
            for p, found in sorted(s.cluster.partitions(topic, via).items()):
                offline = s.offline(topic, p)
                eligible = set(found.replica_nodes) - offline - {b for b in s.cluster.brokers
                                                                 if not s.cluster.brokers[b].is_running()}
                isr, leader = set(found.isr_nodes), found.leader_id
                dead = set(found.replica_nodes) - {b.broker_id for b in s.cluster.running()}
                ok = set(found.offline_replicas) == offline | dead and found.error_code in (0, 5)
                if eligible:
                    ok = ok and leader in eligible and isr == eligible and not set(found.offline_replicas) & eligible
                else:  # nobody can lead: the partition is offline, its last ISR kept (as Kafka does)
                    ok = ok and leader == -1 and bool(isr)
                if not ok:
                    wrong.append(f"{topic}-{p}: leader {leader} isr {sorted(isr)} offline "
                                 f"{sorted(found.offline_replicas)} (expected offline {sorted(offline)})")
            assert len(s.cluster.partitions(topic, via)) == count
        return wrong
    try:
        wait_until(lambda: not as_expected(), 30, interval=0.2, what="Metadata as expected")
    except Exception as exc:
        raise AssertionError(f"{exc}: {as_expected()}") from None


def describe_log_dirs(bootstrap: str) -> dict[str, object]:
    run = subprocess.run([sys.executable, "-m", "minikafka", "log-dirs", "--bootstrap-server", bootstrap,
                          "--describe"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    return {"document": json.loads(run.stdout), "stderr": run.stderr}


def _log_dirs_show_replicas_and_failed_dirs(s: Scenario, down: frozenset[int]) -> None:
    running = next(b for b in s.cluster.running())
    described = describe_log_dirs(running.bootstrap)
    document = described["document"]
    assert isinstance(document, dict)
    by_broker = {entry["broker"]: entry for entry in document["brokers"]}
    for b, broker in s.cluster.brokers.items():
        if b in down:
            continue
        dirs = {Path(d["logDir"]): d for d in by_broker[b]["logDirs"]}
        assert set(dirs) == set(broker.log_dirs), dirs
        for log_dir, entry in dirs.items():
            if log_dir in s.failed.get(b, set()):
                assert entry["error"] == STORAGE_ERROR and entry["partitions"] == [], entry
                assert f"broker {b}: log dir {log_dir} is offline" in str(described["stderr"])
                continue
            assert entry["error"] is None, entry
            shown = {(part["partition"], part["isFuture"]) for part in entry["partitions"]}
            for (rb, topic, p), placed in s.placement.items():
                if rb == b and placed == log_dir:
                    assert (f"{topic}-{p}", False) in shown, f"{topic}-{p} not in {log_dir} of broker {b}: {shown}"


def _controller_knows_each_replicas_dir(s: Scenario) -> None:
    """The partition state znodes record, for every replica, the id of the dir it was put in
    (KIP-858): the same dir DescribeLogDirs shows (or showed before it failed)."""
    zk = KazooClient(hosts=s.zookeeper.connect + s.cluster.chroot)
    zk.start(timeout=15)

    def disagreements() -> list[str]:
        wrong = []
        for topic, count in s.topics.items():
            for p in range(count):
                raw, _ = zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")
                recorded = {int(b): d for b, d in json.loads(raw).get("directories", {}).items()}
                for b in s.cluster.brokers:
                    placed = s.placement[(b, topic, p)]
                    if recorded.get(b) != s.directory_ids[placed]:
                        wrong.append(f"{topic}-{p} on broker {b}: recorded {recorded.get(b)}, "
                                     f"is in {placed} ({s.directory_ids[placed]})")
        return wrong
    try:
        wait_until(lambda: not disagreements(), 30, interval=0.2, what="directories recorded")
    except Exception as exc:
        raise AssertionError(f"{exc}: {disagreements()[:5]}") from None
    finally:
        zk.stop()
        zk.close()


# ---------------------------------------------------------------- the scenarios

def _metric(text: str, name: str) -> float | None:
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


def _operators_see_it(s: Scenario) -> None:
    """The controller counts the partitions Metadata shows leaderless; a broker with a failed dir
    counts it and its replicas there; no replica's dir is left unreported."""
    def counted() -> bool:
        leaderless = sum(1 for t in s.cluster.metadata().topics for p in t.partitions if p.leader_id < 0)
        controller = s.cluster.brokers[s.cluster.controller_id()].metrics_text()
        return (_metric(controller, "kafka_controller_KafkaController_ActiveControllerCount") == 1
                and _metric(controller, "kafka_controller_KafkaController_OfflinePartitionsCount") == leaderless)
    wait_until(counted, 30, interval=0.2, what="OfflinePartitionsCount as Metadata shows")
    for b, broker in s.cluster.brokers.items():
        text = broker.metrics_text()
        assert _metric(text, "kafka_server_KafkaServer_QueuedReplicaToDirAssignments") == 0
        assert _metric(text, "kafka_log_LogManager_OfflineLogDirectoryCount") == len(s.failed.get(b, ()))
        if b != s.cluster.controller_id():
            assert _metric(text, "kafka_controller_KafkaController_OfflinePartitionsCount") == 0


@pytest.mark.cluster_metrics
def test_c2_topic_on_the_first_dirs_keeps_working_while_second_dirs_fail(scenario: Scenario) -> None:
    s = scenario
    s.create_topic("first-dirs", 3, dict.fromkeys(range(3), 0), **{"min.insync.replicas": "2"})
    s.create_topic("second-dirs", 3, dict.fromkeys(range(3), 1))
    s.start_traffic("first-dirs")
    s.start_traffic("second-dirs")
    validate(s)
    _operators_see_it(s)
    leader = s.cluster.leader("first-dirs", 0)
    follower = next(b for b in s.cluster.brokers if b != leader)
    last = next(b for b in s.cluster.brokers if b not in (leader, follower))

    s.fail_dir(follower, s.cluster.brokers[follower].log_dirs[1])
    s.keeps_working("first-dirs", "second-dirs")
    validate(s)

    s.fail_dir(leader, s.cluster.brokers[leader].log_dirs[1])
    s.keeps_working("first-dirs", "second-dirs")
    validate(s)
    # The last replica of second-dirs is about to fail: what it acknowledged so far is all there.
    s.finish("second-dirs")

    s.fail_dir(last, s.cluster.brokers[last].log_dirs[1])
    s.keeps_working("first-dirs")
    validate(s)
    _operators_see_it(s)
    assert all(p.leader_id == -1 for p in s.cluster.partitions("second-dirs").values())
    s.finish("first-dirs")


def test_c3_the_leader_restarts_with_its_first_dir_bad(scenario: Scenario) -> None:
    s = scenario
    s.create_topic("orders", 4, {p: p % 2 for p in range(4)}, **{"min.insync.replicas": "2"})
    s.start_traffic("orders")
    leader = s.cluster.leader("orders", 0)
    broker = s.cluster.brokers[leader]
    broker.kill9()
    survivor = next(b for b in s.cluster.running())
    wait_until(lambda: all(p.leader_id not in (leader, -1) for p in s.cluster.partitions("orders", survivor).values()),
               30, interval=0.1, what=f"new leaders after kill -9 of broker {leader}")
    s.keeps_working("orders")
    s.fail_dir(leader, broker.log_dirs[0])
    broker.start()
    # Its replicas in the bad dir are offline from the start; the others catch up and rejoin.
    validate(s)
    controller_log = s.cluster.brokers[s.cluster.controller_id()].stderr_text(2_000_000)
    assert f"broker {leader} registered with log dir(s) {broker.log_dirs[0]} offline" in controller_log
    s.keeps_working("orders")
    s.finish("orders")


@pytest.mark.parametrize(("role", "fault"), [("leader", "regular-file"), ("follower", "regular-file"),
                                             ("leader", "lazy-unmount")])
def test_c4_a_dir_of_the_leader_or_a_follower_fails_at_runtime(role: str, fault: str, tmp_path: Path,
                                                             zookeeper: ZooKeeperProcess, chroot: str,
                                                             request: pytest.FixtureRequest) -> None:
    mounts: list[Tmpfs] = []
    cluster = Cluster(tmp_path, zookeeper, chroot=chroot)
    if fault == "lazy-unmount":
        if (why := mount_unavailable()) is not None:
            pytest.skip(f"the lazy-unmount fault needs a tmpfs mount: {why}")
        mounts = [Tmpfs(broker.log_dirs[0], 64 << 20).mount() for broker in cluster.brokers.values()]
    request.node.stash.setdefault(_CLUSTERS_KEY, []).append(cluster)
    s = Scenario(cluster.start(), zookeeper)
    try:
        _c4(s, role, mounts)
    finally:
        s.stop_everything()
        cluster.close()
        for tmpfs in mounts:
            tmpfs.close()


def _c4(s: Scenario, role: str, mounts: list[Tmpfs]) -> None:
    s.create_topic("orders", 4, {p: p % 2 for p in range(4)}, **{"min.insync.replicas": "2"})
    s.start_traffic("orders")
    leader = s.cluster.leader("orders", 0)
    damaged = leader if role == "leader" else next(b for b in s.cluster.brokers if b != leader)
    log_dir = s.cluster.brokers[damaged].log_dirs[0]
    if mounts:
        next(m for m in mounts if m.path == log_dir).lazy_unmount()
        s.noticed(damaged, log_dir)
    else:
        s.fail_dir(damaged, log_dir)
    s.keeps_working("orders")
    validate(s)
    s.finish("orders")

    # A new topic gets its replicas on the damaged broker's good dir; then it serves alone.
    new_topic = "after-the-failure"
    s.cluster.create_topic(new_topic, 2, 3)
    good_dir = s.cluster.brokers[damaged].log_dirs[1]
    on_disk = s.cluster.brokers[damaged].partition_dirs()
    assert all(on_disk[f"{new_topic}-{p}"] == good_dir for p in range(2)), on_disk
    others = [b for b in s.cluster.brokers if b != damaged]
    for b in others:
        s.cluster.brokers[b].kill9()
    via = s.cluster.brokers[damaged]
    wait_until(lambda: all(p.leader_id == damaged for p in s.cluster.partitions(new_topic, via).values()),
               60, interval=0.2, what=f"broker {damaged} leading {new_topic} alone")
    producer = Producer({"bootstrap.servers": via.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce(new_topic, key=b"%d" % i, value=b"alone", partition=i % 2)
    assert producer.flush(30) == 0
    # It only reads back: committing would wait on the group's coordinator partition, which may
    # have had its only live replica on the failed dir (closing took 50 s then).
    consumer = Consumer({"bootstrap.servers": via.bootstrap, "group.id": "c4", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(new_topic, p, 0) for p in range(2)])
        keys: list[bytes] = []
        wait_until(lambda: _poll_into(consumer, keys) >= 100, 60, what="the new topic read back")
    finally:
        consumer.close()
    assert sorted(keys) == sorted(b"%d" % i for i in range(100))


def _poll_into(consumer: Consumer, keys: list[bytes]) -> int:
    message = consumer.poll(0.5)
    if message is not None and not message.error():
        keys.append(message.key())
    return len(keys)


@pytest.mark.cluster_settings(**{"log.dir.failure.timeout.ms": "3000"})
def test_a_broker_that_cannot_tell_the_controller_shuts_down_and_its_partitions_move(scenario: Scenario) -> None:
    s = scenario
    s.create_topic("orders", 4, {p: p % 2 for p in range(4)}, **{"min.insync.replicas": "2"})
    s.start_traffic("orders")
    # The controller, which leads partitions too: stopping, it also gives up /controller, which
    # must not wait for the ZooKeeper it cannot reach.
    victim = s.cluster.controller_id()
    broker = s.cluster.brokers[victim]
    s.zookeeper.pause()
    try:
        s.fail_dir(victim, broker.log_dirs[0])
        wait_until(lambda: not broker.is_running(), 30, interval=0.1, what=f"broker {victim} shutting down")
    finally:
        s.zookeeper.resume()
    assert broker.process is not None and broker.process.returncode == 1
    assert (f"has not acknowledged the failure of log dir {broker.log_dirs[0]} within "
            "log.dir.failure.timeout.ms=3000") in broker.stderr_text(2_000_000)
    survivor = next(b for b in s.cluster.running())
    wait_until(lambda: all(p.leader_id not in (victim, -1) for p in s.cluster.partitions("orders", survivor).values()),
               60, interval=0.2, what=f"other brokers leading what broker {victim} led")
    s.keeps_working("orders")
    # The operator starts it again, the dir still bad: it serves from its other dir.
    broker.process = None
    broker.start()
    validate(s)
    s.finish("orders")
