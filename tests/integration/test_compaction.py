"""Compacted topics on a real broker, with real clients: many updates per key compact to the
latest value of each key, tombstones go after delete.retention.ms, compact,delete also deletes
by retention, a keyless record is refused with INVALID_RECORD, a consumer reads through a clean,
and a moved replica keeps its cleaner checkpoint."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka
import pytest
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.memory_records import MemoryRecordsBuilder

from tests.integration.broker_process import REPO_ROOT, BrokerProcess, wait_until
from tests.integration.clients import ReadRecord, confluent_consume, confluent_produce, create_topic

pytestmark = pytest.mark.integration

# A cleaner that looks every 100 ms; topics with tiny segments that roll on every few records.
CLEANER = {"log.cleaner.backoff.ms": "100", "log.retention.check.interval.ms": "200",
           "log.segment.delete.delay.ms": "0", "log.flush.offset.checkpoint.interval.ms": "500"}
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}
KEYS = 20
# Producer batches well under segment.bytes; END, alone, rolls the segment it lands after.
SMALL_BATCHES = {"batch.size": 2048}
END = b"." * 3000


@pytest.fixture(scope="module")
def cleaning_broker(tmp_path_factory: pytest.TempPathFactory):
    broker = BrokerProcess(tmp_path_factory.mktemp("cleaning"), overrides=CLEANER)
    try:
        yield broker.start()
    finally:
        broker.close()


def _updates(rounds: int, prefix: bytes = b"v") -> list[tuple[bytes | None, bytes | None]]:
    return [(b"key-%02d" % k, prefix + b"-%d-%d" % (k, r) + b"." * 60) for r in range(rounds) for k in range(KEYS)]


def _latest(records: list[ReadRecord]) -> dict[bytes | None, bytes | None]:
    return {r.key: r.value for r in records}


def _partition_bytes(broker: BrokerProcess, topic: str) -> int:
    run = subprocess.run([sys.executable, "-m", "minikafka", "log-dirs", "--bootstrap-server", broker.bootstrap,
                          "--describe", "--topic-list", topic], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    return sum(p["size"] for d in json.loads(run.stdout)["brokers"][0]["logDirs"] for p in d["partitions"])


def _cleaned(broker: BrokerProcess, topic: str, times: int = 1) -> bool:
    return broker.stderr_text(200_000).count(f"cleaned {topic}-0 in") >= times


def _clean_until(broker: BrokerProcess, topic: str) -> int:
    """The highest "offsets below N are clean" the broker's cleans of ``topic`` logged (0: none)."""
    return max((int(n) for n in re.findall(rf"cleaned {re.escape(topic)}-0 in .*? offsets below (\d+) are clean",
                                          broker.stderr_text(200_000))), default=0)


def test_many_updates_per_key_compact_to_the_latest_value_of_each(cleaning_broker: BrokerProcess) -> None:
    topic = "latest-values"
    create_topic(cleaning_broker.bootstrap, topic, 1, COMPACTED)
    written = _updates(30)
    confluent_produce(cleaning_broker.bootstrap, topic, written, partition=0, **SMALL_BATCHES)
    confluent_produce(cleaning_broker.bootstrap, topic, [(b"last", END)], partition=0, **SMALL_BATCHES)
    before = len(written) + 1
    # A clean that started during the produce logs its line too, having compacted only what was
    # there then (offsets below 460 of 601, once): wait until the cleans reach the records' end.
    wait_until(lambda: _clean_until(cleaning_broker, topic) >= len(written) - KEYS, 30, interval=0.1,
               what="the cleans reaching the last round of updates")
    read = confluent_consume(cleaning_broker.bootstrap, topic, [0])
    assert _latest(read) == {**_latest_of(written), b"last": read[-1].value}
    assert len(read) < before // 5, f"{len(read)} records left of {before}"
    offsets = [r.offset for r in read]
    assert offsets == sorted(set(offsets)) and offsets[-1] == before - 1, "offsets kept, with gaps"
    assert _partition_bytes(cleaning_broker, topic) < 0.3 * sum(len(k or b"") + len(v or b"") for k, v in written)
    metrics = cleaning_broker.metrics_text()
    assert "kafka_log_LogCleaner_cleaner_recopy_percent" in metrics
    assert "minikafka_log_cleaner_bytes_read_total" in metrics


