"""ZooKeeper goes away (kill -9) under acks=all load and comes back: the brokers keep serving
the partitions they lead, nothing acknowledged is lost or doubled, and the cluster changes
again (a new topic) once ZooKeeper is back."""

from __future__ import annotations

import time

from kafka.errors import TopicAlreadyExistsError

from tests.integration.broker_process import wait_until
from tests.system.cluster import Cluster
from tests.system.load import ProducerRun, assert_exactly_once, read_all, wait_acked

TOPIC = "steady"
PARTITIONS = 3


def test_zookeeper_outage_loses_nothing_and_the_cluster_recovers(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    runs = [ProducerRun("confluent", cluster.bootstrap, TOPIC, PARTITIONS).start()]
    try:
        wait_acked(runs, {})
        leaders = {p: cluster.leader(TOPIC, p) for p in range(PARTITIONS)}
        cluster.zookeeper.kill9()
        outage_started = time.monotonic()
        # Leaders need no ZooKeeper to append and replicate: acks=all keeps being answered.
        wait_acked(runs, {r.client: len(r.acked) for r in runs}, timeout=30)
        # Longer than the session timeout (4 s), so sessions are at stake when it returns.
        time.sleep(max(0.0, 6.0 - (time.monotonic() - outage_started)))
        assert {p: cluster.leader(TOPIC, p) for p in range(PARTITIONS)} == leaders
        cluster.zookeeper.start()
        wait_until(lambda: len(cluster.metadata().brokers) == 3 and cluster.controller_id() in cluster.brokers,
                   60, interval=0.2, what="three registered brokers and a controller after ZooKeeper returned")
        wait_acked(runs, {r.client: len(r.acked) for r in runs}, timeout=60)
        # A broker whose session expired while ZooKeeper was away answers NOT_CONTROLLER until it
        # has a new one; Kafka's Java admin client retries that until its timeout, kafka-python once.
        wait_until(lambda: _create_once(cluster, "after-the-outage"), 30, interval=0.5,
                   what="a topic created after ZooKeeper returned")
    finally:
        for run in runs:
            run.stop()
    assert all(b.is_running() for b in cluster.brokers.values())
    cluster.wait_for_leaders(TOPIC, PARTITIONS, isr_size=3, timeout=60)
    assert_exactly_once(runs, read_all(cluster.bootstrap, TOPIC, PARTITIONS))


def _create_once(cluster: Cluster, name: str) -> bool:
    try:
        cluster.create_topic(name, PARTITIONS, 3)
    except TopicAlreadyExistsError:
        pass  # an earlier try was written before its answer was lost
    return True
