"""Structured Streaming reads and writes of the "minikafka" data source against a real broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import confluent_produce, create_topic
from tests.spark.queries import QUERY_TIMEOUT_S, data_batches, finish

pytestmark = pytest.mark.integration


def _stream(spark: SparkSession, kafka: BrokerProcess, **options: str):
    reader = spark.readStream.format("minikafka").option("kafka.bootstrap.servers", kafka.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _produce_numbered(kafka: BrokerProcess, topic: str, first: int, count: int) -> dict[tuple[int, int], bytes]:
    values = [b"record-%06d" % i for i in range(first, first + count)]
    placed = confluent_produce(kafka.bootstrap, topic, [(b"k%d" % i, v) for i, v in enumerate(values)])
    return dict(zip(placed, values, strict=True))


def test_max_offsets_per_trigger_caps_every_batch(spark: SparkSession, kafka: BrokerProcess, topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 3)
    produced = _produce_numbered(kafka, topic, 0, 3000)

    query = (_stream(spark, kafka, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="700")
             .writeStream.format("memory").queryName("capped").trigger(availableNow=True).start())
    finish(query)

    batches = data_batches(query)
    assert all(rows <= 700 for rows in batches) and len(batches) >= 5, batches
    rows = spark.table("capped").select("partition", "offset", "value").collect()
    assert {(r.partition, r.offset): r.value for r in rows} == produced
    assert len(rows) == len(produced)


def test_latest_is_the_default_start_and_json_offsets_pick_the_start(spark: SparkSession, kafka: BrokerProcess,
                                                                   topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 2)
    _produce_numbered(kafka, topic, 0, 100)

    from_latest = (_stream(spark, kafka, subscribe=topic).writeStream.format("memory").queryName("from_latest")
                   .trigger(availableNow=True).start())
    finish(from_latest)
    assert spark.table("from_latest").count() == 0

    starting = json.dumps({topic: {"0": -2, "1": -1}})
    from_json = (_stream(spark, kafka, subscribe=topic, startingOffsets=starting).writeStream.format("memory")
                 .queryName("from_json").trigger(availableNow=True).start())
    finish(from_json)
    partitions = {r.partition for r in spark.table("from_json").select("partition").collect()}
    assert partitions == {0}
    assert spark.table("from_json").count() == _count_partition(spark, kafka, topic, 0) > 0


def _count_partition(spark: SparkSession, kafka: BrokerProcess, topic: str, partition: int) -> int:
    return (spark.read.format("minikafka").option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("assign", json.dumps({topic: [partition]})).load().count())


def test_stopped_mid_stream_and_restarted_from_checkpoint_loses_and_repeats_nothing(
        spark: SparkSession, kafka: BrokerProcess, topic_name, tmp_path: Path):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 4)
    # Eight batches' worth: the first run, stopped once it has done two, cannot have read them all.
    produced = _produce_numbered(kafka, topic, 0, 3200)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start(available_now: bool) -> StreamingQuery:
        writer = (_stream(spark, kafka, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="400")
                  .select("partition", "offset", "value")
                  .writeStream.format("parquet").option("path", str(output))
                  .option("checkpointLocation", str(checkpoint)))
        return (writer.trigger(availableNow=True) if available_now
                else writer.trigger(processingTime="200 milliseconds")).start()

    first = start(available_now=False)
    try:
        wait_until(lambda: len(data_batches(first)) >= 2, timeout=QUERY_TIMEOUT_S, what="two micro-batches")
    finally:
        first.stop()
    assert first.exception() is None
    done_before = spark.read.parquet(str(output)).count()
    assert 0 < done_before < len(produced), "the first run was to stop mid-stream"

    produced.update(_produce_numbered(kafka, topic, 3200, 400))
    second = start(available_now=True)
    finish(second)

    # The offsets in the checkpoint are Spark's Kafka source JSON: {topic: {partition: next offset}}.
    last_batch = max((checkpoint / "offsets").glob("[0-9]*"), key=lambda f: int(f.name))
    ends = json.loads(last_batch.read_text().splitlines()[-1])
    assert ends == {topic: {str(p): sum(1 for q, _ in produced if q == p) for p in range(4)}}

    rows = spark.read.parquet(str(output)).collect()
    seen = [(r.partition, r.offset) for r in rows]
    assert len(seen) == len(set(seen)), "records read twice"
    assert {(r.partition, r.offset): r.value for r in rows} == produced
    assert sum(data_batches(second)) == len(produced) - done_before


def test_new_topics_of_a_pattern_are_picked_up(spark: SparkSession, kafka: BrokerProcess, topic_name):
    first, second = topic_name("a"), topic_name("b")
    create_topic(kafka.bootstrap, first, 1)
    produced_first = _produce_numbered(kafka, first, 0, 50)
    pattern = topic_name().replace(".", r"\.") + "-.*"

    query = (_stream(spark, kafka, subscribePattern=pattern, startingOffsets="earliest")
             .writeStream.format("memory").queryName("pattern").trigger(processingTime="200 milliseconds").start())
    try:
        wait_until(lambda: spark.table("pattern").count() == 50, timeout=QUERY_TIMEOUT_S, what="first topic read")
        create_topic(kafka.bootstrap, second, 3)
        produced_second = _produce_numbered(kafka, second, 50, 90)
        wait_until(lambda: spark.table("pattern").count() == 140, timeout=QUERY_TIMEOUT_S,
                   what="new topic's records read")
    finally:
        query.stop()
    assert query.exception() is None
    rows = spark.table("pattern").select("topic", "partition", "offset", "value").collect()
    assert {(r.partition, r.offset): r.value for r in rows if r.topic == first} == produced_first
    assert {(r.partition, r.offset): r.value for r in rows if r.topic == second} == produced_second


def test_new_partitions_of_a_subscribed_topic_are_picked_up(spark: SparkSession, kafka: BrokerProcess, topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 1)
    produced = _produce_numbered(kafka, topic, 0, 40)

    query = (_stream(spark, kafka, subscribe=topic, startingOffsets="earliest")
             .writeStream.format("memory").queryName("grown").trigger(processingTime="200 milliseconds").start())
    try:
        wait_until(lambda: spark.table("grown").count() == 40, timeout=QUERY_TIMEOUT_S, what="first partition read")
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        for future in admin.create_partitions([NewPartitions(topic, 3)], request_timeout=20).values():
            future.result()
        for partition in (1, 2):
            placed = confluent_produce(kafka.bootstrap, topic, [(None, b"p%d-%d" % (partition, i)) for i in range(25)],
                                       partition=partition)
            produced.update({pos: b"p%d-%d" % (partition, i) for i, pos in enumerate(placed)})
        wait_until(lambda: spark.table("grown").count() == 90, timeout=QUERY_TIMEOUT_S,
                   what="the new partitions' records read")
    finally:
        query.stop()
    assert query.exception() is None
    rows = spark.table("grown").select("partition", "offset", "value").collect()
    assert {(r.partition, r.offset): r.value for r in rows} == produced and len(rows) == len(produced)


def test_streaming_write_copies_a_topic(spark: SparkSession, kafka: BrokerProcess, topic_name, tmp_path: Path):
    source, target = topic_name("in"), topic_name("out")
    create_topic(kafka.bootstrap, source, 2)
    create_topic(kafka.bootstrap, target, 2)
    produced = _produce_numbered(kafka, source, 0, 500)

    query = (_stream(spark, kafka, subscribe=source, startingOffsets="earliest", includeHeaders="true")
             .selectExpr("key", "value", "headers", "partition")
             .writeStream.format("minikafka").option("kafka.bootstrap.servers", kafka.bootstrap)
             .option("topic", target).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    finish(query)

    copied = (spark.read.format("minikafka").option("kafka.bootstrap.servers", kafka.bootstrap)
              .option("subscribe", target).load().collect())
    assert sorted((r.partition, r.value) for r in copied) == sorted((p, v) for (p, _), v in produced.items())
    assert all(r.key == b"k%d" % int(r.value[7:]) for r in copied)
