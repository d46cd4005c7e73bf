"""Bad input stops a query with an error that names the option or the partition."""

from __future__ import annotations

import json

import pytest
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql import SparkSession

from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.clients import confluent_produce, create_topic

pytestmark = pytest.mark.integration


def _fails(reader, match: str) -> str:
    with pytest.raises(PySparkException, match=match) as failure:
        reader.load().collect()
    return str(failure.value)


def test_unknown_option(read_kafka, topic_name):
    _fails(read_kafka(subscribe=topic_name(), subscribePatern="x.*"), "unknown option 'subscribepatern'")


def test_missing_bootstrap(spark: SparkSession, topic_name):
    _fails(spark.read.format("minikafka").option("subscribe", topic_name()),
           "option kafka.bootstrap.servers is required")
    with pytest.raises(PySparkException, match="option kafka.bootstrap.servers is required"):
        spark.createDataFrame([("v",)], "value string").write.format("minikafka").option(
            "topic", topic_name()).mode("append").save()


def test_unreachable_broker(spark: SparkSession, topic_name):
    address = f"127.0.0.1:{free_port()}"
    message = _fails(spark.read.format("minikafka").option("kafka.bootstrap.servers", address)
                     .option("subscribe", topic_name()).option("kafka.default.api.timeout.ms", "1500"),
                     f"failed on kafka.bootstrap.servers={address}: no answer within 1500 ms")
    assert "Connection refused" in message


def test_a_client_setting_the_client_refuses(read_kafka, topic_name):
    _fails(read_kafka(subscribe=topic_name(), **{"kafka.no.such.setting": "1"}), "no.such.setting")


def test_missing_topic_fails_unless_data_loss_is_allowed(read_kafka, topic_name):
    missing = topic_name()
    _fails(read_kafka(subscribe=missing), f"option subscribe: topic {missing} does not exist")
    _fails(read_kafka(assign=json.dumps({missing: [0]})), f"topic {missing} \\(partition {missing}-0\\) does not exist")
    assert read_kafka(subscribe=missing, failOnDataLoss="false").load().count() == 0


def test_offsets_naming_a_partition_that_does_not_exist(read_kafka, kafka: BrokerProcess, topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 2)
    _fails(read_kafka(subscribe=topic, startingOffsets=json.dumps({topic: {"0": 0, "1": 0, "7": 0}})),
           f"option startingOffsets .* partition {topic}-7 does not exist \\(topic {topic} has partitions 0-1\\)")
    _fails(read_kafka(subscribe=topic, endingOffsets=json.dumps({topic: {"0": -1}})),
           f"option endingOffsets must give a value for every subscribed partition .* missing: {topic}-1")
    _fails(read_kafka(assign=json.dumps({topic: [2]})), f"partition {topic}-2 does not exist")


def test_starting_after_ending(read_kafka, kafka: BrokerProcess, topic_name):
    topic = topic_name()
    confluent_produce(kafka.bootstrap, topic, [(None, b"x")] * 3)
    _fails(read_kafka(subscribe=topic, startingOffsets=json.dumps({topic: {"0": 2}}),
                      endingOffsets=json.dumps({topic: {"0": 1}})),
           f"partition {topic}-0: startingOffsets 2 is after endingOffsets 1")


def test_a_user_specified_schema_is_refused(read_kafka, topic_name):
    _fails(read_kafka(subscribe=topic_name()).schema("value string"), "does not accept a user-specified one")


def test_streaming_query_stops_on_bad_input(spark: SparkSession, kafka: BrokerProcess, topic_name):
    topic = topic_name()
    create_topic(kafka.bootstrap, topic, 1)
    cases = [
        ({"subscribe": topic_name("missing")}, f"topic {topic_name('missing')} does not exist"),
        ({"subscribe": topic, "startingOffsets": json.dumps({topic: {"0": 0, "3": 0}})},
         f"partition {topic}-3 does not exist"),
    ]
    for options, message in cases:
        reader = spark.readStream.format("minikafka").option("kafka.bootstrap.servers", kafka.bootstrap)
        for key, value in options.items():
            reader = reader.option(key, value)
        query = reader.load().writeStream.format("memory").queryName("bad").trigger(availableNow=True).start()
        try:
            with pytest.raises(StreamingQueryException, match=message):
                query.awaitTermination(60)
        finally:
            query.stop()
    with pytest.raises(PySparkException, match="endingOffsets is not valid for streaming"):
        (spark.readStream.format("minikafka").option("kafka.bootstrap.servers", kafka.bootstrap)
         .option("subscribe", topic).option("endingOffsets", "latest").load()
         .writeStream.format("memory").queryName("bad2").start().awaitTermination(60))
