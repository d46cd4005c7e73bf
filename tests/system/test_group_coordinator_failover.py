"""A consumer group of three members keeps consuming and committing while the broker that
coordinates it (the leader of its __consumer_offsets partition) is killed with kill -9."""

from __future__ import annotations

import threading

from confluent_kafka import Consumer, KafkaException, TopicPartition

from minikafka.group.coordinator import offsets_partition_for
from tests.integration.broker_process import wait_until
from tests.system.cluster import Cluster
from tests.system.load import ProducerRun

TOPIC = "events"
GROUP = "loyal-readers"
PARTITIONS = 3
OFFSETS_PARTITIONS = 6  # offsets.topic.num.partitions of the system tests' cluster


class Member:
    """One group member in its own thread: polls, records what it read, commits synchronously."""

    def __init__(self, bootstrap: str, name: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": name,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
        self.read: list[bytes] = []
        self.commits = 0
        self.commit_errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Member:
        self.consumer.subscribe([TOPIC])
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            messages = self.consumer.consume(100, 0.5)
            good = [m for m in messages if not m.error()]
            self.read += [m.key() for m in good]
            if good:
                try:
                    self.consumer.commit(asynchronous=False)
                    self.commits += 1
                except KafkaException as exc:  # retried by the next commit, as applications do
                    self.commit_errors.append(str(exc))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()


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
    members = [Member(cluster.bootstrap, f"member-{i}").start() for i in range(3)]
    try:
        try:
            wait_until(lambda: all(m.commits > 3 for m in members), 60, interval=0.2,
                       what="all three members committing")
            coordinator = cluster.leader("__consumer_offsets", offsets_partition_for(GROUP, OFFSETS_PARTITIONS))
            before = _committed(cluster)
            commits_before = sum(m.commits for m in members)
            read_before = sum(len(m.read) for m in members)
            cluster.brokers[coordinator].kill9()
            wait_until(lambda: sum(m.commits for m in members) > commits_before + 5
                       and sum(len(m.read) for m in members) > read_before + 100, 60, interval=0.2,
                       what="the group consuming and committing again after kill -9 of its coordinator")
            after = _committed(cluster)
            assert all(after.get(p, -1) >= offset for p, offset in before.items()), (before, after)
            new_coordinator = cluster.leader("__consumer_offsets", offsets_partition_for(GROUP, OFFSETS_PARTITIONS))
            assert new_coordinator not in (coordinator, -1)
            cluster.brokers[coordinator].start()
        finally:
            producer.stop()
        wait_until(lambda: set(producer.acked) <= {k for m in members for k in m.read}, 60, interval=0.2,
                   what="every acknowledged record consumed")
        ends = {p: 0 for p in range(PARTITIONS)}
        for partition, offset in producer.acked.values():
            ends[partition] = max(ends[partition], offset + 1)
        wait_until(lambda: _committed(cluster) == ends, 30, interval=0.5, what="the last commits cover every record")
    finally:
        for member in members:
            member.stop()
