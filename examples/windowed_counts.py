"""Structured Streaming over minikafka: per-user event counts and totals in event-time windows.

Reads JSON events such as {"user": "ada", "event_time": "2024-05-01T12:00:03Z", "amount": 3}
from one topic, drops malformed ones, aggregates them per user in tumbling event-time windows
with a watermark, and writes each window once it is final (output mode append) to another topic:
key = the user, value = {"window_start", "window_end", "user", "events", "amount"} as JSON.
Its offsets and aggregation state live in the checkpoint directory: stopped and started again
with the same one, it carries on where it stopped, neither skipping nor counting an event twice.

Against `make run` (broker on 127.0.0.1:9092):
    .venv/bin/python examples/produce_events.py --count 10000
    .venv/bin/python examples/windowed_counts.py --checkpoint /tmp/windowed-counts
    kcat -b 127.0.0.1:9092 -t window-counts -C -e -f '%k %s\\n'
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

EVENT_SCHEMA = StructType([
    StructField("user", StringType()),
    StructField("event_time", TimestampType()),
    StructField("amount", LongType()),
])


def window_counts(events: DataFrame, window: str, watermark: str) -> DataFrame:
    """Kafka rows (value = JSON event) -> rows of key and value (JSON) per user and window."""
    parsed = (events
              .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("event"))
              .select("event.*")
              .where(F.col("user").isNotNull() & F.col("event_time").isNotNull()))
    counted = (parsed
               .withWatermark("event_time", watermark)
               .groupBy(F.window("event_time", window).alias("window"), "user")
               .agg(F.count("*").alias("events"), F.sum(F.coalesce("amount", F.lit(0))).alias("amount")))
    return counted.select(
        F.col("user").alias("key"),
        F.to_json(F.struct(
            F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
            F.date_format("window.end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
            "user", "events", "amount",
        )).alias("value"),
    )


def start(spark: SparkSession, *, bootstrap: str, input_topic: str, output_topic: str, checkpoint: str,
          window: str = "1 minute", watermark: str = "30 seconds", starting_offsets: str = "earliest",
          max_offsets_per_trigger: int | None = None, available_now: bool = False,
          trigger_interval: str = "1 second") -> StreamingQuery:
    """Start the pipeline; the caller owns the returned query (awaitTermination / stop)."""
    reader = (spark.readStream.format("minikafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", input_topic)
              .option("startingOffsets", starting_offsets))
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    writer = (window_counts(reader.load(), window, watermark).writeStream
              .format("minikafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("topic", output_topic)
              .option("checkpointLocation", checkpoint)
              .outputMode("append")
              .queryName(f"windowed-counts-{input_topic}"))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=trigger_interval)
    return writer.start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--input", default="events", help="topic of JSON events")
    parser.add_argument("--output", default="window-counts", help="topic the window results go to")
    parser.add_argument("--checkpoint", required=True, help="directory of the query's offsets and state")
    parser.add_argument("--window", default="1 minute")
    parser.add_argument("--watermark", default="30 seconds", help="how late an event may arrive")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--available-now", action="store_true",
                        help="process what is in the topic now, then stop (default: run until Ctrl-C)")
    args = parser.parse_args(argv)

    from minikafka.spark import local_session

    spark = local_session("windowed-counts")
    spark.sparkContext.setLogLevel("WARN")
    query = start(spark, bootstrap=args.bootstrap, input_topic=args.input, output_topic=args.output,
                  checkpoint=args.checkpoint, window=args.window, watermark=args.watermark,
                  max_offsets_per_trigger=args.max_offsets_per_trigger, available_now=args.available_now)
    print(f"query {query.name} running: {args.input} -> {args.output}, checkpoint {args.checkpoint}", file=sys.stderr)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
