"""The Arrow columns a read task builds from fetched records: no Spark job, no sockets."""

from __future__ import annotations

import confluent_kafka

from minikafka.spark.consumer import _Columns
from minikafka.spark.schema import arrow_schema, source_schema


def _message(offset: int, headers: list[tuple[str, bytes | None]] | None) -> confluent_kafka.Message:
    return confluent_kafka.Message(topic="t", partition=2, offset=offset, key=b"k", value=b"v", headers=headers,
                                   timestamp=(confluent_kafka.TIMESTAMP_CREATE_TIME, 1_700_000_000_000))


def test_a_record_without_headers_has_null_headers_as_in_sparks_connector():
    columns = _Columns(arrow_schema(source_schema(include_headers=True)), "t", 2)
    columns.add(_message(0, [("h", b"1"), ("null", None)]))
    columns.add(_message(1, None))
    columns.add(_message(2, []))
    headers = columns.batch().column("headers").to_pylist()
    assert headers == [[{"key": "h", "value": b"1"}, {"key": "null", "value": None}], None, None]
