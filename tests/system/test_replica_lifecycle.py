"""Replicas that lost their data, and replicas of topics deleted while their broker was away.

* KIP-858's rule: a replica whose recorded log dir its broker no longer has (the disk was
  replaced) holds nothing; it leaves the ISR at once, so the last in-sync replica with its disk
  replaced never becomes the leader of an empty log: the partition stays offline, or is elected
  uncleanly only where that is enabled.
* A topic deleted while one of its brokers is down stays pending deletion (its znodes and name
  kept) until that broker returns and deletes its replicas, as Kafka's controller makes it wait;
  a topic re-created with the name then has a new topic id, none of the old data and none of the
  old configs.

The tests share one cluster, each with topics of its own.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError
from kazoo.client import KazooClient

from tests.integration.broker_process import BrokerProcess, KafkaWire, wait_until
from tests.integration.disk_faults import replace_with_empty_dir
from tests.system.cluster import Cluster

pytestmark = pytest.mark.shared_cluster
TOPIC = "ledger"


def _produce(broker: BrokerProcess, topic: str, count: int, prefix: str, size: int = 100) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True})
    errors: list[str] = []
    for i in range(count):
        producer.produce(topic, key=f"{prefix}-{i}".encode(), value=b"v" * size, partition=0,
                         on_delivery=lambda error, _: errors.append(str(error)) if error else None)
    assert producer.flush(30) == 0
    assert errors == []


def _read(bootstrap: str, topic: str, partition: int = 0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        low, high = consumer.get_watermark_offsets(ConfluentTopicPartition(topic, partition), timeout=10)
        consumer.assign([ConfluentTopicPartition(topic, partition, low)])
        keys: list[bytes] = []
        while len(keys) < high - low:
            message = consumer.poll(5)
            assert message is not None, f"read {len(keys)} of {high - low} records of {topic}-{partition}"
            assert message.error() is None, message.error()
            keys.append(message.key())
        return keys
    finally:
        consumer.close()


def _create(cluster: Cluster, topic: str, assignment: dict[int, list[int]], **configs: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, -1, -1, replica_assignments=assignment, topic_configs=configs)])
    finally:
        admin.close()
    cluster.wait_for_leaders(topic, len(assignment), isr_size=len(next(iter(assignment.values()))))


def _stays_offline(cluster: Cluster, topic: str, via: BrokerProcess, seconds: float) -> None:
    """No leader throughout ``seconds``: no event marks an election that does not happen, so watch."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert cluster.partitions(topic, via)[0].leader_id == -1
        time.sleep(0.1)


@pytest.mark.parametrize("unclean", [False, True], ids=["clean", "unclean-enabled"])
def test_the_last_in_sync_replica_with_its_disk_replaced_never_leads_an_empty_log(cluster: Cluster,
                                                                                   unclean: bool) -> None:
    # The controller stays up; the partition's two replicas are on the other brokers.
    topic = f"{TOPIC}-{'unclean' if unclean else 'clean'}"
    controller = cluster.controller_id()
    logged = cluster.brokers[controller].stderr_size()
    victim_id, other_id = [b for b in cluster.brokers if b != controller]
    _create(cluster, topic, {0: [victim_id, other_id]}, **{"min.insync.replicas": "1",
                                                           "unclean.leader.election.enable": str(unclean).lower()})
    victim, other, watcher = cluster.brokers[victim_id], cluster.brokers[other_id], cluster.brokers[controller]
    _produce(victim, topic, 50, "acked")
    other.kill9()
    wait_until(lambda: cluster.partitions(topic, watcher)[0].isr_nodes == [victim_id], 30, interval=0.1,
               what=f"broker {victim_id} the last in-sync replica")
    victim.kill9()
    wait_until(lambda: cluster.partitions(topic, watcher)[0].leader_id == -1, 30, interval=0.1,
               what="the partition offline")
    disk = victim.partition_dirs()[f"{topic}-0"]
    replace_with_empty_dir(disk)  # a new disk: a new directory id, nothing on it
    victim.start()
    # It registers with the new dir, is told of the partition and re-creates its replica empty.
    wait_until(lambda: f"{topic}-0" in victim.partition_dirs(), 30, interval=0.1, what="the replica re-created")
    if unclean:
        # Only because the topic allows it, and said as such.
        wait_until(lambda: cluster.partitions(topic, watcher)[0].leader_id == victim_id, 30, interval=0.1,
                   what="an unclean election")
        assert f"{topic}-0: UNCLEAN leader election" in watcher.stderr_since(logged)
        assert f"broker {victim_id} leads, the live replica holding the most (broker {victim_id}: empty)" \
            in watcher.stderr_since(logged)
        return
    _stays_offline(cluster, topic, watcher, 3)
    assert cluster.partitions(topic, watcher)[0].isr_nodes == []
    assert f"no longer has the log dir recorded for its replicas of {topic}-0" in watcher.stderr_since(logged)
    # The other replica comes back, behind on nothing acknowledged but out of the ISR: still no
    # clean leader, so nothing that was acknowledged can be silently replaced by an empty log.
    other.start()
    wait_until(lambda: len(cluster.metadata(via=watcher).brokers) == 3, 30, what="every broker back")
    _stays_offline(cluster, topic, watcher, 3)


