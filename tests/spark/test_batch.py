"""Batch reads and writes of the "minikafka" data source against a real broker."""

from __future__ import annotations

import json

import confluent_kafka
import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import (
    confluent_consume,
    confluent_produce,
    confluent_transactions,
    create_topic,
)

pytestmark = pytest.mark.integration

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def test_batch_read_of_8_partitions_equals_what_was_produced(read_kafka, kafka: BrokerProcess, topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 8)
    records = [(b"key-%06d" % i, b"value-%06d-" % i + bytes(i % 50)) for i in range(100_000)]
    placed = confluent_produce(kafka.bootstrap, topic, records, linger_ms=20)
    expected = {(p, o, k, v) for (p, o), (k, v) in zip(placed, records, strict=True)}
    assert len({p for p, _ in placed}) == 8

    df = read_kafka(subscribe=topic).load()
    assert df.rdd.getNumPartitions() == 8  # one Spark input partition per Kafka partition
    table: pa.Table = df.select("partition", "offset", "key", "value", "topic", "timestampType").toArrow()
    got = set(zip(*(table.column(c).to_pylist() for c in ("partition", "offset", "key", "value")), strict=True))

    assert table.num_rows == len(records)
    assert got == expected
    assert set(table.column("topic").to_pylist()) == {topic}
    assert set(table.column("timestampType").to_pylist()) == {0}  # CreateTime


def test_offset_bounds_as_json_and_min_partitions(read_kafka, kafka: BrokerProcess, topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 2)
    for partition in (0, 1):
        confluent_produce(kafka.bootstrap, topic, [(None, b"%d-%d" % (partition, i)) for i in range(50)],
                          partition=partition)

    starting = json.dumps({topic: {"0": 10, "1": -2}})
    ending = json.dumps({topic: {"0": 20, "1": -1}})
    df = read_kafka(subscribe=topic, startingOffsets=starting, endingOffsets=ending).load()
    rows = df.select("partition", "offset", "value").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(50)]
    assert all(r.value == b"%d-%d" % (r.partition, r.offset) for r in rows)

    assign = json.dumps({topic: [1]})
    split = read_kafka(assign=assign, minPartitions="5").load()
    assert split.rdd.getNumPartitions() == 5
    assert sorted(r.offset for r in split.select("offset").collect()) == list(range(50))


def test_offsets_by_timestamp(read_kafka, kafka: BrokerProcess, topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 1)
    base = 1_700_000_000_000
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 100})
    for i in range(30):  # one batch: the broker answers the first record at or after a timestamp
        producer.produce(topic, value=b"%d" % i, timestamp=base + 1000 * i)
    assert producer.flush(30) == 0

    rows = read_kafka(subscribe=topic, startingTimestamp=str(base + 9_500),
                      endingOffsetsByTimestamp=json.dumps({topic: {"0": base + 20_000}})).load().collect()
    assert sorted(r.offset for r in rows) == list(range(10, 20))
    assert all(r.timestamp.timestamp() * 1000 == base + 1000 * r.offset for r in rows)
    assert read_kafka(subscribe=topic, startingTimestamp=str(base + 25_000),
                      endingTimestamp=str(base + 99_000)).load().count() == 5  # no match at the end: latest

    too_late = read_kafka(subscribe=topic, startingTimestamp=str(base + 99_000))
    with pytest.raises(PySparkException, match=f"option startingTimestamp: no record at or after the timestamp in "
                                               f"{topic}-0"):
        too_late.load().collect()
    assert too_late.option("startingOffsetsByTimestampStrategy", "latest").load().count() == 0


def test_headers_only_with_include_headers(read_kafka, kafka: BrokerProcess, topic_name):
    topic = topic_name()
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap})
    producer.produce(topic, key=b"k", value=b"v", headers=[("h1", b"one"), ("h2", None), ("h1", b"again")])
    producer.produce(topic, key=b"k2", value=b"v2")
    assert producer.flush(30) == 0

    plain = read_kafka(subscribe=topic).load()
    assert "headers" not in plain.columns
    with_headers = read_kafka(subscribe=topic, includeHeaders="true").load()
    assert with_headers.schema["headers"].dataType == HEADERS
    rows = with_headers.orderBy("offset").collect()
    assert [r.headers and [(h.key, h.value) for h in r.headers] for r in rows] == [
        [("h1", b"one"), ("h2", None), ("h1", b"again")], None]  # null, as Spark's connector gives


