"""RF 3, min.insync.replicas=2, acks=all producers (confluent-kafka and kafka-python) run while
the leader of every partition is killed with kill -9 and restarted, and then the controller is:
every acknowledged record is read back exactly once, in order per partition. And a follower
that diverged (the old leader's unreplicated tail) truncates when it comes back. The two tests
share one cluster, each with a topic of its own."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from tests.integration.broker_process import wait_until
from tests.system.cluster import Cluster
from tests.system.load import ProducerRun, assert_exactly_once, read_all, wait_acked

pytestmark = pytest.mark.shared_cluster
TOPIC = "orders"
PARTITIONS = 3
DIVERGED = "diverged"


def _kill_and_restart(cluster: Cluster, victim: int, runs: list[ProducerRun], what: str) -> None:
    before = {r.client: len(r.acked) for r in runs}
    cluster.brokers[victim].kill9()
    survivor = next(b for b in cluster.brokers.values() if b.is_running())
    # A new leader (or controller) takes over once the victim's ZooKeeper session expires.
    wait_until(lambda: all(p.leader_id not in (victim, -1) for p in cluster.partitions(TOPIC, survivor).values()),
               30, interval=0.1, what=f"new leaders after kill -9 of {what} {victim}")
    wait_acked(runs, before)
    cluster.brokers[victim].start()
    cluster.wait_for_leaders(TOPIC, PARTITIONS, isr_size=3, timeout=60)


def test_leaders_and_controller_killed_under_acks_all_lose_nothing(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    runs = [ProducerRun("confluent", cluster.bootstrap, TOPIC, PARTITIONS).start(),
            ProducerRun("kafka-python", cluster.bootstrap, TOPIC, PARTITIONS, pace_s=0.005).start()]
    try:
        wait_acked(runs, {})
        for partition in range(PARTITIONS):
            _kill_and_restart(cluster, cluster.leader(TOPIC, partition), runs, f"the leader of {TOPIC}-{partition}")
        _kill_and_restart(cluster, cluster.controller_id(), runs, "the controller")
        wait_until(lambda: cluster.controller_id() in cluster.brokers, 30, what="a controller")
    finally:
        for run in runs:
            run.stop()
    records = read_all(cluster.bootstrap, TOPIC, PARTITIONS)
    assert_exactly_once(runs, records)
    assert sum(len(r.acked) for r in runs) > 500


def test_a_diverged_old_leader_truncates_its_unreplicated_tail(cluster: Cluster) -> None:
    # The leader writes records (acks=1) that its followers, paused, never get; it dies; a
    # follower (still in the ISR) is elected; the old leader comes back and must drop them.
    cluster.create_topic(DIVERGED, 1, 3, **{"min.insync.replicas": "1"})
    leader = cluster.leader(DIVERGED, 0)
    logged = cluster.brokers[leader].stderr_size()
    followers = [b for b in cluster.brokers if b != leader]
    committed = Producer({"bootstrap.servers": cluster.brokers[leader].bootstrap, "acks": "all"})
    for i in range(20):
        committed.produce(DIVERGED, key=b"committed-%d" % i, value=b"v", partition=0)
    assert committed.flush(30) == 0
    for follower in followers:
        cluster.pause(follower)
    # A follower paused with a fetch outstanding would get the tail in that fetch's answer and
    # append it once resumed: let the leader answer the outstanding fetches (empty, after
    # replica.fetch.wait.max.ms) before the tail is written.
    time.sleep(1.0)
    try:
        tail = Producer({"bootstrap.servers": cluster.brokers[leader].bootstrap, "acks": "1"})
        for i in range(10):
            tail.produce(DIVERGED, key=b"tail-%d" % i, value=b"v", partition=0)
        assert tail.flush(10) == 0
        cluster.brokers[leader].kill9()
    finally:
        for follower in followers:
            cluster.resume(follower)
    survivor = cluster.brokers[followers[0]]
    wait_until(lambda: cluster.partitions(DIVERGED, survivor)[0].leader_id in followers, 30, interval=0.1,
               what="a follower elected")
    after = Producer({"bootstrap.servers": survivor.bootstrap, "acks": "all"})
    for i in range(5):
        after.produce(DIVERGED, key=b"after-%d" % i, value=b"v", partition=0)
    assert after.flush(30) == 0
    cluster.brokers[leader].start()
    cluster.wait_for_leaders(DIVERGED, 1, isr_size=3, timeout=60)
    truncated = f"{DIVERGED}-0: truncating from offset 30 to 20"
    wait_until(lambda: truncated in cluster.brokers[leader].stderr_since(logged), 30,
               what="the old leader truncating its tail")
    # Read from the old leader itself once it leads again: it holds what the cluster holds.
    keys = [r.key for r in read_all(cluster.bootstrap, DIVERGED, 1)]
    assert keys == [b"committed-%d" % i for i in range(20)] + [b"after-%d" % i for i in range(5)]
