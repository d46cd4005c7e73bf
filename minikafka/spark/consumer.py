"""Executor side of a read: one offset range of one partition, as Arrow record batches.

`read_range()` owns one confluent-kafka Consumer for the life of its generator (one Spark task)
and closes it however the generator ends. Records come out in offset order, exactly those in
[start, end); records already deleted (or truncated away) are data loss: an error naming the
partition and offsets when failOnDataLoss is true, skipped otherwise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping

import confluent_kafka
import pyarrow as pa
from confluent_kafka import KafkaError

from minikafka.spark.options import OptionError
from minikafka.spark.planning import OffsetRange

log = logging.getLogger(__name__)

ROWS_PER_BATCH = 10_000

# confluent-kafka's timestamp types, as Kafka's TimestampType ids (the timestampType column).
_TIMESTAMP_TYPE_IDS = {
    confluent_kafka.TIMESTAMP_NOT_AVAILABLE: -1,
    confluent_kafka.TIMESTAMP_CREATE_TIME: 0,
    confluent_kafka.TIMESTAMP_LOG_APPEND_TIME: 1,
}



def offset_of(message: confluent_kafka.Message) -> int:
    """The message's offset: always set on a message a consumer returns (the client's type
    stubs allow None for messages being produced)."""
    offset = message.offset()
    if offset is None:
        raise KafkaReadError("the client returned a message without an offset")
    return offset

class DataLossError(RuntimeError):
    """Records that a query was to read are no longer in the partition."""


class KafkaReadError(RuntimeError):
    """The broker or the client failed a read; the message carries the client's error."""


def consumer_config(client_config: Mapping[str, str]) -> dict[str, object]:
    config: dict[str, object] = {
        # Only read the range asked for: no group, no commits, no silent reset past lost records.
        "group.id": "minikafka-spark-reader",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 8 * 1024 * 1024,
        "fetch.wait.max.ms": 100,
        "logger": log,
    }
    config.update(client_config)
    return config


class _Columns:
    """The column values of the rows not yet sent as a batch."""

    def __init__(self, schema: pa.Schema, topic: str, partition: int):
        self.schema = schema
        self.topic = topic
        self.partition = partition
        self.include_headers = "headers" in schema.names
        self.headers_type = schema.field("headers").type if self.include_headers else None
        self.clear()

    def clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []
        self.headers: list[list[dict[str, object]] | None] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, message: confluent_kafka.Message) -> None:
        self.keys.append(message.key())
        self.values.append(message.value())
        self.offsets.append(offset_of(message))
        ts_type, ts = message.timestamp()
        self.timestamps.append(ts * 1000)
        self.timestamp_types.append(_TIMESTAMP_TYPE_IDS.get(ts_type, -1))
        if self.include_headers:
            found = message.headers()
            # A record without headers has null headers, not an empty array, as in Spark's connector.
            self.headers.append([{"key": k, "value": v} for k, v in found] if isinstance(found, list) and found else None)

    def batch(self) -> pa.RecordBatch:
        count = len(self.offsets)
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([self.topic] * count, pa.string()),
            pa.array([self.partition] * count, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, self.schema.field("timestamp").type),
            pa.array(self.timestamp_types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, self.headers_type))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self.clear()
        return batch


def read_range(client_config: Mapping[str, str], schema: pa.Schema, offset_range: OffsetRange, *,
               fail_on_data_loss: bool, poll_timeout_ms: int) -> Iterator[pa.RecordBatch]:
    """Record batches of the records in `offset_range`, in offset order."""
    r = offset_range
    if r.size == 0:
        return
    try:
        consumer = confluent_kafka.Consumer(consumer_config(client_config))
    except confluent_kafka.KafkaException as exc:
        raise OptionError(f"a kafka.* option was refused by the Kafka client: {exc.args[0].str()}") from None
    try:
        yield from _read(consumer, schema, r, fail_on_data_loss, poll_timeout_ms / 1000)
    finally:
        consumer.close()


