"""Spark's own Kafka connector (spark-sql-kafka-0-10, format "kafka") against minikafka, beside
minikafka's own data source (format "minikafka") on the same data: both give the same rows.

The connector's jars are on the shared session (conftest.py); it talks to the broker with the
Java kafka-clients: an idempotent producer, an AdminClient for offsets, assigned consumers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import confluent_produce, confluent_transactions, create_topic
from tests.spark.queries import QUERY_TIMEOUT_S, data_batches, finish

pytestmark = pytest.mark.integration

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
WRITTEN = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()),
    StructField("partition", IntegerType()), StructField("headers", HEADERS),
])
# Every column both sources give; timestamp is the producer's CreateTime, the same for both.
COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "timestampType", "headers")


@pytest.fixture
def read_connector(spark: SparkSession, kafka: BrokerProcess) -> Callable[..., DataFrameReader]:
    """read_connector(**options) -> spark.read.format("kafka") with the broker and the options set."""

    def make(**options: str) -> DataFrameReader:
        reader = spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader

    return make


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    """The rows as sorted plain tuples (headers as (key, value) tuples), comparable across sources."""
    return sorted(
        tuple(_headers(row.headers) if name == "headers" else row[name] for name in COLUMNS)
        for row in df.select(*COLUMNS).collect()
    )


def _headers(headers: list[Any] | None) -> list[tuple[str, bytes | None]] | None:
    # Spark's connector gives null, not an empty array, for a record without headers.
    return None if headers is None else [(h.key, h.value) for h in headers]


def _written(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """(key, value, partition, headers) of rows as `_rows` gives them, to hold against what was written."""
    return sorted((key, value, partition, headers) for _, partition, _, key, value, _, _, headers in rows)


def _dataset(count: int, partitions: int) -> list[tuple[Any, ...]]:
    return [(b"k%04d" % i, b"v%04d" % i, i % partitions, [("n", b"%d" % i), ("empty", None)])
            for i in range(count)]


def test_a_batch_written_by_sparks_connector_reads_the_same_through_both(
        spark: SparkSession, kafka: BrokerProcess, read_connector, read_kafka, topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 3)
    data = _dataset(300, 3)

    # Spark's Kafka sink takes the default save mode (minikafka's needs "append").
    spark.createDataFrame(data, WRITTEN).write.format("kafka").option(
        "kafka.bootstrap.servers", kafka.bootstrap).option("topic", topic).save()

    via_connector = _rows(read_connector(subscribe=topic, includeHeaders="true").load())
    via_minikafka = _rows(read_kafka(subscribe=topic, includeHeaders="true").load())
    assert via_connector == via_minikafka
    assert _written(via_connector) == sorted(data)
    assert sorted((r[1], r[2]) for r in via_connector) == [(p, o) for p in range(3) for o in range(100)]
    assert {(r[0], r[6]) for r in via_connector} == {(topic, 0)}  # CreateTime


def test_a_batch_written_by_minikafkas_sink_reads_the_same_through_both(
        spark: SparkSession, kafka: BrokerProcess, read_connector, read_kafka, topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 3)
    data = _dataset(300, 3)
    spark.createDataFrame(data, WRITTEN).write.format("minikafka").mode("append").option(
        "kafka.bootstrap.servers", kafka.bootstrap).option("topic", topic).save()

    ranges: list[dict[str, str]] = [
        {"subscribe": topic},
        {"subscribePattern": topic.replace(".", r"\.")},
        {"assign": json.dumps({topic: [1]})},
        {"subscribe": topic, "startingOffsets": json.dumps({topic: {"0": 5, "1": -2, "2": 90}}),
         "endingOffsets": json.dumps({topic: {"0": 50, "1": -1, "2": 100}})},
    ]
    for options in ranges:
        via_connector = _rows(read_connector(includeHeaders="true", **options).load())
        via_minikafka = _rows(read_kafka(includeHeaders="true", **options).load())
        assert via_connector == via_minikafka, options
        if options == ranges[0]:
            assert _written(via_connector) == sorted(data)


def test_offsets_by_timestamp_resolve_the_same_through_both(kafka: BrokerProcess, read_connector, read_kafka,
                                                           topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 2)
    base = 1_700_000_000_000
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "enable.idempotence": True})
    for i in range(40):  # partition p, offset o: CreateTime base + 1000 * o (o = i // 2)
        producer.produce(topic, value=b"%d" % i, partition=i % 2, timestamp=base + 1000 * (i // 2))
    unsent = producer.flush(30)
    del producer  # librdkafka's threads end with it, before the broker does
    assert unsent == 0

    by_timestamp: list[dict[str, str]] = [
        {"startingTimestamp": str(base + 4500), "endingTimestamp": str(base + 12_000)},
        {"startingOffsetsByTimestamp": json.dumps({topic: {"0": base + 3000, "1": base}}),
         "endingOffsetsByTimestamp": json.dumps({topic: {"0": base + 7000, "1": base + 2500}})},
    ]
    expected = [
        {(p, o) for p in range(2) for o in range(5, 12)},
        {(0, o) for o in range(3, 7)} | {(1, o) for o in range(0, 3)},
    ]
    for options, offsets in zip(by_timestamp, expected, strict=True):
        via_connector = _rows(read_connector(subscribe=topic, includeHeaders="true", **options).load())
        via_minikafka = _rows(read_kafka(subscribe=topic, includeHeaders="true", **options).load())
        assert via_connector == via_minikafka, options
        assert {(r[1], r[2]) for r in via_connector} == offsets, options


def _last_offsets(checkpoint: Path) -> dict[str, dict[str, int]]:
    """The end offsets of the checkpoint's last batch: {topic: {partition: next offset}}."""
    last_batch = max((checkpoint / "offsets").glob("[0-9]*"), key=lambda f: int(f.name))
    ends: dict[str, dict[str, int]] = json.loads(last_batch.read_text().splitlines()[-1])
    return ends


