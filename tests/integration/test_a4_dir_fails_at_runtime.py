"""Scenario A4 of ACCEPTANCE.md: one log dir fails while the broker runs.

For each fault kind (the dir replaced by a regular file, its tmpfs filled to ENOSPC, its tmpfs
lazily unmounted) a topic is spread over both dirs; a confluent-kafka producer (idempotent,
acks=all) and a confluent-kafka consumer work on the partitions of the good dir the whole time,
and a long poll waits on a partition of the doomed dir. After the fault:
- the producer and consumer of the good dir never see an error, never pause noticeably, and
  every acknowledged record is read back exactly once, in order;
- a producer on the failed dir's partitions gets KAFKA_STORAGE_ERROR (or NOT_LEADER_OR_FOLLOWER)
  at once, from a bare request and from kafka-python alike: never a hang or a success;
- the waiting long poll is answered with KAFKA_STORAGE_ERROR well before its max wait;
- Metadata shows those partitions without leader, with this broker in offline_replicas;
- DescribeLogDirs gives the failed dir KAFKA_STORAGE_ERROR (when the broker offers it);
- OfflineLogDirectoryCount = 1, OfflineReplicaCount = the replicas of the failed dir;
- the broker still runs, and one log line names the dir, the error and those replicas.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
import kafka.errors
import pytest
from kafka import KafkaProducer

from tests.integration import disk_faults
from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import create_topic, kafka_python_produce
from tests.integration.disk_faults import (
    FAULT_KINDS,
    KAFKA_STORAGE_ERROR,
    LEADER_NOT_AVAILABLE,
    NOT_LEADER_OR_FOLLOWER,
    Tmpfs,
)

pytestmark = pytest.mark.integration

TOPIC = "a4"
PARTITIONS = 6
# Bigger than a page, so a filled tmpfs cannot take it in the tail of a page already allocated.
BIG_VALUE = bytes(range(256)) * 256
MAX_PAUSE_S = 2.5


@dataclass
class GoodDirTraffic:
    """The producer and consumer of the good dir's partitions, each on a thread of its own.

    The producer writes keyed, sequenced records round-robin over ``partitions``; the consumer
    reads them from the start. Both record every error they meet.
    """

    bootstrap: str
    partitions: list[int]
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: int = 0
    acked: dict[int, tuple[int, int]] = field(default_factory=dict)  # seq -> (partition, offset)
    ack_times: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    read: list[tuple[int, int, bytes]] = field(default_factory=list)  # (partition, offset, key)
    consumer_done: threading.Event = field(default_factory=threading.Event)
    consume_until: dict[int, int] | None = None

    def produce(self) -> None:
        producer = confluent_kafka.Producer({
            "bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 2, "message.timeout.ms": 60_000,
        })

        def delivered(err, msg) -> None:
            seq = int(msg.key().decode().split("-")[1])
            with self.lock:
                if err is not None:
                    self.errors.append(f"producer: record {seq}: {err}")
                else:
                    self.acked[seq] = (msg.partition(), msg.offset())
                    self.ack_times.append(time.monotonic())

        try:
            seq = 0
            while not self.stop.is_set():
                partition = self.partitions[seq % len(self.partitions)]
                producer.produce(TOPIC, key=f"good-{seq}".encode(), value=b"v" * 100, partition=partition,
                                 on_delivery=delivered)
                seq += 1
                self.sent = seq
                producer.poll(0.002)  # also paces the producer: about 500 records a second
            remaining = producer.flush(60)
            if remaining:
                self.errors.append(f"producer: {remaining} records neither delivered nor failed")
        except Exception as exc:
            self.errors.append(f"producer crashed: {exc!r}")

    def consume(self) -> None:
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": "a4-never-committed", "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        })
        try:
            consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING)
                             for p in self.partitions])
            next_offset = dict.fromkeys(self.partitions, 0)
            deadline = None
            while True:
                until = self.consume_until
                if until is not None:
                    if all(next_offset[p] >= until[p] for p in self.partitions):
                        return
                    deadline = deadline or time.monotonic() + 60
                    if time.monotonic() > deadline:
                        self.errors.append(f"consumer: stuck at {next_offset}, wanted {until}")
                        return
                for msg in consumer.consume(num_messages=500, timeout=0.2):
                    if msg.error() is not None:
                        self.errors.append(f"consumer: {msg.error()}")
                        continue
                    with self.lock:
                        self.read.append((msg.partition(), msg.offset(), msg.key()))
                    next_offset[msg.partition()] = msg.offset() + 1
        except Exception as exc:
            self.errors.append(f"consumer crashed: {exc!r}")
        finally:
            consumer.close()
            self.consumer_done.set()

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)

    def read_count(self) -> int:
        with self.lock:
            return len(self.read)


def _confluent_outcomes(bootstrap: str, partitions: list[int]) -> dict[int, object]:
    """Produce one record to each partition with a 5 s delivery timeout; {partition: error}."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000,
                                         "enable.idempotence": False, "acks": "all"})
    outcomes: dict[int, object] = {}
    for p in partitions:
        producer.produce(TOPIC, BIG_VALUE, partition=p,
                         on_delivery=lambda err, msg, p=p: outcomes.__setitem__(p, err))
    assert producer.flush(20) == 0, "records neither delivered nor failed after their delivery timeout"
    return outcomes


