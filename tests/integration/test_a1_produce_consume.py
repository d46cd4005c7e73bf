"""Scenario A1 of ACCEPTANCE.md without consumer groups.

Two idempotent producers (kafka-python and confluent-kafka, acks=all) write keyed, sequenced
records concurrently into an 8-partition topic spread over two log dirs; the broker is killed
with SIGKILL mid-stream and restarted; the producers carry on. Then a confluent-kafka and an
aiokafka consumer each read everything back, and every acknowledged record must be there
exactly once, at the offset it was acknowledged with, in send order per producer per partition.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import confluent_kafka
import pytest
from kafka import KafkaProducer

from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import ReadRecord, aiokafka_consume, confluent_consume, create_topic

pytestmark = pytest.mark.integration

TOPIC = "a1"
PARTITIONS = 8
PER_PRODUCER = 50_000
PRODUCERS = ("kafka-python", "confluent")
VALUE_PADDING = b"." * 80
# Producers stop at this sequence number until the broker was killed and restarted, so both
# still have records to send afterwards whatever their relative speeds.
GATE_SEQ = PER_PRODUCER * 6 // 10
GATE_TIMEOUT_S = 120


def _key(producer: str, seq: int) -> bytes:
    return f"{producer}-{seq}".encode()


def _value(producer: str, seq: int) -> bytes:
    return f"{producer}:{seq}:".encode() + VALUE_PADDING


@dataclass
class ProducerLog:
    """What one producer thread did; written by its thread and its client's callbacks."""

    name: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: int = 0
    acked: dict[int, tuple[int, int]] = field(default_factory=dict)  # seq -> (partition, offset)
    failed: dict[int, str] = field(default_factory=dict)
    finished: bool = False
    crash: BaseException | None = None
    restarted: threading.Event = field(default_factory=threading.Event)

    def ack(self, seq: int, partition: int, offset: int) -> None:
        with self.lock:
            self.acked[seq] = (partition, offset)

    def fail(self, seq: int, error: object) -> None:
        with self.lock:
            self.failed[seq] = repr(error)

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)


def _run_kafka_python(bootstrap: str, log: ProducerLog) -> None:
    try:
        # kafka-python 3 defaults: enable_idempotence=True, acks='all', unbounded retries
        # within delivery_timeout_ms.
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, delivery_timeout_ms=120_000)
        try:
            for seq in range(PER_PRODUCER):
                if seq == GATE_SEQ and not log.restarted.wait(GATE_TIMEOUT_S):
                    raise TimeoutError("the broker was never restarted")
                future = producer.send(TOPIC, key=_key(log.name, seq), value=_value(log.name, seq))
                future.add_callback(lambda md, seq=seq: log.ack(seq, md.partition, md.offset))
                future.add_errback(lambda exc, seq=seq: log.fail(seq, exc))
                log.sent = seq + 1
            producer.flush(timeout=120)
        finally:
            producer.close(timeout=30)
    except BaseException as exc:  # reported by the test, not lost in the thread
        log.crash = exc
    finally:
        log.finished = True