def _lost(r: OffsetRange, detail: str, fail_on_data_loss: bool) -> None:
    message = (f"partition {r.name}: offsets {r.start} to {r.end - 1} were to be read but {detail}; "
               f"some data may have been lost (set failOnDataLoss=false to skip lost records)")
    if fail_on_data_loss:
        raise DataLossError(message)
    log.warning("%s; skipping them", message)


def _read(consumer: confluent_kafka.Consumer, schema: pa.Schema, r: OffsetRange, fail_on_data_loss: bool,
          poll_timeout_s: float) -> Iterator[pa.RecordBatch]:
    tp = confluent_kafka.TopicPartition(r.topic, r.partition)
    try:
        low, high = consumer.get_watermark_offsets(tp, timeout=poll_timeout_s)
    except confluent_kafka.KafkaException as exc:
        raise KafkaReadError(f"partition {r.name}: could not read its offsets: {exc.args[0].str()}") from None
    start, end = r.start, r.end
    if start < low:
        _lost(r, f"the partition now starts at offset {low}", fail_on_data_loss)
        start = low
    if high < end:
        _lost(r, f"the partition now ends at offset {high}", fail_on_data_loss)
        end = high
    if start >= end:
        return
    consumer.assign([confluent_kafka.TopicPartition(r.topic, r.partition, start)])
    columns = _Columns(schema, r.topic, r.partition)
    next_offset = start
    stalled_since = time.monotonic()
    while next_offset < end:
        # consume() waits out its whole timeout unless it fills num_messages: asking for no more
        # than the range still holds lets it return as soon as the range is read, as Kafka's
        # poll() returns as soon as it has records (offset gaps only fall back to the timeout).
        messages = consumer.consume(num_messages=min(ROWS_PER_BATCH, end - next_offset), timeout=0.5)
        if not messages and time.monotonic() - stalled_since > poll_timeout_s:
            raise KafkaReadError(f"partition {r.name}: no records after offset {next_offset - 1} for "
                                 f"{poll_timeout_s * 1000:.0f} ms (kafkaConsumer.pollTimeoutMs), "
                                 f"{end - next_offset} more expected before offset {end}")
        for message in messages:
            error = message.error()
            if error is not None:
                code = error.code()
                if code == KafkaError._PARTITION_EOF:
                    if offset_of(message) >= end:
                        next_offset = end  # the rest of the range holds no records (offset gaps)
                        break
                    _lost(OffsetRange(r.topic, r.partition, offset_of(message), end),
                          f"the partition ends at offset {offset_of(message)}", fail_on_data_loss)
                    next_offset = end
                    break
                if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    _lost(OffsetRange(r.topic, r.partition, next_offset, end),
                          f"the broker no longer has offset {next_offset} ({error.str()})", fail_on_data_loss)
                    yield from _skip_lost(consumer, columns, r, end, poll_timeout_s)
                    return
                if error.fatal() or not error.retriable():
                    raise KafkaReadError(f"partition {r.name} at offset {next_offset}: {error.name()}: {error.str()}")
                log.info("partition %s: retriable error %s", r.name, error.str())
                continue
            offset = offset_of(message)
            if offset >= end:
                next_offset = end
                break
            columns.add(message)
            next_offset = offset + 1
            stalled_since = time.monotonic()
        if len(columns) >= ROWS_PER_BATCH:
            yield columns.batch()
    if len(columns):
        yield columns.batch()


def _skip_lost(consumer: confluent_kafka.Consumer, columns: _Columns, r: OffsetRange, end: int,
               poll_timeout_s: float) -> Iterator[pa.RecordBatch]:
    """After records vanished mid-read (failOnDataLoss=false): what is left of the range."""
    if len(columns):
        yield columns.batch()
    tp = confluent_kafka.TopicPartition(r.topic, r.partition)
    low, _high = consumer.get_watermark_offsets(tp, timeout=poll_timeout_s)
    if low < end:
        yield from _read(consumer, columns.schema, OffsetRange(r.topic, r.partition, low, end), False,
                         poll_timeout_s)