def test_batch_write_then_read_round_trips_keys_values_and_headers(spark: SparkSession, read_kafka,
                                                                  kafka: BrokerProcess, topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 3)
    schema = StructType([
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("partition", IntegerType()), StructField("headers", HEADERS),
    ])
    data = [
        (b"k%d" % i, b"v%d" % i if i % 7 else None, i % 3,
         [("trace", b"%d" % i), ("empty", b"")] if i % 2 else [])
        for i in range(300)
    ]
    (spark.createDataFrame(data, schema).repartition(4)
     .write.format("minikafka").option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", topic)
     .mode("append").save())

    back = read_kafka(subscribe=topic, includeHeaders="true").load().collect()
    got = sorted((r.key, r.value, r.partition, [(h.key, h.value) for h in r.headers or []]) for r in back)
    assert got == sorted((k, v, p, h) for k, v, p, h in data)
    # The broker's copy, seen by another client, agrees.
    assert len(confluent_consume(kafka.bootstrap, topic, range(3))) == len(data)


def test_write_takes_topic_from_a_column_and_strings_as_utf8(spark: SparkSession, read_kafka,
                                                             kafka: BrokerProcess, topic_name):
    first, second = topic_name("a"), topic_name("b")
    df = spark.createDataFrame([(first, "ключ", "значение"), (second, "k", "v"), (first, None, "no key")],
                               "topic string, key string, value string")
    df.write.format("minikafka").option("kafka.bootstrap.servers", kafka.bootstrap).mode("append").save()

    rows = read_kafka(subscribe=f"{first},{second}").load().select(
        "topic", F.col("key").cast("string").alias("key"), F.col("value").cast("string").alias("value")).collect()
    assert sorted((r.topic, r.key or "", r.value) for r in rows) == sorted(
        [(first, "ключ", "значение"), (second, "k", "v"), (first, "", "no key")])


def test_a_refused_write_fails_the_job_with_the_brokers_error(spark: SparkSession, read_kafka,
                                                              kafka: BrokerProcess, topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 1, configs={"max.message.bytes": "2000"})
    df = spark.createDataFrame([(b"x" * 10, ), (b"y" * 20_000, ), (b"z" * 10, )], "value binary").coalesce(1)

    with pytest.raises(PySparkException) as failure:
        df.write.format("minikafka").option("kafka.bootstrap.servers", kafka.bootstrap).option(
            "topic", topic).option("kafka.linger.ms", "0").mode("append").save()
    assert "MSG_SIZE_TOO_LARGE" in str(failure.value)
    assert "KafkaWriteError" in str(failure.value)


def test_overwrite_is_refused(spark: SparkSession, kafka: BrokerProcess, topic_name):
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(PySparkException, match="overwrite is not allowed"):
        df.write.format("minikafka").option("kafka.bootstrap.servers", kafka.bootstrap).option(
            "topic", topic_name()).mode("overwrite").save()


def test_write_needs_a_value_column_and_a_topic(spark: SparkSession, kafka: BrokerProcess, topic_name):
    writer = spark.createDataFrame([("k",)], "key string").write.format("minikafka").option(
        "kafka.bootstrap.servers", kafka.bootstrap).option("topic", topic_name()).mode("append")
    with pytest.raises(PySparkException, match="needs a value column"):
        writer.save()
    no_topic = spark.createDataFrame([("v",)], "value string").write.format("minikafka").option(
        "kafka.bootstrap.servers", kafka.bootstrap).mode("append")
    with pytest.raises(PySparkException, match="needs the option topic or a topic column"):
        no_topic.save()
    wrong_type = spark.createDataFrame([(1,)], "value int").write.format("minikafka").option(
        "kafka.bootstrap.servers", kafka.bootstrap).option("topic", topic_name()).mode("append")
    with pytest.raises(PySparkException, match="column value must be string or binary"):
        wrong_type.save()


def test_read_committed_reads_committed_transactions_up_to_the_last_stable_offset(read_kafka, kafka: BrokerProcess,
                                                                                  topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 2)
    producer = confluent_transactions(kafka.bootstrap, topic, ((b"committed", True), (b"aborted", False),
                                                                (b"open", None)), 20)
    try:
        committed = read_kafka(subscribe=topic, **{"kafka.isolation.level": "read_committed"}).load()
        values = sorted(r.value for r in committed.select("value").collect())
        assert values == sorted(b"committed-%d" % i for i in range(20)), "no aborted record, nothing still open"
        everything = read_kafka(subscribe=topic).load()  # read_uncommitted, as Spark's default
        assert everything.count() == 60
    finally:
        producer.abort_transaction(30)