def _latest_of(records: list[tuple[bytes | None, bytes | None]]) -> dict[bytes | None, bytes | None]:
    return dict(records)


def test_tombstones_go_after_delete_retention(cleaning_broker: BrokerProcess) -> None:
    topic = "with-tombstones"
    create_topic(cleaning_broker.bootstrap, topic, 1, {**COMPACTED, "delete.retention.ms": "1500"})
    confluent_produce(cleaning_broker.bootstrap, topic, _updates(5) + [(b"key-03", None), (b"key-07", None)],
                      partition=0, **SMALL_BATCHES)
    confluent_produce(cleaning_broker.bootstrap, topic, _updates(1, b"w") + [(b"end", END)], partition=0, **SMALL_BATCHES)
    wait_until(lambda: _cleaned(cleaning_broker, topic), 30, interval=0.1, what="a first clean")
    first = _latest(confluent_consume(cleaning_broker.bootstrap, topic, [0]))
    assert first[b"key-03"] == b"w-3-0" + b"." * 60, "a later value stands"
    # The tombstones that stand (nothing after them for their keys) outlive the first clean ...
    confluent_produce(cleaning_broker.bootstrap, topic, [(b"key-11", None), (b"end", END)], partition=0, **SMALL_BATCHES)
    wait_until(lambda: _cleaned(cleaning_broker, topic, 2), 30, interval=0.1, what="a second clean")
    assert (b"key-11", None) in [(r.key, r.value) for r in confluent_consume(cleaning_broker.bootstrap, topic, [0])]
    # ... and go with a clean after delete.retention.ms, with nothing new written.
    wait_until(lambda: b"key-11" not in {r.key for r in confluent_consume(cleaning_broker.bootstrap, topic, [0])},
               30, interval=0.5, what="the tombstone gone")


def test_compact_and_delete_also_deletes_by_retention(cleaning_broker: BrokerProcess) -> None:
    topic = "compact-and-delete"
    create_topic(cleaning_broker.bootstrap, topic, 1, {**COMPACTED, "cleanup.policy": "compact,delete",
                                                       "retention.ms": "3000", "min.cleanable.dirty.ratio": "0.9"})
    old = int(time.time() * 1000) - 60_000
    producer = confluent_kafka.Producer({"bootstrap.servers": cleaning_broker.bootstrap, "linger.ms": 5,
                                         **SMALL_BATCHES})
    for k in range(200):
        producer.produce(topic, key=b"old-%03d" % k, value=b"." * 100, partition=0, timestamp=old)
    producer.produce(topic, key=b"new", value=END, partition=0)
    assert producer.flush(30) == 0

    def start() -> int:
        consumer = confluent_kafka.Consumer({"bootstrap.servers": cleaning_broker.bootstrap, "group.id": "x"})
        try:
            return consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=10)[0]
        finally:
            consumer.close()
    wait_until(lambda: start() > 100, 30, interval=0.2, what="segments older than retention.ms deleted")