def test_a_checkpointed_query_stopped_and_restarted_reads_the_same_through_both(
        spark: SparkSession, kafka: BrokerProcess, topic_name, tmp_path: Path):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 3)
    records = [(b"k%d" % i, b"record-%05d" % i) for i in range(700)]
    placed = confluent_produce(kafka.bootstrap, topic, records[:600])

    def start(source: str, available_now: bool) -> StreamingQuery:
        writer = (spark.readStream.format(source).option("kafka.bootstrap.servers", kafka.bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", "100").option("includeHeaders", "true").load()
                  .select(*COLUMNS)
                  .writeStream.format("parquet").option("path", str(tmp_path / source / "out"))
                  .option("checkpointLocation", str(tmp_path / source / "checkpoint")))
        return (writer.trigger(availableNow=True) if available_now
                else writer.trigger(processingTime="200 milliseconds")).start()

    sources = ("kafka", "minikafka")
    read_before_stop = {}
    for source in sources:
        first = start(source, available_now=False)
        try:
            wait_until(lambda: len(data_batches(first)) >= 2, timeout=QUERY_TIMEOUT_S,  # noqa: B023
                       what=f"two micro-batches of {source}")
        finally:
            first.stop()
        assert first.exception() is None, source
        read_before_stop[source] = spark.read.parquet(str(tmp_path / source / "out")).count()
        assert 0 < read_before_stop[source] < 600, f"the first {source} run was to stop mid-stream"

    placed += confluent_produce(kafka.bootstrap, topic, records[600:])
    expected = sorted((p, o, k, v) for (p, o), (k, v) in zip(placed, records, strict=True))
    output = {}
    for source in sources:
        second = start(source, available_now=True)
        finish(second)
        assert sum(data_batches(second)) == len(records) - read_before_stop[source], source
        output[source] = _rows(spark.read.parquet(str(tmp_path / source / "out")))
        got = [(r[1], r[2], r[3], r[4]) for r in output[source]]
        assert len(got) == len(set(got)), f"{source}: records read twice"
        assert got == expected, source

    assert output["kafka"] == output["minikafka"]
    ends = {topic: {str(p): sum(1 for q, _ in placed if q == p) for p in range(3)}}
    assert _last_offsets(tmp_path / "kafka" / "checkpoint") == _last_offsets(tmp_path / "minikafka" / "checkpoint") \
        == ends


def test_transactions_read_the_same_through_both_committed_and_uncommitted(
        kafka: BrokerProcess, read_connector, read_kafka, topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 2)
    # The open transaction outlives four Spark reads: a timeout of its own, not librdkafka's 60 s.
    producer = confluent_transactions(
        kafka.bootstrap, topic, ((b"committed", True), (b"aborted", False), (b"later", True), (b"open", None)), 10,
        **{"transaction.timeout.ms": 600_000})
    try:
        for isolation, expected in (("read_committed", 20), ("read_uncommitted", 40)):
            options = {"subscribe": topic, "includeHeaders": "true", "kafka.isolation.level": isolation}
            via_connector = _rows(read_connector(**options).load())
            via_minikafka = _rows(read_kafka(**options).load())
            assert via_connector == via_minikafka, isolation
            assert len(via_connector) == expected, isolation
    finally:
        producer.abort_transaction(30)
        del producer  # librdkafka's threads end with it, before the broker does
