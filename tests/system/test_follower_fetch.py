"""The follower's fetch path under kill -9: a follower catching up fetches ahead (the next Fetch
goes out before the last one's records are written) and is killed twice mid-way; once back in
the ISR its log is byte for byte the leader's, and with the leader and the third replica gone it
alone serves every acknowledged record, once and in order."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

from tests.integration.broker_process import BrokerProcess, wait_until
from tests.system.cluster import Cluster
from tests.system.observe import alter_configs, log_bytes

TOPIC = "fetch-ahead"
RECORDS = 12_000
VALUE = bytes(1000)
# Slow enough to kill the follower mid-way, in fetches of many batches each.
THROTTLE = 4_000_000


def log_stream(broker: BrokerProcess) -> bytes:
    """The replica's segment files, one after the other: its batches in order, whatever the
    points where its segments rolled."""
    name = f"{TOPIC}-0"
    files = sorted((broker.partition_dirs()[name] / name).glob("*.log"), key=lambda f: int(f.stem))
    return b"".join(f.read_bytes() for f in files)


def produce(cluster: Cluster) -> list[int]:
    """Acknowledged offsets of RECORDS idempotent acks=all records keyed by their number."""
    acked: dict[int, int] = {}

    def delivered(error: object, message: object) -> None:
        if error is None:
            acked[int(message.key())] = message.offset()  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "batch.size": 64 * 1024})
    for i in range(RECORDS):
        producer.produce(TOPIC, key=b"%d" % i, value=VALUE, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert len(acked) == RECORDS
    return [acked[i] for i in range(RECORDS)]


def kill_mid_catch_up(follower: BrokerProcess, leader: BrokerProcess, share: float) -> None:
    follower.start()
    wait_until(lambda: log_bytes(follower, TOPIC, 0) >= share * log_bytes(leader, TOPIC, 0), 60, interval=0.02,
               what=f"the follower {share:.0%} of the way")
    assert log_bytes(follower, TOPIC, 0) < log_bytes(leader, TOPIC, 0), "caught up before it could be killed"
    follower.kill9()


@pytest.mark.cluster_settings(**{"log.segment.bytes": str(1 << 20), "replica.fetch.max.bytes": str(256 * 1024),
                                 "num.replica.fetchers": "2"})
def test_a_follower_killed_while_fetching_ahead_ends_identical_to_its_leader(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, 1, 3, **{"min.insync.replicas": "2"})
    leader_id = cluster.leader(TOPIC, 0)
    controller_id = cluster.controller_id()
    follower_id = next(b for b in cluster.brokers if b not in (leader_id, controller_id))
    leader, follower = cluster.brokers[leader_id], cluster.brokers[follower_id]
    alter_configs(cluster.bootstrap, ConfigResource(ConfigResourceType.BROKER, str(follower_id), configs={
        "follower.replication.throttled.rate": str(THROTTLE)}))
    alter_configs(cluster.bootstrap, ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={
        "follower.replication.throttled.replicas": f"0:{follower_id}"}))

    follower.kill9()
    wait_until(lambda: follower_id not in cluster.partitions(TOPIC)[0].isr_nodes, 30, interval=0.1,
               what="the killed follower out of the ISR")
    offsets = produce(cluster)
    assert offsets == sorted(offsets)
    for share in (0.2, 0.6):
        kill_mid_catch_up(follower, leader, share)
    follower.start()
    wait_until(lambda: follower_id in cluster.partitions(TOPIC)[0].isr_nodes, 90, interval=0.1,
               what="the follower back in the ISR")
    assert log_stream(follower) == log_stream(leader)

    for other in cluster.brokers.values():
        if other is not follower:
            other.kill9()
    wait_until(lambda: cluster.partitions(TOPIC, via=follower)[0].leader_id == follower_id, 30, interval=0.1,
               what="the follower leading")
    consumer = Consumer({"bootstrap.servers": follower.bootstrap, "group.id": "never-committed",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        seen: list[tuple[int, int]] = []
        while len(seen) < RECORDS:
            messages = consumer.consume(1000, timeout=10)
            assert messages, f"nothing more after {len(seen)} records"
            seen += [(int(m.key()), m.offset()) for m in messages if m.error() is None]
    finally:
        consumer.close()
    assert seen == list(enumerate(offsets))

