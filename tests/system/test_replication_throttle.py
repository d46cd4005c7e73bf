"""Replication throttles (KIP-73) on a real cluster: a follower that missed data while it was
down catches up a throttled partition behind an unthrottled partition of the same leader, client
traffic on the same brokers is served meanwhile, and lifting the throttle lets it finish.

The rate's accuracy is measured in bench/bench_cluster.py (``--only throttle``), not here: these
tests assert what the throttle did (replicas held back, bytes counted), not how fast it went.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from tests.integration.broker_process import BrokerProcess, wait_until
from tests.system.cluster import Cluster
from tests.system.observe import alter_configs, log_bytes, metric_sample

TOPIC = "throttled"
CLIENT_TOPIC = "clients"
LEADER, SLOW, IN_SYNC = 1, 2, 3
MISSED_BYTES = 24 << 20  # per partition
RECORD_BYTES = 64 << 10
RATE = 1_000_000  # bytes/s: the catch-up of partition 0 would take about 25 s


def _metric(broker: BrokerProcess, name: str, direction: str) -> float:
    return metric_sample(broker, name, direction=direction)


def _in_isr(cluster: Cluster, partition: int, broker: int) -> bool:
    return broker in cluster.partitions(TOPIC, cluster.brokers[LEADER])[partition].isr_nodes


def _produce(cluster: Cluster, topic: str, partition: int, count: int, size: int, acks: str) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": acks, "linger.ms": 5,
                         "message.max.bytes": 2 * size})
    failed: list[str] = []
    for seq in range(count):
        while True:
            try:
                producer.produce(topic, b"%07d" % seq + bytes(size - 7), partition=partition,
                                 on_delivery=lambda error, _msg: error is None or failed.append(str(error)))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0 and not failed, failed


def _consume_all(cluster: Cluster, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "throttle-test-reader",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        wait_until(lambda: values.extend(m.value() for m in consumer.consume(100, 0.5) if m.error() is None)
                   or len(values) >= count, 60, interval=0, what=f"{count} records read back from {topic}")
        return values
    finally:
        consumer.close()


@pytest.mark.cluster_metrics
@pytest.mark.parametrize("direction", ["follower", "leader"])
def test_a_throttled_partition_catches_up_behind_an_unthrottled_one_until_the_throttle_is_lifted(
        cluster: Cluster, direction: str) -> None:
    # Both partitions led by broker 1; broker 2 follows both and will miss their data.
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments={0: [LEADER, SLOW, IN_SYNC],
                                                                           1: [LEADER, IN_SYNC, SLOW]},
                                      topic_configs={"min.insync.replicas": "1"})])
    finally:
        admin.close()
    cluster.wait_for_leaders(TOPIC, 2, isr_size=3)
    cluster.create_topic(CLIENT_TOPIC, 1, 3, **{"min.insync.replicas": "1"})
    # The broker whose throttle applies: the follower's own, or the leader's for what it serves.
    throttling = cluster.brokers[SLOW if direction == "follower" else LEADER]
    alter_configs(cluster.bootstrap, ConfigResource(ConfigResourceType.BROKER, str(throttling.broker_id),
                                   configs={f"{direction}.replication.throttled.rate": str(RATE)}))

    cluster.brokers[SLOW].kill9()
    wait_until(lambda: SLOW not in {b.node_id for b in cluster.metadata().brokers}, 30, interval=0.1,
               what="the killed follower gone from Metadata")
    for partition in (0, 1):
        _produce(cluster, TOPIC, partition, MISSED_BYTES // RECORD_BYTES, RECORD_BYTES, "1")
    # Partition 0's replica on broker 2 (follower side) or on broker 1 as leader (leader side).
    alter_configs(cluster.bootstrap, ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={
        f"{direction}.replication.throttled.replicas": f"0:{throttling.broker_id}"}))
    # The restarted broker's counters start from zero.
    holds_before, bytes_before = (0.0, 0.0) if direction == "follower" else (
        _metric(throttling, "minikafka_replication_throttled_holds_total", direction),
        _metric(throttling, "minikafka_replication_throttled_bytes_total", direction))
    # An in-sync replica is never held back: it must have left both ISRs before it comes back.
    wait_until(lambda: not _in_isr(cluster, 0, SLOW) and not _in_isr(cluster, 1, SLOW), 30, interval=0.1,
               what="the killed follower out of the ISRs")
    cluster.brokers[SLOW].start()  # its dynamic rate, if it is the throttling one, comes from ZooKeeper

    leader_bytes = log_bytes(cluster.brokers[LEADER], TOPIC, 0)
    wait_until(lambda: _in_isr(cluster, 1, SLOW), 60, interval=0.1, what="the unthrottled partition caught up")
    behind = log_bytes(cluster.brokers[SLOW], TOPIC, 0)
    assert behind < leader_bytes / 2, (behind, leader_bytes)
    # Clients of the same brokers are served while the throttled partition is still catching up.
    _produce(cluster, CLIENT_TOPIC, 0, 200, 1000, "all")
    assert [v[:7] for v in _consume_all(cluster, CLIENT_TOPIC, 200)] == [b"%07d" % i for i in range(200)]
    assert not _in_isr(cluster, 0, SLOW) and log_bytes(cluster.brokers[SLOW], TOPIC, 0) < leader_bytes
    assert _metric(throttling, "minikafka_replication_throttled_holds_total", direction) > holds_before
    assert _metric(throttling, "minikafka_replication_throttled_rate_bytes_per_second", direction) == RATE

    alter_configs(cluster.bootstrap, ConfigResource(ConfigResourceType.BROKER, str(throttling.broker_id), configs={
        f"{direction}.replication.throttled.rate": (AlterConfigOp.DELETE, None)}))
    wait_until(lambda: _in_isr(cluster, 0, SLOW), 60, interval=0.1, what="the throttled partition caught up")
    assert log_bytes(cluster.brokers[SLOW], TOPIC, 0) == leader_bytes
    # Every byte of partition 0 broker 2 fetched was a throttled replica's (and nothing else was).
    counted = _metric(throttling, "minikafka_replication_throttled_bytes_total", direction) - bytes_before
    assert counted == leader_bytes if direction == "follower" else counted >= leader_bytes
    assert _metric(throttling, "minikafka_replication_throttled_rate_bytes_per_second", direction) == float(2**63 - 1)
