"""The Spark snippet of README.md, run as written (only its broker address is this test's broker)."""

from __future__ import annotations

import re
from pathlib import Path

import pyspark
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import confluent_consume, confluent_produce
from tests.interop.spark_connector import ARTIFACT, spark_connector
from tests.readme import block_containing, prose

README_BOOTSTRAP = "127.0.0.1:9092"


def test_the_readme_spark_snippet_reads_demo_and_writes_copy(spark: SparkSession, kafka: BrokerProcess):
    snippet = block_containing("python", 'format("minikafka")')
    assert README_BOOTSTRAP in snippet
    records = [(f"k{i}".encode(), f"hello {i}".encode()) for i in range(5)]
    confluent_produce(kafka.bootstrap, "demo", records)  # the README's kcat lines produced to demo

    exec(compile(snippet.replace(README_BOOTSTRAP, kafka.bootstrap), "README.md", "exec"), {})

    copied = confluent_consume(kafka.bootstrap, "copy", [0])
    assert [(record.key, record.value) for record in copied] == records


def test_the_default_save_mode_fails_with_the_error_the_readme_explains(spark: SparkSession, kafka: BrokerProcess,
                                                                        topic_name):
    quoted = re.search(r"`(\[UNSUPPORTED_DATA_SOURCE_SAVE_MODE\][^`]*)`", prose())
    assert quoted is not None, "the README's Spark section quotes the error of the default save mode"
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(PySparkException) as failure:
        df.write.format("minikafka").option("kafka.bootstrap.servers", kafka.bootstrap).option(
            "topic", topic_name()).save()
    assert quoted.group(1) in " ".join(str(failure.value).split())


def test_the_readme_connector_snippet_copies_demo_with_sparks_kafka_connector(spark: SparkSession, tmp_path: Path):
    """The snippet's getOrCreate() returns the tests' session, which has the connector already (the
    same jars spark.jars.packages would fetch); its own broker, since the snippet's topics are fixed."""
    snippet = block_containing("python", 'format("kafka")')
    assert README_BOOTSTRAP in snippet
    broker = BrokerProcess(tmp_path / "broker").start()
    try:
        records = [(f"k{i}".encode(), f"hello {i}".encode()) for i in range(5)]
        confluent_produce(broker.bootstrap, "demo", records)
        namespace: dict[str, object] = {}

        exec(compile(snippet.replace(README_BOOTSTRAP, broker.bootstrap), "README.md", "exec"), namespace)

        copied = confluent_consume(broker.bootstrap, "copy", [0])
        assert [(record.key, record.value) for record in copied] == records
    finally:
        broker.close()
    connector = spark_connector()
    assert namespace["connector"] == f"org.apache.spark:{ARTIFACT}_{connector.scala_version}:{pyspark.__version__}"
