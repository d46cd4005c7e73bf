"""Batch read throughput of the "minikafka" Spark data source next to a plain confluent-kafka consumer.

Starts its own broker (temporary log dirs, free ports; always stopped at the end), produces N
uncompressed records into a topic of P partitions, then reads the whole topic:
  - with one confluent-kafka consumer assigned every partition (the floor of what a client gets),
  - with spark.read.format("minikafka") on master local[2], summing the value lengths, so every
    record crosses from the broker through a Python worker and Arrow into the JVM. Spark runs
    the read `--runs` times; the first run includes starting the Python workers.
Prints a markdown table.

Usage: .venv/bin/python bench/bench_spark.py [--records N] [--record-bytes B] [--partitions P] [--runs R]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import confluent_kafka  # noqa: E402

from tests.integration.broker_process import BrokerProcess  # noqa: E402
from tests.integration.clients import create_topic  # noqa: E402

MiB = 1024 * 1024


def produce(bootstrap: str, topic: str, records: int, record_bytes: int) -> None:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "none",
        "linger.ms": 20, "queue.buffering.max.kbytes": 256 * 1024,
    })
    value = bytes(record_bytes)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=b"%d" % i, value=value)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(300):
        raise RuntimeError(f"produce to {topic}: records left undelivered")


def confluent_read(bootstrap: str, topic: str, partitions: int, records: int) -> tuple[int, float]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench-spark-baseline", "enable.auto.commit": False,
        "fetch.max.bytes": 64 * MiB, "max.partition.fetch.bytes": 8 * MiB,
    })
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in range(partitions)])
        seen = payload = 0
        started = time.perf_counter()
        while seen < records:
            if time.perf_counter() - started > 300:
                raise RuntimeError(f"confluent consumer read {seen} of {records} records in 300s")
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                if msg.error() is not None:
                    raise RuntimeError(str(msg.error()))
                seen += 1
                payload += len(msg.value())
        return payload, time.perf_counter() - started
    finally:
        consumer.close()


def spark_reads(bootstrap: str, topic: str, records: int, runs: int) -> list[tuple[int, float]]:
    from pyspark.sql import functions as F

    from minikafka.spark import local_session

    spark = local_session("minikafka-bench")
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    try:
        for _ in range(runs):
            started = time.perf_counter()
            row = (spark.read.format("minikafka").option("kafka.bootstrap.servers", bootstrap)
                   .option("subscribe", topic).load()
                   .agg(F.count("*").alias("records"), F.sum(F.length("value")).alias("payload")).first())
            elapsed = time.perf_counter() - started
            if row is None or row.records != records:
                raise RuntimeError(f"spark read {row} records, expected {records}")
            results.append((int(row.payload), elapsed))
    finally:
        spark.stop()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3, help="Spark reads of the topic")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    topic = "bench-spark"
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-spark-") as tmp:
        broker = BrokerProcess(Path(tmp), overrides={"auto.create.topics.enable": "false"})
        try:
            broker.start()
            create_topic(broker.bootstrap, topic, args.partitions)
            produce(broker.bootstrap, topic, args.records, args.record_bytes)
            print(f"produced {args.records} records", file=sys.stderr, flush=True)
            baseline = confluent_read(broker.bootstrap, topic, args.partitions, args.records)
            print(f"confluent-kafka read: {baseline[0] / MiB / baseline[1]:.1f} MiB/s", file=sys.stderr, flush=True)
            spark = spark_reads(broker.bootstrap, topic, args.records, args.runs)
        except BaseException:
            print(broker.stderr_text(5000), file=sys.stderr)
            raise
        finally:
            broker.close()

    import pyspark

    print(f"## Spark data source batch read (pyspark {pyspark.__version__}, master local[2], confluent-kafka "
          f"{confluent_kafka.version()}, Python {platform.python_version()}, {platform.machine()})\n")
    print(f"{args.records} records of {args.record_bytes} B in {args.partitions} partitions, uncompressed, one "
          f"broker on this host; MiB/s counts record values.\n")
    print("| reader | run | MiB/s | records/s | seconds |")
    print("|---|---:|---:|---:|---:|")
    rows = [("confluent-kafka consumer (1 process)", "-", *baseline)]
    rows += [(f'spark.read.format("minikafka"){" (cold)" if i == 0 else ""}', str(i + 1), *r)
             for i, r in enumerate(spark)]
    for name, run, payload, seconds in rows:
        print(f"| {name} | {run} | {payload / MiB / seconds:.1f} | {args.records / seconds:,.0f} | {seconds:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
