"""Executor side of a write: the rows of one Spark task, produced with an idempotent producer.

`write_batches()` owns one confluent-kafka Producer for one task. It returns only when every
row is acknowledged; the first delivery error (the broker's, e.g. MSG_SIZE_TOO_LARGE) fails the
task with a `KafkaWriteError` that carries it. A row is never dropped silently: the task either
reports every row written or fails.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

import confluent_kafka
import pyarrow as pa

from minikafka.spark.options import OptionError
from minikafka.spark.schema import SinkColumns

log = logging.getLogger(__name__)

FLUSH_TIMEOUT_S = 300.0


class KafkaWriteError(RuntimeError):
    """A record the sink was to write was refused by the broker or could not be delivered."""


def producer_config(client_config: Mapping[str, str]) -> dict[str, object]:
    config: dict[str, object] = {
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "logger": log,
    }
    config.update(client_config)
    return config


def _as_bytes(value: object, is_string: bool) -> bytes | None:
    if value is None:
        return None
    if is_string:
        return str(value).encode()
    if not isinstance(value, bytes | bytearray | memoryview):
        raise TypeError(f"expected binary data, got {type(value).__name__}")
    return bytes(value)


class _Delivery:
    """Counts acknowledgements and keeps the first failure, in delivery-callback order."""

    def __init__(self) -> None:
        self.acknowledged = 0
        self.first_error: str | None = None

    def __call__(self, err: confluent_kafka.KafkaError | None, msg: confluent_kafka.Message) -> None:
        if err is None:
            self.acknowledged += 1
        elif self.first_error is None:
            self.first_error = (f"record for {msg.topic()}-{msg.partition()} was refused: "
                                f"{err.name()}: {err.str()}")

    def check(self) -> None:
        if self.first_error is not None:
            raise KafkaWriteError(self.first_error)


def write_batches(client_config: Mapping[str, str], columns: SinkColumns, topic_option: str | None,
                  batches: Iterable[pa.RecordBatch]) -> int:
    """Produce every row of `batches`; returns the number of rows written."""
    try:
        producer = confluent_kafka.Producer(producer_config(client_config))
    except confluent_kafka.KafkaException as exc:
        raise OptionError(f"a kafka.* option was refused by the Kafka client: {exc.args[0].str()}") from None
    delivery = _Delivery()
    sent = 0
    for batch in batches:
        values = batch.column(columns.value).to_pylist()
        keys = batch.column(columns.key).to_pylist() if columns.key is not None else None
        topics = batch.column(columns.topic).to_pylist() if columns.topic is not None else None
        partitions = batch.column(columns.partition).to_pylist() if columns.partition is not None else None
        headers = batch.column(columns.headers).to_pylist() if columns.headers is not None else None
        for row in range(batch.num_rows):
            topic = topic_option or (topics[row] if topics is not None else None)
            if not topic:
                raise KafkaWriteError("a row has no topic: its topic column is null and no topic option is set")
            kwargs: dict[str, object] = {
                "value": _as_bytes(values[row], columns.value_is_string),
                "on_delivery": delivery,
            }
            if keys is not None:
                kwargs["key"] = _as_bytes(keys[row], columns.key_is_string)
            if partitions is not None and partitions[row] is not None:
                kwargs["partition"] = partitions[row]
            if headers is not None and headers[row]:
                kwargs["headers"] = [tuple(h.values()) for h in headers[row]]  # (key, value) by position
            _produce(producer, delivery, topic, kwargs)
            sent += 1
        producer.poll(0)
        delivery.check()
    _flush(producer, delivery, sent)
    return sent


def _produce(producer: confluent_kafka.Producer, delivery: _Delivery, topic: str, kwargs: dict) -> None:
    while True:
        try:
            producer.produce(topic, **kwargs)
            return
        except BufferError:
            producer.poll(0.05)  # the local queue is full: wait for acknowledgements
            delivery.check()
        except confluent_kafka.KafkaException as exc:
            error = exc.args[0]
            raise KafkaWriteError(f"record for topic {topic} was refused: {error.name()}: {error.str()}") from None


def _flush(producer: confluent_kafka.Producer, delivery: _Delivery, sent: int) -> None:
    deadline = time.monotonic() + FLUSH_TIMEOUT_S
    while True:
        remaining = producer.flush(1.0)
        delivery.check()
        if remaining == 0:
            break
        if time.monotonic() > deadline:
            raise KafkaWriteError(f"{remaining} of {sent} records still unacknowledged after {FLUSH_TIMEOUT_S:.0f}s")
    if delivery.acknowledged != sent:
        raise KafkaWriteError(f"{delivery.acknowledged} of {sent} records acknowledged")
