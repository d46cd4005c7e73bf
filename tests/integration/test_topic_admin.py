"""Topics created with configs are described back; bad CreateTopics get Kafka's error codes;
ListOffsets answers earliest, latest and by-timestamp; LogAppendTime topics stamp records."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.record.memory_records import MemoryRecords

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import confluent_consume, create_topic

pytestmark = pytest.mark.integration

UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
INVALID_REQUEST = 42


@pytest.fixture
def admin(module_broker: BrokerProcess):
    client = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap, client_id="tests-admin")
    try:
        yield client
    finally:
        client.close()


def test_topic_configs_are_described_back(module_broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    topic = "configured"
    configs = {"retention.ms": "3600000", "segment.bytes": "1048576", "message.timestamp.type": "LogAppendTime"}
    create_topic(module_broker.bootstrap, topic, 2, configs)

    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
    entries = described["topic"][topic]
    for key, value in configs.items():
        assert key in entries, f"{key} missing from DescribeConfigs; got {sorted(entries)}"
        assert entries[key]["value"] == value, (key, entries[key])
        assert entries[key]["config_source"] == "DYNAMIC_TOPIC_CONFIG", (key, entries[key])
    modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
    assert set(configs) <= set(modified)

    only = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic, ["retention.ms"])],
                                  config_filter="all")["topic"][topic]
    assert set(only) == {"retention.ms"}


def test_log_append_time_topic_stamps_records(module_broker: BrokerProcess) -> None:
    topic = "append-time"
    create_topic(module_broker.bootstrap, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    producer = KafkaProducer(bootstrap_servers=module_broker.bootstrap)
    try:
        for i in range(5):
            producer.send(topic, key=b"k%d" % i, value=b"v", timestamp_ms=1_000 + i)
        producer.flush(30)
    finally:
        producer.close()
    now_ms = int(time.time() * 1000)
    read = confluent_consume(module_broker.bootstrap, topic, [0])
    assert len(read) == 5
    for record in read:
        assert now_ms - 120_000 < record.timestamp <= now_ms + 5_000, (
            f"record kept its CreateTime {record.timestamp} on a LogAppendTime topic")


def _create_errors(admin: KafkaAdminClient, topics: dict[str, dict]) -> dict[str, int]:
    result = admin.create_topics(topics, raise_errors=False)
    return {t["name"]: t["error_code"] for t in result["topics"]}


@pytest.mark.parametrize("name", ["bad/name", "has space", "a" * 250, ".", "..", "tab\tname", "ümlaut"])
def test_invalid_topic_names_are_refused(admin: KafkaAdminClient, name: str) -> None:
    errors = _create_errors(admin, {name: {"num_partitions": 1, "replication_factor": 1}})
    assert errors == {name: INVALID_TOPIC_EXCEPTION}


def test_bad_create_topics_get_kafka_errors(module_broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    create_topic(module_broker.bootstrap, "exists-already", 1)
    errors = _create_errors(admin, {
        "needs-two-replicas": {"num_partitions": 1, "replication_factor": 2},
        "unknown-config": {"num_partitions": 1, "replication_factor": 1, "configs": {"no.such.config": "1"}},
        "bad-config-value": {"num_partitions": 1, "replication_factor": 1, "configs": {"retention.ms": "soon"}},
        "zero-partitions": {"num_partitions": 0, "replication_factor": 1},
        "exists-already": {"num_partitions": 1, "replication_factor": 1},
        "fine-in-the-same-request": {"num_partitions": 2, "replication_factor": 1},
    })
    assert errors == {
        "needs-two-replicas": INVALID_REPLICATION_FACTOR,
        "unknown-config": INVALID_CONFIG,
        "bad-config-value": INVALID_CONFIG,
        "zero-partitions": INVALID_PARTITIONS,
        "exists-already": TOPIC_ALREADY_EXISTS,
        "fine-in-the-same-request": 0,
    }
    listed = set(admin.list_topics())
    assert "fine-in-the-same-request" in listed
    assert not listed & {"needs-two-replicas", "unknown-config", "bad-config-value", "zero-partitions"}


def test_list_offsets_earliest_latest_and_by_timestamp(module_broker: BrokerProcess) -> None:
    topic = "offsets-by-time"
    create_topic(module_broker.bootstrap, topic, 1)
    base = int(time.time() * 1000) - 600_000
    producer = KafkaProducer(bootstrap_servers=module_broker.bootstrap)
    try:
        for i in range(10):
            producer.send(topic, key=b"k%d" % i, value=b"v", partition=0, timestamp_ms=base + i * 1000)
            producer.flush(30)  # one batch per record, so lookups must search inside the log
    finally:
        producer.close()

    consumer = KafkaConsumer(bootstrap_servers=module_broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 10}
        found = consumer.offsets_for_times({tp: base + 2500})[tp]
        assert (found.offset, found.timestamp) == (3, base + 3000)
        exact = consumer.offsets_for_times({tp: base})[tp]
        assert (exact.offset, exact.timestamp) == (0, base)
        assert consumer.offsets_for_times({tp: base + 60_000})[tp] is None
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_list_offsets_answers_the_record_inside_a_compressed_batch(module_broker: BrokerProcess, codec: str) -> None:
    """confluent-kafka (librdkafka) batches and compresses; ListOffsets by timestamp and
    MAX_TIMESTAMP (KIP-734) must still name the record, not its batch."""
    topic = f"offsets-in-{codec}-batches"
    create_topic(module_broker.bootstrap, topic, 1)
    base = int(time.time() * 1000) - 600_000
    stamps = [base + d for d in (0, 5000, 1000, 9000, 2000, 9000, 3000)]  # the largest first at offset 3
    producer = confluent_kafka.Producer({"bootstrap.servers": module_broker.bootstrap, "compression.type": codec,
                                         "linger.ms": 1000, "batch.num.messages": len(stamps)})
    for i, stamp in enumerate(stamps):
        producer.produce(topic, key=b"k%d" % i, value=b"value %d " % i * 20, partition=0, timestamp=stamp)
    assert producer.flush(30) == 0
    tp = confluent_kafka.TopicPartition(topic, 0)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": "lookups"})
    try:
        assert consumer.get_watermark_offsets(tp, timeout=20) == (0, len(stamps))
        (found,) = consumer.offsets_for_times([confluent_kafka.TopicPartition(topic, 0, base + 4000)], timeout=20)
        assert found.offset == 1, "the first record at or after the time, inside the one batch"
    finally:
        consumer.close()
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": module_broker.bootstrap})
    futures = admin.list_offsets({tp: confluent_kafka.admin.OffsetSpec.max_timestamp()})
    result = futures[tp].result(20)
    assert (result.offset, result.timestamp) == (3, base + 9000)


# A valid value for every topic config Apache Kafka defines (librdkafka's admin tests set such).
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy": "delete", "compression.type": "zstd", "compression.gzip.level": "5",
    "compression.lz4.level": "9", "compression.zstd.level": "3", "delete.retention.ms": "1000",
    "file.delete.delay.ms": "1000", "flush.messages": "1000", "flush.ms": "1000",
    "follower.replication.throttled.replicas": "0:1", "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "*", "local.retention.bytes": "-2", "local.retention.ms": "-2",
    "max.compaction.lag.ms": "100000", "max.message.bytes": "2000000", "message.downconversion.enable": "true",
    "message.format.version": "3.0-IV1", "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": "86400000", "message.timestamp.difference.max.ms": "86400000",
    "message.timestamp.type": "CreateTime", "min.cleanable.dirty.ratio": "0.3", "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1", "preallocate": "false", "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false", "remote.storage.enable": "false", "retention.bytes": "-1",
    "retention.ms": "604800000", "segment.bytes": "1048576", "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0", "segment.ms": "604800000", "unclean.leader.election.enable": "false",
}


def test_every_kafka_topic_config_is_accepted_described_and_honoured(module_broker: BrokerProcess) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": module_broker.bootstrap})
    topic = "every-config"
    futures = admin.create_topics([confluent_kafka.admin.NewTopic(topic, 1, 1, config=KAFKA_TOPIC_CONFIGS)])
    futures[topic].result(20)
    (described,) = admin.describe_configs([confluent_kafka.admin.ConfigResource("topic", topic)]).values()
    entries = described.result(20)
    for key, value in KAFKA_TOPIC_CONFIGS.items():
        assert entries[key].value == value, key
        assert entries[key].source == confluent_kafka.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value, key
    bad = {"compression.type": "brotli", "min.cleanable.dirty.ratio": "1.5", "preallocate": "maybe",
           "remote.storage.enable": "true", "cleanup.policy": "shred", "segment.index.bytes": "2"}
    for key, value in bad.items():
        name = f"bad-{key.replace('.', '-')}"
        future = admin.create_topics([confluent_kafka.admin.NewTopic(name, 1, 1, config={key: value})])[name]
        with pytest.raises(confluent_kafka.KafkaException) as refused:
            future.result(20)
        assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG, key
        assert key in refused.value.args[0].str(), key

    # compression.type=zstd: uncompressed batches are stored as zstd; consumers read them as sent.
    producer = confluent_kafka.Producer({"bootstrap.servers": module_broker.bootstrap, "compression.type": "none",
                                         "linger.ms": 100})
    now = int(time.time() * 1000)
    for i in range(20):
        producer.produce(topic, key=b"k%d" % i, value=b"payload %d " % i * 30, partition=0, timestamp=now)
    assert producer.flush(20) == 0
    read = confluent_consume(module_broker.bootstrap, topic, [0], timeout=30)
    assert [r.key for r in read] == [b"k%d" % i for i in range(20)]
    segment = next((module_broker.partition_dirs()[f"{topic}-0"] / f"{topic}-0").glob("*.log"))
    records = MemoryRecords(segment.read_bytes())
    codecs = set()
    while records.has_next():
        codecs.add(records.next_batch().compression_type)
    assert codecs == {4}, "stored with the topic's compression.type (zstd)"

    # message.timestamp.before.max.ms: a record a week old is refused.
    late = confluent_kafka.Producer({"bootstrap.servers": module_broker.bootstrap, "retries": 0})
    errors: list[Any] = []
    late.produce(topic, value=b"old", partition=0, timestamp=now - 7 * 86_400_000,
                 on_delivery=lambda err, msg: errors.append(err))
    late.flush(20)
    assert errors and errors[0].code() == confluent_kafka.KafkaError.INVALID_TIMESTAMP


def test_describe_topic_partitions_pages_by_cursor(module_broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    """DescribeTopicPartitions (KIP-966) through kafka-python: topics in name order, at most
    `response_partition_limit` partitions a page, and the cursor of the next page."""
    create_topic(module_broker.bootstrap, "dtp-a", 3)
    create_topic(module_broker.bootstrap, "dtp-b", 2)

    def page(topics: list[str], limit: int, cursor: dict[str, Any] | None = None) -> tuple[list[Any], Any]:
        answer = admin.describe_topic_partitions(topics, response_partition_limit=limit, cursor=cursor)
        shown = [(t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]]) for t in answer["topics"]]
        return shown, answer["next_cursor"]

    asked = ["dtp-missing", "dtp-b", "dtp-a"]
    assert page(asked, 2) == ([("dtp-a", 0, [0, 1])], {"topic_name": "dtp-a", "partition_index": 2})
    assert page(asked, 2, {"topic_name": "dtp-a", "partition_index": 2}) == (
        [("dtp-a", 0, [2]), ("dtp-b", 0, [0])], {"topic_name": "dtp-b", "partition_index": 1})
    assert page(asked, 2, {"topic_name": "dtp-b", "partition_index": 1}) == (
        [("dtp-b", 0, [1]), ("dtp-missing", UNKNOWN_TOPIC_OR_PARTITION, [])], None)
    # A page filled exactly by one topic points the next at the start of the following one.
    assert page(["dtp-a", "dtp-b"], 3) == ([("dtp-a", 0, [0, 1, 2])], {"topic_name": "dtp-b", "partition_index": 0})
    # A cursor on a topic not asked for is refused on every topic asked.
    assert page(["dtp-a"], 3, {"topic_name": "dtp-b", "partition_index": 0}) == (
        [("dtp-a", INVALID_REQUEST, [])], None)
    every, _ = page([], 2000)
    assert ("dtp-a", 0, [0, 1, 2]) in every and ("dtp-b", 0, [0, 1]) in every
    assert [name for name, _, _ in every] == sorted(name for name, _, _ in every)
    described = admin.describe_topic_partitions(["dtp-a"])["topics"][0]
    partition = described["partitions"][0]
    assert partition["leader_id"] == module_broker.broker_id and partition["isr_nodes"] == [module_broker.broker_id]
    assert described["topic_authorized_operations"] > 0 and not described["is_internal"]
