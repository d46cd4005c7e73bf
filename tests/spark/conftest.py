"""Fixtures of the Spark data source tests: one SparkSession and one broker for the whole run.

Spark's start-up (a JVM, then Python workers) costs seconds, so the session is shared by every
test here; so is the broker, and each test uses topics of its own (`topic_name`). The broker's
stderr is attached to any failed test's report. The session also carries Spark's own Kafka
connector (format "kafka", fetched by Maven on first use), since jars join a JVM only at its start.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import DataFrameReader, SparkSession

from minikafka.spark import local_session
from tests.integration.broker_process import BrokerProcess
from tests.interop.spark_connector import spark_connector

_BROKER: list[BrokerProcess] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for broker in _BROKER:
            report.sections.append((f"broker stderr {broker.bootstrap}", broker.stderr_text()))


def _worker_python(directory: Path) -> str:
    """An executable that runs this interpreter with Spark's pyspark.zip dropped from PYTHONPATH.

    Spark starts a new Python process for each query it plans with a Python data source and waits
    a fixed 10 s for it to connect back. The path Spark gives that process puts its pyspark.zip
    first, whose modules Python compiles afresh at every start (a zip holds no bytecode): three
    times the CPU of importing the same pyspark installed in this environment. On two cores shared
    with the rest of the suite, that made a start miss Spark's 10 s now and then.
    """
    wrapper = directory / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        "PYTHONPATH=$(printf %s \"$PYTHONPATH\" | tr : '\\n' | grep -v '/pyspark/python/lib/' | paste -sd :)\n"
        f"export PYTHONPATH\nexec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = _worker_python(tmp_path_factory.mktemp("spark-python"))
    session = local_session("minikafka-spark-tests", conf={
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        "spark.python.worker.reuse": "true",
        "spark.jars": spark_connector().spark_jars,
        # A test run's JVM is short-lived and shares two cores: the C1 compiler alone and the
        # serial collector halve the CPU its start and first jobs take (C2's optimising
        # compiles would pay off only in a long run), which is most of the session's start.
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    })
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """The broker every Spark test talks to (two log dirs, topics auto-created on produce)."""
    broker = BrokerProcess(tmp_path_factory.mktemp("spark-broker"))
    _BROKER.append(broker)
    try:
        yield broker.start()
    finally:
        broker.close()
        _BROKER.remove(broker)


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """topic_name(suffix) -> a topic name unique to this test."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-")[:120]

    def make(suffix: str = "") -> str:
        return f"{base}-{suffix}" if suffix else base

    return make


@pytest.fixture
def read_kafka(spark: SparkSession, kafka: BrokerProcess) -> Callable[..., DataFrameReader]:
    """read_kafka(**options) -> spark.read.format("minikafka") with the broker and the options set."""

    def make(**options: str) -> DataFrameReader:
        reader = spark.read.format("minikafka").option("kafka.bootstrap.servers", kafka.bootstrap)
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader

    return make


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"