def test_a_record_without_a_key_is_refused_with_invalid_record(cleaning_broker: BrokerProcess) -> None:
    topic = "keys-required"
    create_topic(cleaning_broker.bootstrap, topic, 1, COMPACTED)
    builder = MemoryRecordsBuilder(2, 0, 1 << 20)
    builder.append(int(time.time() * 1000), b"k", b"keyed")
    builder.append(int(time.time() * 1000), None, b"keyless")
    builder.close()
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=bytes(builder.buffer()))])])
    with cleaning_broker.wire() as wire:
        response = wire.request(request, 8, ProduceResponse)
    (answer,) = response.responses[0].partition_responses
    assert answer.error_code == 87  # INVALID_RECORD
    assert "without key" in answer.error_message
    assert [(e.batch_index, "without key" in e.batch_index_error_message) for e in answer.record_errors] == [(1, True)]

    errors: list[confluent_kafka.KafkaError] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": cleaning_broker.bootstrap, "retries": 0})
    producer.produce(topic, value=b"keyless", partition=0, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(20)
    assert errors and errors[0].code() == confluent_kafka.KafkaError.INVALID_RECORD
    assert confluent_consume(cleaning_broker.bootstrap, topic, [0]) == [], "nothing of it was appended"


def test_a_consumer_reading_through_a_clean_sees_every_offset_it_should(cleaning_broker: BrokerProcess) -> None:
    topic = "read-while-cleaned"
    create_topic(cleaning_broker.bootstrap, topic, 1, {**COMPACTED, "segment.bytes": "40000"})
    written = _updates(60)
    offsets = confluent_produce(cleaning_broker.bootstrap, topic, written, partition=0, **SMALL_BATCHES)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cleaning_broker.bootstrap, "group.id": "slow",
                                         "enable.auto.commit": False,
                                         "max.partition.fetch.bytes": 2000, "queued.max.messages.kbytes": 2})
    read: list[tuple[int, bytes, bytes]] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        # Half way by offset, not by count: a clean that runs now leaves fewer records to read.
        half_way = offsets[len(written) // 2][1]
        deadline = time.monotonic() + 30
        while (not read or read[-1][0] < half_way) and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                read.append((message.offset(), message.key(), message.value()))
        assert read and read[-1][0] >= half_way, f"read half way ({half_way}) in 30 s: {read[-1:]}"
        confluent_produce(cleaning_broker.bootstrap, topic, [(b"end", b"." * 30000)], partition=0, **SMALL_BATCHES)
        wait_until(lambda: _cleaned(cleaning_broker, topic), 30, interval=0.1, what="a clean while reading")
        end = offsets[-1][1] + 2
        deadline = time.monotonic() + 30
        while (not read or read[-1][0] < end - 1) and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                read.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    seen = [offset for offset, _, _ in read]
    assert seen == sorted(set(seen)), "no offset twice, none out of order"
    latest = {key: offset for offset, (key, _) in enumerate(written)}
    assert set(latest.values()) <= set(seen), "the latest record of every key"
    assert {key: value for _, key, value in read if key in latest} == _latest_of(written)


def test_a_replica_moved_to_another_dir_keeps_its_cleaner_checkpoint(cleaning_broker: BrokerProcess) -> None:
    topic = "moved-after-clean"
    create_topic(cleaning_broker.bootstrap, topic, 1, COMPACTED)
    confluent_produce(cleaning_broker.bootstrap, topic, _updates(20) + [(b"end", END)], partition=0, **SMALL_BATCHES)
    source = cleaning_broker.partition_dirs()[f"{topic}-0"]
    target = next(d for d in cleaning_broker.log_dirs if d != source)
    active_base = int(max((source / f"{topic}-0").glob("*.log")).stem)
    # Cleaned up to the active segment: nothing is left for another clean to do.
    wait_until(lambda: cleaner_checkpoint([source], topic) == active_base, 30, interval=0.1,
               what="the log cleaned up to its active segment")
    # The clean logs its line after it writes the checkpoint: count the cleans once it has.
    wait_until(lambda: any(f"cleaned {topic}-0 in" in line and f"offsets below {active_base} are clean" in line
                           for line in cleaning_broker.stderr_text(1 << 20).splitlines()),
               30, interval=0.1, what="the clean's log line")
    cleans = cleaning_broker.stderr_text(1 << 20).count(f"cleaned {topic}-0 in")
    cleaning_broker.move_replica(topic, 0, target)
    wait_until(lambda: cleaner_checkpoint([target], topic) == active_base, 30, interval=0.2,
               what="the checkpoint in the new dir's cleaner-offset-checkpoint")
    assert cleaning_broker.stderr_text(1 << 20).count(f"cleaned {topic}-0 in") == cleans, "carried, not re-cleaned"


def cleaner_checkpoint(log_dirs: list[Path], topic: str) -> int:
    """Where the dirty part of ``topic``-0 starts, by the cleaner-offset-checkpoint of the given
    log dirs (-1: none lists it)."""
    for log_dir in log_dirs:
        path = log_dir / "cleaner-offset-checkpoint"
        if path.exists():
            for line in path.read_text().splitlines()[2:]:
                name, partition, offset = line.split()
                if (name, partition) == (topic, "0"):
                    return int(offset)
    return -1
