"""A local SparkSession with the "minikafka" format registered, for examples, tests and benchmarks.

Spark there runs in this process's JVM with `master` threads, binds only to 127.0.0.1, serves no
UI, and runs its Python workers with this interpreter (so they import minikafka and its client
library from the same environment).
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from minikafka.spark.source import register

LOCAL_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
}


def local_session(app_name: str = "minikafka", master: str = "local[2]",
                  conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession on this machine only, with format("minikafka") registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in {**LOCAL_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