def _end_offsets(bootstrap: str, partitions: list[int]) -> dict[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "a4-offsets"})
    try:
        return {p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, p), timeout=10)[1]
                for p in partitions}
    finally:
        consumer.close()


def _validate_good_dir(traffic: GoodDirTraffic) -> None:
    assert not traffic.errors, f"the good dir's clients saw errors: {traffic.errors[:5]}"
    assert len(traffic.acked) == traffic.sent, f"{traffic.sent} sent, {len(traffic.acked)} acknowledged"
    keys = Counter(key for _, _, key in traffic.read)
    twice = [k for k, n in keys.items() if n > 1]
    assert not twice, f"records read more than once: {twice[:5]}"
    where = {key: (p, off) for p, off, key in traffic.read}
    lost = [seq for seq in traffic.acked if f"good-{seq}".encode() not in where]
    assert not lost, f"{len(lost)} acknowledged records were never read, e.g. {lost[:5]}"
    moved = [seq for seq, at in traffic.acked.items() if where[f"good-{seq}".encode()] != at]
    assert not moved, f"records not where they were acknowledged: {moved[:5]}"
    for partition in traffic.partitions:
        seqs = [int(key.decode().split("-")[1]) for p, _, key in sorted(traffic.read) if p == partition]
        assert seqs == sorted(seqs), f"partition {partition} out of order"


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_a4_one_dir_fails_while_clients_run(kind: str, tmp_path: Path, made_brokers: list[BrokerProcess],
                                           tmpfs_mounts: list[Tmpfs]) -> None:
    broker, tmpfs = disk_faults.start_broker_with_doomed_dir(kind, tmp_path / "broker", made_brokers,
                                                             tmpfs_mounts)
    good_dir, doomed_dir = broker.log_dirs
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    good, doomed = disk_faults.split_by_dir(broker, TOPIC)

    # The doomed partitions hold data, and a kafka-python producer knows their leader.
    for p in doomed:
        kafka_python_produce(broker.bootstrap, TOPIC, [(b"before", b"x")], partition=p)
    doomed_producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0, enable_idempotence=False,
                                    acks="all", request_timeout_ms=10_000, max_block_ms=10_000)
    pool = ThreadPoolExecutor(max_workers=3)
    traffic = GoodDirTraffic(broker.bootstrap, good)
    try:
        doomed_producer.send(TOPIC, b"warm", partition=doomed[0]).get(timeout=10)
        long_poll = pool.submit(disk_faults.raw_fetch, broker, TOPIC, doomed[0], 2, 60_000, 70.0)
        producing = pool.submit(traffic.produce)
        consuming = pool.submit(traffic.consume)
        wait_until(lambda: traffic.acked_count() >= 300 and traffic.read_count() >= 100, timeout=30,
                   what="good-dir traffic under way")
        assert not long_poll.done(), "the long poll on the doomed partition returned before the fault"

        # Every replica in the doomed dir, __consumer_offsets ones included.
        replicas_there = [n for n, d in broker.partition_dirs().items() if d == doomed_dir]
        fault_at = time.monotonic()
        disk_faults.inject(kind, doomed_dir, tmpfs)

        # A producer on the failed dir gets an error at once: a client whose metadata still
        # names the leader, and bare requests on every partition of the dir.
        with pytest.raises((kafka.errors.KafkaStorageError, kafka.errors.NotLeaderForPartitionError)):
            doomed_producer.send(TOPIC, BIG_VALUE, partition=doomed[0]).get(timeout=15)
        for p in doomed:
            code = disk_faults.raw_produce(broker, TOPIC, p, BIG_VALUE)
            assert code in (KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER), f"produce to a4-{p} answered {code}"
        # A client that learnt meanwhile that those partitions have no leader fails its records
        # within its delivery timeout; it never reports one delivered.
        outcomes = _confluent_outcomes(broker.bootstrap, doomed)
        assert all(err is not None for err in outcomes.values()), f"records on the failed dir: {outcomes}"
        answered = long_poll.result(timeout=15)
        assert answered.error_code == KAFKA_STORAGE_ERROR, answered
        assert time.monotonic() - fault_at < 15, "the long poll was answered by its timeout, not the failure"

        wait_until(lambda: disk_faults.offline_counts(broker) == (1.0, float(len(replicas_there))), timeout=10,
                   what="OfflineLogDirectoryCount 1 and OfflineReplicaCount = the failed dir's replicas")
        fetched = disk_faults.raw_fetch(broker, TOPIC, doomed[-1], 0, 500)
        assert fetched.error_code == KAFKA_STORAGE_ERROR, fetched

        metadata = disk_faults.partition_metadata(broker, TOPIC)
        for p in doomed:
            m = metadata[p]
            assert (m.error_code, m.leader_id, list(m.offline_replicas)) == (LEADER_NOT_AVAILABLE, -1, [1]), m
            assert list(m.replica_nodes) == [1] and list(m.isr_nodes) == [1], m
        for p in good:
            m = metadata[p]
            assert (m.error_code, m.leader_id, list(m.offline_replicas)) == (0, 1, []), m

        log_dirs = disk_faults.describe_log_dirs(broker)
        if log_dirs is not None:
            assert log_dirs[str(doomed_dir)][0] == KAFKA_STORAGE_ERROR, log_dirs
            error, names = log_dirs[str(good_dir)]
            assert (error, {n for n in names if n.startswith(f"{TOPIC}-")}) == (0, {f"{TOPIC}-{p}" for p in good})

        # The good dir keeps going a while after the fault, then everything is read back.
        acked_at_fault = traffic.acked_count()
        wait_until(lambda: traffic.acked_count() >= acked_at_fault + 500, timeout=30,
                   what="good-dir producer still acknowledged after the fault")
        traffic.stop.set()
        producing.result(timeout=90)
        traffic.consume_until = _end_offsets(broker.bootstrap, good)
        consuming.result(timeout=90)
    finally:
        traffic.stop.set()
        traffic.consume_until = traffic.consume_until or {}
        doomed_producer.close(timeout=5)
        pool.shutdown(wait=True, cancel_futures=True)

    _validate_good_dir(traffic)
    around_fault = [t for t in traffic.ack_times if fault_at - 2 <= t <= fault_at + 5]
    pauses = [b - a for a, b in zip(around_fault, around_fault[1:], strict=False)]
    assert pauses and max(pauses) < MAX_PAUSE_S, f"the good dir's producer paused {max(pauses or [0]):.2f}s"

    assert broker.is_running()
    lines = disk_faults.log_lines(broker, "ERROR minikafka.replica.log_dir_failure", f"log dir {doomed_dir} failed")
    assert len(lines) == 1, f"expected one log line for the failed dir, got {lines}"
    for name in replicas_there:
        assert name in lines[0], lines[0]
    for p in good:
        assert f"{TOPIC}-{p}," not in lines[0] and not lines[0].endswith(f"{TOPIC}-{p}"), lines[0]
    if kind == "enospc":
        assert "ENOSPC" in lines[0], lines[0]