def _topic_id(broker: BrokerProcess, topic: str) -> object:
    with KafkaWire(broker.address, timeout=5.0) as wire:
        (found,) = [t for t in wire.metadata([topic], version=10).topics if t.name == topic]
        return found.topic_id


def _znodes(cluster: Cluster, topic: str) -> set[str]:
    """Which of the topic's znodes stand."""
    zk = KazooClient(hosts=cluster.zookeeper.connect + "/minikafka")
    zk.start(timeout=10)
    try:
        return {path for path in (f"/brokers/topics/{topic}", f"/config/topics/{topic}", f"/admin/delete_topics/{topic}")
                if zk.exists(path) is not None}
    finally:
        zk.stop()
        zk.close()


def test_a_topic_deleted_while_a_broker_is_down_waits_for_that_broker(cluster: Cluster) -> None:
    """As Kafka's controller does (a ZooKeeper-mode Kafka broker keeps logs nobody tells it to
    delete): the topic leaves the metadata at once, but stays pending deletion, its znodes and
    its name kept, until the broker that was down has deleted its replicas."""
    controller = cluster.controller_id()
    logged = cluster.brokers[controller].stderr_size()
    away_id = next(b for b in cluster.brokers if b != controller)
    away = cluster.brokers[away_id]
    live = [b for b in cluster.brokers if b != away_id]
    # A small max.message.bytes: a re-created topic that kept it would refuse a larger record.
    cluster.create_topic("doomed", 2, 3, **{"max.message.bytes": "4000"})
    cluster.create_topic("gone", 1, 3)
    _produce(cluster.brokers[controller], "doomed", 20, "old")
    old_id = _topic_id(cluster.brokers[controller], "doomed")
    assert {"doomed-0", "doomed-1", "gone-0"} <= set(away.partition_dirs())
    away.kill9()
    wait_until(lambda: len(cluster.metadata(via=cluster.brokers[controller]).brokers) == 2, 30,
               what=f"broker {away_id} gone")

    admin = KafkaAdminClient(bootstrap_servers=",".join(cluster.brokers[b].bootstrap for b in live))
    try:
        admin.delete_topics(["doomed", "gone"], timeout_ms=30000)
        wait_until(lambda: not any({"doomed", "gone"} & {t.name for t in cluster.metadata(via=cluster.brokers[b]).topics}
                                   for b in live), 30, interval=0.1, what="both topics gone from the live brokers")
        assert not {"doomed-0", "doomed-1", "gone-0"} & {
            name for b in live for name in cluster.brokers[b].partition_dirs()}
        # Pending: the znodes stay, the name is taken, and the controller says what it waits for.
        for topic in ("doomed", "gone"):
            assert _znodes(cluster, topic) == {f"/brokers/topics/{topic}", f"/config/topics/{topic}",
                                               f"/admin/delete_topics/{topic}"}
        wait_until(lambda: f"deletion of topic doomed waits for broker {away_id}, which is down"
                   in cluster.brokers[controller].stderr_since(logged), 30, interval=0.1, what="the controller's warning")
        assert f"deletion of topic gone waits for broker {away_id}, which is down" \
            in cluster.brokers[controller].stderr_since(logged)
        with pytest.raises(TopicAlreadyExistsError, match="marked for deletion"):
            admin.create_topics([NewTopic("doomed", 1, 1)])
    finally:
        admin.close()

    away.start()
    # The returning broker is told to delete its replicas; only once it has are the znodes gone.
    wait_until(lambda: not _znodes(cluster, "doomed") | _znodes(cluster, "gone"), 30, interval=0.1,
               what="the deleted topics' znodes gone")
    assert not {"doomed-0", "doomed-1", "gone-0"} & set(away.partition_dirs())
    assert "gone" not in {t.name for t in cluster.metadata(via=away).topics}
    # The name is free now, and the new topic is another topic.
    _create(cluster, "doomed", {0: live, 1: live[::-1]})
    assert _topic_id(cluster.brokers[controller], "doomed") != old_id
    _produce(cluster.brokers[controller], "doomed", 5, "new", size=10_000)
    assert _read(cluster.bootstrap, "doomed") == [f"new-{i}".encode() for i in range(5)]
    assert away.is_running()
