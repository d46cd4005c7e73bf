"""Scenario A1 of ACCEPTANCE.md with a consumer group, in full.

Two idempotent producers (kafka-python and confluent-kafka, acks=all) write keyed, sequenced
records into an 8-partition topic spread over two log dirs. A consumer group of confluent-kafka
and aiokafka consumers reads them while members join and leave (3 members at most), committing
after every batch. The broker is killed with SIGKILL mid-stream and restarted; everyone carries on.

Checks: every acknowledged record is consumed; a record consumed more than once was always
re-read from at or after the last commit acknowledged for its partition before the re-read (so
no acknowledged commit was lost, not even by the kill); the group's committed offsets end at
the partitions' ends; the usual state validation (Metadata, process alive).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import confluent_kafka
import pytest
from kafka import KafkaProducer

from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import create_topic
from tests.integration.disk_faults import describe_log_dirs

pytestmark = pytest.mark.integration

TOPIC = "a1-groups"
GROUP = "a1-group"
PARTITIONS = 8
PER_PRODUCER = 12_000
PRODUCE_RATE = 600  # records per second per producer, so that the run spans every phase
BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "300", "offsets.topic.num.partitions": "10"}


def _key(producer: str, seq: int) -> bytes:
    return f"{producer}-{seq}".encode()


@dataclass
class Journal:
    """Everything the consumers did, in one timeline (written by every consumer thread)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    reads: list[tuple[float, str, int, int, bytes]] = field(default_factory=list)  # (t, member, p, offset, key)
    commits: list[tuple[float, int, int]] = field(default_factory=list)  # (t acknowledged, partition, offset)

    def read(self, member: str, partition: int, offset: int, key: bytes) -> None:
        with self.lock:
            self.reads.append((time.monotonic(), member, partition, offset, key))

    def committed(self, offsets: dict[int, int]) -> None:
        now = time.monotonic()
        with self.lock:
            self.commits += [(now, p, o) for p, o in offsets.items()]

    def members_reading(self, since: float) -> set[str]:
        with self.lock:
            return {member for t, member, *_ in self.reads if t >= since}

    def keys(self) -> set[bytes]:
        with self.lock:
            return {key for *_, key in self.reads}


class Member:
    """One consumer of the group in its own thread, until `stop()`; records reads and commits."""

    def __init__(self, name: str, bootstrap: str, journal: Journal) -> None:
        self.name, self.bootstrap, self.journal = name, bootstrap, journal
        self.stopping = threading.Event()
        self.crash: BaseException | None = None
        self.thread = threading.Thread(target=self._guarded, name=name, daemon=True)

    def start(self) -> Member:
        self.thread.start()
        return self

    def stop(self, timeout: float = 60) -> None:
        self.stopping.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.name} did not stop"
        assert self.crash is None, f"{self.name} crashed: {self.crash!r}"

    def _guarded(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # reported by stop()
            self.crash = exc

    def run(self) -> None:
        raise NotImplementedError


class ConfluentMember(Member):
    def run(self) -> None:
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": GROUP, "client.id": self.name,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "roundrobin", "session.timeout.ms": 10_000,
        })
        consumer.subscribe([TOPIC])
        try:
            while not self.stopping.is_set():
                batch = consumer.consume(num_messages=500, timeout=0.2)
                positions: dict[int, int] = {}
                for msg in batch:
                    if msg.error() is not None:
                        continue  # transient (e.g. the broker is down); librdkafka retries
                    self.journal.read(self.name, msg.partition(), msg.offset(), msg.key())
                    positions[msg.partition()] = msg.offset() + 1
                if not positions:
                    continue
                try:
                    done = consumer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, p, o)
                                                    for p, o in positions.items()], asynchronous=False)
                except confluent_kafka.KafkaException:
                    continue  # a rebalance or the broker restarting: the next owner re-reads
                self.journal.committed({tp.partition: tp.offset for tp in done or [] if tp.error is None})
        finally:
            consumer.close()


