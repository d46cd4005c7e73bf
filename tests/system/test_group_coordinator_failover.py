"""A consumer group of three members keeps consuming and committing while the broker that
coordinates it (the leader of its __consumer_offsets partition) is killed with kill -9."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from minikafka.group.coordinator import offsets_partition_for
from tests.integration.broker_process import wait_until
from tests.system.cluster import Cluster
from tests.system.load import GroupMember, ProducerRun

TOPIC = "events"
GROUP = "loyal-readers"
PARTITIONS = 3
OFFSETS_PARTITIONS = 6  # offsets.topic.num.partitions of the system tests' cluster


def _committed(cluster: Cluster) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch, through a client that does not join it)."""
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP})
    try:
        found = reader.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=20)
    finally:
        reader.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


def test_members_keep_consuming_and_committing_when_the_coordinator_dies(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    producer = ProducerRun("confluent", cluster.bootstrap, TOPIC, PARTITIONS, pace_s=0.005).start()
    members = [GroupMember(cluster.bootstrap, GROUP, TOPIC, f"member-{i}").start() for i in range(3)]
    try:
        try:
            wait_until(lambda: all(m.commits > 3 for m in members), 60, interval=0.2,
                       what="all three members committing")
            coordinator = cluster.leader("__consumer_offsets", offsets_partition_for(GROUP, OFFSETS_PARTITIONS))
            before = _committed(cluster)
            commits_before = sum(m.commits for m in members)
            read_before = sum(len(m.records) for m in members)
            cluster.brokers[coordinator].kill9()
            wait_until(lambda: sum(m.commits for m in members) > commits_before + 5
                       and sum(len(m.records) for m in members) > read_before + 100, 60, interval=0.2,
                       what="the group consuming and committing again after kill -9 of its coordinator")
            after = _committed(cluster)
            assert all(after.get(p, -1) >= offset for p, offset in before.items()), (before, after)
            new_coordinator = cluster.leader("__consumer_offsets", offsets_partition_for(GROUP, OFFSETS_PARTITIONS))
            assert new_coordinator not in (coordinator, -1)
            cluster.brokers[coordinator].start()
        finally:
            producer.stop()
        wait_until(lambda: set(producer.acked) <= {k for m in members for k in m.keys()}, 60, interval=0.2,
                   what="every acknowledged record consumed")
        ends = {p: 0 for p in range(PARTITIONS)}
        for partition, offset in producer.acked.values():
            ends[partition] = max(ends[partition], offset + 1)
        wait_until(lambda: _committed(cluster) == ends, 30, interval=0.5, what="the last commits cover every record")
    finally:
        for member in members:
            member.stop()
