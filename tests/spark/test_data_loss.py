"""failOnDataLoss: records a query was to read that retention deleted meanwhile.

A broker of its own that runs retention every 200 ms deletes the old segments of a topic with
tiny segments, so the partition's log start offset moves past offset 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from kafka.admin import ConfigResource, ConfigResourceType
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql import SparkSession

from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import create_topic
from tests.system.observe import alter_configs

pytestmark = pytest.mark.integration

TOPIC = "retained"


@pytest.fixture(scope="module")
def trimmed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int, int]]:
    """(broker, log start offset, log end offset) of TOPIC-0 after retention removed its head."""
    broker = BrokerProcess(tmp_path_factory.mktemp("retention-broker"),
                           overrides={"log.retention.check.interval.ms": "200"})
    broker.start()
    try:
        create_topic(broker.bootstrap, TOPIC, 1, configs={"segment.bytes": "2048"})
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for i in range(40):  # one batch each, so segments roll between them
            producer.produce(TOPIC, value=b"%03d" % i + bytes(200))
            assert producer.flush(10) == 0
        # Only now: one retention run then deletes every segment it ever will. Set before, it ran
        # during the produce too, and the log start read below could be one a later run moved on.
        alter_configs(broker.bootstrap, ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={
            "retention.bytes": "4096"}))
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
        try:
            low, high = wait_until(
                lambda: (lambda w: w if w[0] > 0 else None)(
                    consumer.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, 0), timeout=5)),
                timeout=30, what="retention deleting the first segments")
        finally:
            consumer.close()
        yield broker, low, high
    finally:
        broker.close()


def _reader(spark: SparkSession, broker: BrokerProcess, **options: str):
    reader = spark.read.format("minikafka").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", TOPIC)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_of_deleted_offsets(spark: SparkSession, trimmed):
    broker, low, high = trimmed
    from_zero = json.dumps({TOPIC: {"0": 0}})
    with pytest.raises(PySparkException, match=f"partition {TOPIC}-0: offsets 0 to {high - 1} were to be read but "
                                               f"the partition now starts at offset {low}"):
        _reader(spark, broker, startingOffsets=from_zero).collect()

    rows = _reader(spark, broker, startingOffsets=from_zero, failOnDataLoss="false").select("offset").collect()
    assert sorted(r.offset for r in rows) == list(range(low, high))
    assert _reader(spark, broker).count() == high - low  # earliest means the first offset still there


def test_stream_resumed_behind_the_log_start(spark: SparkSession, trimmed, tmp_path: Path):
    broker, low, high = trimmed

    def run(fail_on_data_loss: str):
        return (spark.readStream.format("minikafka").option("kafka.bootstrap.servers", broker.bootstrap)
                .option("subscribe", TOPIC).option("startingOffsets", json.dumps({TOPIC: {"0": 0}}))
                .option("failOnDataLoss", fail_on_data_loss).load()
                .writeStream.format("memory").queryName(f"loss_{fail_on_data_loss}")
                .option("checkpointLocation", str(tmp_path / fail_on_data_loss)).trigger(availableNow=True).start())

    failing = run("true")
    try:
        with pytest.raises(StreamingQueryException, match=f"partition {TOPIC}-0: offsets 0 to"):
            failing.awaitTermination(120)
    finally:
        failing.stop()

    skipping = run("false")
    try:
        assert skipping.awaitTermination(120)
    finally:
        skipping.stop()
    assert skipping.exception() is None
    assert sorted(r.offset for r in spark.table("loss_false").collect()) == list(range(low, high))