class AiokafkaMember(Member):
    def run(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.errors import KafkaError
        from aiokafka.structs import OffsetAndMetadata, TopicPartition

        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=self.bootstrap, group_id=GROUP, client_id=self.name,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    session_timeout_ms=10_000, retry_backoff_ms=200)
        await consumer.start()
        try:
            while not self.stopping.is_set():
                try:
                    batches = await consumer.getmany(timeout_ms=200, max_records=500)
                except KafkaError:
                    continue
                positions: dict[int, int] = {}
                for tp, messages in batches.items():
                    for msg in messages:
                        self.journal.read(self.name, tp.partition, msg.offset, msg.key)
                        positions[tp.partition] = msg.offset + 1
                if not positions:
                    continue
                try:
                    await consumer.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o, "")
                                           for p, o in positions.items()})
                except KafkaError:
                    continue
                self.journal.committed(positions)
        finally:
            await consumer.stop()


@dataclass
class Produced:
    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    finished: int = 0
    crash: list[BaseException] = field(default_factory=list)

    def ack(self, key: bytes, partition: int, offset: int) -> None:
        with self.lock:
            self.acked[key] = (partition, offset)

    def fail(self, key: bytes, error: object) -> None:
        with self.lock:
            self.failed.append(f"{key!r}: {error!r}")

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


def _paced(seq: int, started: float) -> None:
    ahead = seq / PRODUCE_RATE - (time.monotonic() - started)
    if ahead > 0:
        time.sleep(ahead)  # pacing the producer, not waiting for a condition


def _produce_kafka_python(bootstrap: str, produced: Produced) -> None:
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, delivery_timeout_ms=120_000)
        started = time.monotonic()
        try:
            for seq in range(PER_PRODUCER):
                key = _key("kp", seq)
                future = producer.send(TOPIC, key=key, value=b"v" * 50)
                future.add_callback(lambda md, key=key: produced.ack(key, md.partition, md.offset))
                future.add_errback(lambda exc, key=key: produced.fail(key, exc))
                _paced(seq, started)
            producer.flush(timeout=120)
        finally:
            producer.close(timeout=30)
    except BaseException as exc:
        produced.crash.append(exc)
    finally:
        with produced.lock:
            produced.finished += 1


