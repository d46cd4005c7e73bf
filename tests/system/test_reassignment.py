"""Partition reassignment across brokers (KIP-455, KIP-113), driven by kafka-python's
``KafkaAdminClient.alter_partition_reassignments`` / ``list_partition_reassignments`` under a
running acks=all producer and a consumer: scenario C1 of ACCEPTANCE.md, a reassignment that
survives kill -9 of the controller and of the broker receiving the replica, and a cancellation.

A move is held in progress, where a test needs it, by pausing (SIGSTOP) the receiving broker:
it cannot catch up, so the reassignment waits for it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka import errors as Errors
from kafka.admin import NewTopic
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.structs import TopicPartitionReplica
from kazoo.client import KazooClient

from tests.integration.broker_process import REPO_ROOT, KafkaWire, wait_until
from tests.system.cluster import Cluster
from tests.system.load import (
    ConsumerRun,
    ProducerRun,
    assert_consumed_once,
    assert_exactly_once,
    read_all,
    wait_acked,
)
from tests.system.zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.shared_cluster(metrics=True)


class Traffic:
    """Two acks=all producers and a consumer on ``topic`` for the whole test."""

    def __init__(self, cluster: Cluster, topic: str, partitions: int) -> None:
        self.cluster, self.topic, self.partitions = cluster, topic, partitions
        self.producers = [ProducerRun("confluent", cluster.bootstrap, topic, partitions).start(),
                          ProducerRun("kafka-python", cluster.bootstrap, topic, partitions, pace_s=0.005).start()]
        self.consumer = ConsumerRun(cluster.bootstrap, topic, partitions).start()
        wait_acked(self.producers, {})

    def keeps_going(self) -> None:
        wait_acked(self.producers, {r.client: len(r.acked) for r in self.producers})

    def finish(self) -> None:
        for run in self.producers:
            run.stop()
        stored = read_all(self.cluster.bootstrap, self.topic, self.partitions)
        assert_exactly_once(self.producers, stored)
        assert_consumed_once(self.consumer, stored)

    def abandon(self) -> None:
        for run in self.producers:
            run._stop.set()
        self.consumer._stop.set()


def _admin(cluster: Cluster) -> KafkaAdminClient:
    # Brokers that answer only: kafka-python gives up on a bootstrap server that refuses or hangs.
    answering = [b.bootstrap for i, b in cluster.brokers.items() if b.is_running() and i not in cluster.paused]
    return KafkaAdminClient(bootstrap_servers=",".join(answering), client_id="reassignment-test")


def _create(cluster: Cluster, topic: str, assignment: dict[int, list[int]], **configs: str) -> None:
    admin = _admin(cluster)
    try:
        admin.create_topics([NewTopic(topic, replica_assignments=assignment, topic_configs=configs)])
    finally:
        admin.close()
    cluster.wait_for_leaders(topic, len(assignment))


def _reassign(cluster: Cluster, topic: str, targets: dict[int, list[int] | None], via: int | None = None) -> dict[int, str]:
    """AlterPartitionReassignments through kafka-python's admin client, or, ``via`` a given broker
    (which forwards to the controller when it is not the one), over one connection: kafka-python
    may pick a paused broker for its next request and hang. The error name per partition."""
    if via is None:
        admin = _admin(cluster)
        try:
            answers = admin.alter_partition_reassignments({TopicPartition(topic, p): t for p, t in targets.items()})
        finally:
            admin.close()
        return {tp.partition: "NoError" if error is None else error.__name__ for tp, error in answers.items()}
    _Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
    request = AlterPartitionReassignmentsRequest(timeout_ms=30000, topics=[_Topic(name=topic, partitions=[
        _Topic.ReassignablePartition(partition_index=p, replicas=t) for p, t in targets.items()])])
    with KafkaWire(cluster.brokers[via].address, timeout=40) as wire:
        response = wire.request(request, 0, AlterPartitionReassignmentsResponse)
    assert response.error_code == 0, response
    return {p.partition_index: Errors.for_code(p.error_code).__name__
            for t in response.responses for p in t.partitions}


def _under_way(cluster: Cluster, topic: str, via: int | None = None) -> dict[int, dict[str, list[int]]]:
    if via is None:
        admin = _admin(cluster)
        try:
            listed = admin.list_partition_reassignments()
        finally:
            admin.close()
        return {tp.partition: entry for tp, entry in listed.items() if tp.topic == topic}
    with KafkaWire(cluster.brokers[via].address, timeout=40) as wire:
        response = wire.request(ListPartitionReassignmentsRequest(timeout_ms=30000, topics=None), 0,
                                ListPartitionReassignmentsResponse)
    assert response.error_code == 0, response
    return {p.partition_index: {"replicas": list(p.replicas), "adding_replicas": list(p.adding_replicas),
                                "removing_replicas": list(p.removing_replicas)}
            for t in response.topics if t.name == topic for p in t.partitions}


def _wait_done(cluster: Cluster, topic: str, expected: dict[int, list[int]], timeout: float = 60,
               stale: frozenset[int] | set[int] = frozenset(), via: int | None = None) -> None:
    """No reassignment listed, Metadata shows the target replicas all in sync, and only they hold
    the partition on disk (brokers in ``stale`` were dead when their replica was removed and are
    not looked at)."""
    def done() -> bool:
        partitions = cluster.partitions(topic)
        if _under_way(cluster, topic, via) or any(list(partitions[p].replica_nodes) != r or sorted(partitions[p].isr_nodes)
                                      != sorted(r) for p, r in expected.items()):
            return False
        for b, broker in cluster.brokers.items():
            if b in stale:
                continue
            held = {int(name.rsplit("-", 1)[1]) for name in broker.partition_dirs()
                    if name.rsplit("-", 1)[0] == topic}
            if held != {p for p, r in expected.items() if b in r}:
                return False
        return True
    wait_until(done, timeout, interval=0.2, what=f"reassignment to {expected} done")


def _dir_of(cluster: Cluster, topic: str, broker: int, partition: int) -> Path:
    return cluster.brokers[broker].partition_dirs()[f"{topic}-{partition}"]


def _other_dir(cluster: Cluster, broker: int, used: Path) -> Path:
    (other,) = [d for d in cluster.brokers[broker].log_dirs if d != used]
    return other


def _move_with_kafka_python(cluster: Cluster, topic: str, replicas: dict[int, int], dirs: dict[int, Path]) -> None:
    """KIP-113 then KIP-455 through kafka-python: the dirs first, then the brokers if they change."""
    current = cluster.replicas(topic)
    admin = _admin(cluster)
    try:
        answers = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, p, replicas[p]): str(d)
                                                for p, d in dirs.items()})
    finally:
        admin.close()
    moving = {p: [b] for p, b in replicas.items() if current[p] != [b]}
    # A replica already on its broker moves between dirs; one not there yet will be created in it.
    assert {p: e.__name__ for p, e in ((tpr.partition, e) for tpr, e in answers.items())} == {
        p: "ReplicaNotAvailableError" if p in moving else "NoError" for p in dirs}, answers
    if moving:
        assert _reassign(cluster, topic, moving) == dict.fromkeys(moving, "NoError")
        for p, entry in _under_way(cluster, topic).items():
            assert entry == {"replicas": moving[p] + current[p], "adding_replicas": moving[p],
                             "removing_replicas": current[p]}, entry


def _move_with_the_tool(cluster: Cluster, topic: str, replicas: dict[int, int], dirs: dict[int, Path], plan: Path) -> None:
    """The same through ``minikafka reassign-partitions`` and Kafka's reassignment file."""
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": [replicas[p]], "log_dirs": [str(dirs[p])]} for p in dirs]}))
    base = [sys.executable, "-m", "minikafka", "reassign-partitions", "--bootstrap-server", cluster.bootstrap,
            "--reassignment-json-file", str(plan)]
    run = subprocess.run([*base, "--execute", "--progress", "--interval", "0.2", "--timeout", "120"], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    verify = subprocess.run([*base, "--verify"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr


@pytest.mark.parametrize("driver", ["kafka-python", "minikafka-tool"])
def test_c1_move_to_the_other_dir_then_to_the_unused_dir_of_the_next_broker(cluster: Cluster, driver: str,
                                                                          tmp_path: Path) -> None:
    topic = f"moving-{driver}"
    def move(replicas: dict[int, int], dirs: dict[int, Path], step: str) -> None:
        if driver == "kafka-python":
            _move_with_kafka_python(cluster, topic, replicas, dirs)
        else:
            _move_with_the_tool(cluster, topic, replicas, dirs, tmp_path / f"{step}.json")
        _wait_done(cluster, topic, {p: [b] for p, b in replicas.items()})
        wait_until(lambda: all(_dir_of(cluster, topic, replicas[p], p) == d and not any(
            n.endswith("-future") for n in cluster.brokers[replicas[p]].partition_dirs()) for p, d in dirs.items()),
                   60, interval=0.2, what=f"every replica in the dir asked for ({step})")

    _create(cluster, topic, {0: [1], 1: [2], 2: [3]})
    traffic = Traffic(cluster, topic, 3)
    try:
        # First half: each replica to the other dir of its own broker (KIP-113).
        own = {p: p + 1 for p in range(3)}
        move(own, {p: _other_dir(cluster, b, _dir_of(cluster, topic, b, p)) for p, b in own.items()}, "other-dir")
        traffic.keeps_going()
        # Second half: each replica to the unused dir of the next broker (1->2, 2->3, 3->1).
        following = {p: (p + 1) % 3 + 1 for p in range(3)}
        move(following, {p: _other_dir(cluster, nb, _dir_of(cluster, topic, nb, nb - 1)) for p, nb in following.items()},
             "next-broker")
        traffic.keeps_going()
    except BaseException:
        traffic.abandon()
        raise
    traffic.finish()
    controller_log = cluster.brokers[cluster.controller_id()].stderr_text(2_000_000)
    assert f"reassignment of {topic}-0 done: replicas [2]" in controller_log


# A cluster of its own, as before the module shared one: it kills the controller and a broker,
# whose ZooKeeper sessions may outlive them, and the shared cluster's later tests should not start
# on what that leaves.
@pytest.mark.own_cluster
def test_a_reassignment_survives_kill_9_of_the_controller_and_of_the_receiving_broker(cluster: Cluster) -> None:
    topic = "moving-killed"
    controller = cluster.controller_id()
    first, second = [b for b in cluster.brokers if b != controller]
    _create(cluster, topic, {0: [controller, first]}, **{"min.insync.replicas": "1"})
    traffic = Traffic(cluster, topic, 1)
    try:
        # The controller, whose replica is leaving, dies while the receiving broker (paused) has
        # not caught up; the request goes through a broker that is not the controller.
        cluster.pause(second)
        try:
            assert _reassign(cluster, topic, {0: [second, first]}, via=first) == {0: "NoError"}
            assert _under_way(cluster, topic, via=first) == {0: {"replicas": [second, first, controller],
                                                          "adding_replicas": [second],
                                                          "removing_replicas": [controller]}}
            cluster.brokers[controller].kill9()
            wait_until(lambda: cluster.metadata(via=cluster.brokers[first]).controller_id == first, 30,
                       interval=0.2, what="a new controller")
        finally:
            cluster.resume(second)
        _wait_done(cluster, topic, {0: [second, first]}, stale={controller}, via=first)
        traffic.keeps_going()
        # Its replica was removed while it was dead: back, it deletes that stray replica.
        cluster.brokers[controller].start()
        wait_until(lambda: f"{topic}-0" not in cluster.brokers[controller].partition_dirs(), 30, interval=0.2,
                   what="the stray replica deleted")
        assert "its replica here was removed while this broker was away" in cluster.brokers[controller].stderr_text()

        # The receiving broker dies before it has the replica, and comes back: the move completes.
        cluster.pause(controller)
        assert _reassign(cluster, topic, {0: [controller, first]}, via=first) == {0: "NoError"}
        cluster.brokers[controller].kill9()
        assert _under_way(cluster, topic, via=second)[0]["adding_replicas"] == [controller]
        cluster.brokers[controller].start()
        _wait_done(cluster, topic, {0: [controller, first]}, via=second)
        traffic.keeps_going()
    except BaseException:
        traffic.abandon()
        raise
    traffic.finish()


def _catch_up(cluster: Cluster, topic: str, leader: int, replica: int) -> tuple[float, float] | None:
    """(bytes held, bytes to hold) of ``replica`` as its leader exports them, if it does."""
    text = cluster.brokers[leader].metrics_text()
    labels = f'{{partition="0",replica="{replica}",topic="{topic}"}}'
    found = [re.search(rf"^{name}{re.escape(labels)} (\S+)$", text, re.M)
             for name in ("minikafka_replica_catch_up_bytes", "minikafka_replica_catch_up_total_bytes")]
    return None if None in found else (float(found[0].group(1)), float(found[1].group(1)))  # type: ignore[union-attr]


def test_a_cancelled_reassignment_goes_back_and_deletes_what_it_added(cluster: Cluster) -> None:
    topic = "moving-cancelled"
    # The broker paused while the replica is added to it is never the controller, which must answer.
    added = max(b for b in cluster.brokers if b != cluster.controller_id())
    first, leaving = sorted(b for b in cluster.brokers if b != added)
    _create(cluster, topic, {0: [first, leaving]}, **{"min.insync.replicas": "2"})
    traffic = Traffic(cluster, topic, 1)
    try:
        cluster.pause(added)
        try:
            assert _reassign(cluster, topic, {0: [first, added]}, via=leaving) == {0: "NoError"}
            assert _under_way(cluster, topic, via=first) == {0: {"replicas": [first, added, leaving],
                                                                 "adding_replicas": [added],
                                                                 "removing_replicas": [leaving]}}
            # The leader shows the new replica's byte progress: nothing of a log that is not empty.
            leader = cluster.leader(topic, 0)
            wait_until(lambda: (p := _catch_up(cluster, topic, leader, added)) is not None and p[0] == 0 and p[1] > 0, 10,
                       interval=0.2, what="the catch-up of the paused replica exported")
            assert _reassign(cluster, topic, {0: None}, via=first) == {0: "NoError"}
            assert _under_way(cluster, topic, via=leaving) == {}
            assert _reassign(cluster, topic, {0: None}, via=leaving) == {0: "NoReassignmentInProgressError"}
            assert _reassign(cluster, topic, {0: [first, 7]}, via=leaving) == {0: "InvalidReplicationAssignmentError"}
        finally:
            cluster.resume(added)
        _wait_done(cluster, topic, {0: [first, leaving]})
        wait_until(lambda: _catch_up(cluster, topic, cluster.leader(topic, 0), added) is None, 10, interval=0.2,
                   what="the removed replica's catch-up series gone")
        traffic.keeps_going()
    except BaseException:
        traffic.abandon()
        raise
    traffic.finish()


@pytest.mark.cluster_settings(**{"leader.imbalance.check.interval.seconds": "1"})
def test_kafkas_reassign_partitions_znode_is_honoured_and_the_first_replica_leads_after(cluster: Cluster,
                                                                                      zookeeper: ZooKeeperProcess) -> None:
    topic = "moving-znode"
    _create(cluster, topic, {0: [1, 2], 1: [1, 2]})
    assert cluster.leader(topic, 0) == 1 and cluster.leader(topic, 1) == 1
    # What kafka-reassign-partitions.sh --zookeeper wrote before KIP-455.
    zk = KazooClient(hosts=zookeeper.connect + cluster.chroot)
    zk.start(timeout=15)
    try:
        zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [3, 1]},
            {"topic": topic, "partition": 1, "replicas": [3, 7]}]}).encode())
        wait_until(lambda: zk.exists("/admin/reassign_partitions") is None, 30, interval=0.2,
                   what="the controller taking the request")
        # Partition 0 moves; its leader stays until the rebalance gives it to the first replica.
        _wait_done(cluster, topic, {0: [3, 1], 1: [1, 2]})
        wait_until(lambda: cluster.leader(topic, 0) == 3, 30, interval=0.2, what="broker 3 leading as first replica")
        controller = cluster.controller_id()
        log_text = cluster.brokers[controller].stderr_text(2_000_000)
        assert f"ignoring the reassignment of {topic}-1 to [3, 7] in /admin/reassign_partitions" in log_text
        # A request whose partitions are not a list is refused in words and removed, and the
        # controller stays (reading it once failed the controller's event, which resigned).
        epoch = zk.get("/controller_epoch")[0]
        zk.create("/admin/reassign_partitions", b'{"version": 1, "partitions": 5}')
        wait_until(lambda: zk.exists("/admin/reassign_partitions") is None, 30, interval=0.2,
                   what="the controller removing the malformed request")
        assert "ignoring /admin/reassign_partitions:" in cluster.brokers[controller].stderr_text(2_000_000)
        assert zk.get("/controller_epoch")[0] == epoch, "the controller resigned over a malformed request"
    finally:
        zk.stop()
        zk.close()