def _run_confluent(bootstrap: str, log: ProducerLog) -> None:
    try:
        producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120_000,
            # A short local queue keeps this producer paced by the broker's acks, so the kill
            # lands while it is still sending rather than after it queued everything.
            "queue.buffering.max.messages": 2000,
        })

        def delivered(err, msg) -> None:
            seq = int(msg.key().decode().rsplit("-", 1)[1])
            if err is None:
                log.ack(seq, msg.partition(), msg.offset())
            else:
                log.fail(seq, err)

        for seq in range(PER_PRODUCER):
            if seq == GATE_SEQ:
                gate_deadline = time.monotonic() + GATE_TIMEOUT_S
                while not log.restarted.is_set():  # keep serving delivery callbacks meanwhile
                    if time.monotonic() > gate_deadline:
                        raise TimeoutError("the broker was never restarted")
                    producer.poll(0.05)
            while True:
                try:
                    producer.produce(TOPIC, key=_key(log.name, seq), value=_value(log.name, seq),
                                     on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            log.sent = seq + 1
        remaining = producer.flush(120)
        if remaining:
            raise RuntimeError(f"{remaining} records neither delivered nor failed after flush")
    except BaseException as exc:
        log.crash = exc
    finally:
        log.finished = True


def _validate(reader: str, read: list[ReadRecord], logs: dict[str, ProducerLog]) -> None:
    keys = Counter(r.key for r in read)
    duplicates = [k for k, n in keys.items() if n > 1]
    assert not duplicates, f"{reader}: {len(duplicates)} keys read more than once, e.g. {duplicates[:5]}"

    where = {r.key: r for r in read}
    for name, log in logs.items():
        missing = [seq for seq in log.acked if _key(name, seq) not in where]
        assert not missing, f"{reader}: {len(missing)} acknowledged {name} records lost, e.g. seqs {missing[:5]}"
        moved = [(seq, log.acked[seq], (where[_key(name, seq)].partition, where[_key(name, seq)].offset))
                 for seq in log.acked if log.acked[seq][1] >= 0
                 and log.acked[seq] != (where[_key(name, seq)].partition, where[_key(name, seq)].offset)]
        assert not moved, f"{reader}: {len(moved)} {name} records not where acknowledged, e.g. {moved[:5]}"
        wrong_value = [seq for seq in log.acked if where[_key(name, seq)].value != _value(name, seq)]
        assert not wrong_value, f"{reader}: {name} values differ for seqs {wrong_value[:5]}"

    # Per partition, in offset order, each producer's sequence numbers strictly increase.
    by_partition: dict[tuple[int, str], list[tuple[int, int]]] = defaultdict(list)
    for r in read:
        producer, seq = r.key.decode().rsplit("-", 1)
        by_partition[(r.partition, producer)].append((r.offset, int(seq)))
    for (partition, producer), entries in by_partition.items():
        entries.sort()
        seqs = [seq for _offset, seq in entries]
        bad = [(a, b) for a, b in zip(seqs, seqs[1:], strict=False) if b <= a]
        assert not bad, f"{reader}: {producer} out of order in partition {partition}: {bad[:5]}"
    offsets: dict[int, list[int]] = defaultdict(list)
    for r in read:
        offsets[r.partition].append(r.offset)
    for partition, seen in offsets.items():
        assert sorted(seen) == list(range(len(seen))), f"{reader}: partition {partition} offsets not contiguous"


def test_a1_two_idempotent_producers_survive_kill9(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)

    with broker.wire() as wire:
        metadata = wire.metadata([TOPIC], version=1)
    (topic,) = metadata.topics
    assert topic.error_code == 0
    assert sorted(p.partition_index for p in topic.partitions) == list(range(PARTITIONS))
    assert all(p.leader_id == 1 and p.error_code == 0 for p in topic.partitions), topic.partitions
    assert all(list(p.replica_nodes) == [1] and list(p.isr_nodes) == [1] for p in topic.partitions)

    dirs = {name: d for name, d in broker.partition_dirs().items() if name.startswith(f"{TOPIC}-")}
    assert sorted(dirs) == sorted(f"{TOPIC}-{p}" for p in range(PARTITIONS))
    assert set(dirs.values()) == set(broker.log_dirs), f"partitions not spread over both dirs: {dirs}"

    logs = {name: ProducerLog(name) for name in PRODUCERS}
    threads = [
        threading.Thread(target=_run_kafka_python, args=(broker.bootstrap, logs["kafka-python"]), daemon=True),
        threading.Thread(target=_run_confluent, args=(broker.bootstrap, logs["confluent"]), daemon=True),
    ]
    started = time.monotonic()
    for t in threads:
        t.start()

    # Kill as soon as both producers are under way, so that both have records in flight.
    wait_until(lambda: all(log.acked_count() >= PER_PRODUCER // 20 or log.finished for log in logs.values()),
               timeout=90, what="both producers 5% acknowledged")
    acked_at_kill = {name: log.acked_count() for name, log in logs.items()}
    broker.kill9()
    broker.start()
    for log in logs.values():
        log.restarted.set()

    for t in threads:
        t.join(timeout=max(1.0, 170 - (time.monotonic() - started)))
    assert not any(t.is_alive() for t in threads), "producers did not finish in time"
    for log in logs.values():
        assert log.crash is None, f"{log.name} producer crashed: {log.crash!r}"
        assert len(log.acked) + len(log.failed) == PER_PRODUCER, (
            f"{log.name}: {len(log.acked)} acked + {len(log.failed)} failed != {PER_PRODUCER}")
    assert all(acked < PER_PRODUCER for acked in acked_at_kill.values()), (
        f"the kill came after a producer had everything acknowledged: {acked_at_kill}")
    # A short outage within delivery timeouts should cost little; failed sends are shown here.
    failures = {name: dict(list(log.failed.items())[:3]) for name, log in logs.items() if log.failed}
    print(f"acked at kill {acked_at_kill}; acked {[len(log.acked) for log in logs.values()]}; "
          f"failed {[len(log.failed) for log in logs.values()]} {failures}")
    assert sum(len(log.acked) for log in logs.values()) > PER_PRODUCER, f"too few acks; failures: {failures}"

    _validate("confluent-kafka", confluent_consume(broker.bootstrap, TOPIC, range(PARTITIONS), timeout=90), logs)
    _validate("aiokafka", aiokafka_consume(broker.bootstrap, TOPIC, range(PARTITIONS), timeout=90), logs)

    with broker.wire() as wire:
        after = wire.metadata([TOPIC], version=1)
    assert all(p.leader_id == 1 and p.error_code == 0 for p in after.topics[0].partitions)
    assert broker.is_running()