def _produce_confluent(bootstrap: str, produced: Produced) -> None:
    try:
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                             "linger.ms": 5, "message.timeout.ms": 120_000})

        def delivered(err, msg) -> None:
            if err is None:
                produced.ack(msg.key(), msg.partition(), msg.offset())
            else:
                produced.fail(msg.key(), err)

        started = time.monotonic()
        for seq in range(PER_PRODUCER):
            while True:
                try:
                    producer.produce(TOPIC, key=_key("cf", seq), value=b"v" * 50, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            _paced(seq, started)
        if producer.flush(120):
            raise RuntimeError("records neither delivered nor failed after flush")
    except BaseException as exc:
        produced.crash.append(exc)
    finally:
        with produced.lock:
            produced.finished += 1


def _wait_reading(journal: Journal, member: Member, what: str) -> None:
    since = time.monotonic()
    wait_until(lambda: member.name in journal.members_reading(since) or member.crash, timeout=60, what=what)
    assert member.crash is None, f"{member.name} crashed: {member.crash!r}"


def _check_duplicates(journal: Journal) -> int:
    """Every record read twice was re-read from at or after the last acknowledged commit."""
    commits: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for t, p, o in journal.commits:
        commits[p].append((t, o))
    first_read: dict[bytes, float] = {}
    duplicates = 0
    bad = []
    for t, member, p, offset, key in sorted(journal.reads):
        if key not in first_read:
            first_read[key] = t
            continue
        duplicates += 1
        last_commit = max((o for tc, o in commits[p] if tc < t), default=0)
        if offset < last_commit:
            bad.append((member, p, offset, last_commit))
    assert not bad, f"{len(bad)} records re-read from before an acknowledged commit, e.g. {bad[:5]}"
    return duplicates


def test_a1_consumer_group_survives_members_coming_and_going_and_kill9(broker_factory) -> None:
    broker: BrokerProcess = broker_factory(overrides=BROKER_OVERRIDES)
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    placement = {name: d for name, d in broker.partition_dirs().items() if name.startswith(f"{TOPIC}-")}
    assert set(placement.values()) == set(broker.log_dirs), "the topic is not spread over both log dirs"

    journal, produced = Journal(), Produced()
    producers = [threading.Thread(target=_produce_kafka_python, args=(broker.bootstrap, produced), daemon=True),
                 threading.Thread(target=_produce_confluent, args=(broker.bootstrap, produced), daemon=True)]
    for t in producers:
        t.start()
    members: list[Member] = []
    try:
        first = ConfluentMember("confluent-1", broker.bootstrap, journal).start()
        second = AiokafkaMember("aiokafka-1", broker.bootstrap, journal).start()
        members += [first, second]
        _wait_reading(journal, first, "the first confluent member reading")
        _wait_reading(journal, second, "the first aiokafka member reading")

        third = ConfluentMember("confluent-2", broker.bootstrap, journal).start()
        members.append(third)
        _wait_reading(journal, third, "a third member joining and reading")

        second.stop()  # leaves the group; its partitions move to the others
        members.remove(second)
        replacement = AiokafkaMember("aiokafka-2", broker.bootstrap, journal).start()
        members.append(replacement)
        _wait_reading(journal, replacement, "a new aiokafka member joining and reading")

        assert produced.finished == 0, "the producers finished before the kill"
        broker.kill9()
        broker.start()
        for member in members:
            _wait_reading(journal, member, f"{member.name} reading again after the restart")

        for t in producers:
            t.join(timeout=180)
        assert not any(t.is_alive() for t in producers), "producers did not finish"
        assert not produced.crash, f"producer crashed: {produced.crash!r}"
        assert produced.count() + len(produced.failed) == 2 * PER_PRODUCER
        assert produced.count() > PER_PRODUCER, f"too few acknowledged: {produced.failed[:3]}"
        acked = set(produced.acked)
        wait_until(lambda: acked <= journal.keys() or any(m.crash for m in members), timeout=90,
                   what="every acknowledged record consumed")
    finally:
        for member in members:
            member.stop()

    missing = acked - journal.keys()
    assert not missing, f"{len(missing)} acknowledged records never consumed, e.g. {sorted(missing)[:5]}"
    duplicates = _check_duplicates(journal)
    by_key = {key: (p, o) for _, _, p, o, key in journal.reads}
    moved = [k for k in acked if by_key[k] != produced.acked[k]]
    assert not moved, f"records read at another offset than acknowledged, e.g. {moved[:5]}"
    print(f"A1 groups: {len(acked)} acknowledged, {len(journal.reads)} reads, {duplicates} re-reads, "
          f"{len(journal.commits)} partition commits")

    # The group's committed offsets (read back by a fresh client) are the partitions' ends.
    checker = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP})
    try:
        ends = {p: checker.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, p), timeout=10)[1]
                for p in range(PARTITIONS)}
        committed = checker.committed([confluent_kafka.TopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                                      timeout=10)
        assert {tp.partition: tp.offset for tp in committed} == ends
    finally:
        checker.close()
    with broker.wire() as wire:
        metadata = wire.metadata([TOPIC], version=1)
    assert all(p.leader_id == 1 and p.error_code == 0 for p in metadata.topics[0].partitions)
    log_dirs = describe_log_dirs(broker)
    assert log_dirs is not None
    for log_dir, (error, replicas) in log_dirs.items():
        assert error == 0, f"{log_dir} reports error {error}"
        assert {r for r in replicas if r.startswith(f"{TOPIC}-")} == {
            name for name, d in placement.items() if str(d) == log_dir}, f"replicas moved in {log_dir}"
    # Every member has left: the group is Empty (and was loaded Stable after the kill, with no
    # rebalance needed for its members to carry on).
    assert 'minikafka_groups{state="Empty"} 1.0' in broker.metrics_text().splitlines()
    assert broker.is_running()
