"""The follower's in-place Fetch response reader against the construct schema, the reference:
every flexible version, with records, nulls, aborted transactions and tagged fields, and every
truncation of a response failing as MalformedResponse."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from protocol import MalformedResponse, parse_response
from protocol.fetch_view import parse_fetch_response
from protocol.messages import encode_response_bytes

FETCH = 1
TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
VERSIONS = range(12, 19)


def response(version: int) -> dict[str, Any]:
    def partition(index: int, records: bytes | None, **extra: Any) -> dict[str, Any]:
        return {"partition_index": index, "error_code": 0, "high_watermark": 1000 + index,
                "last_stable_offset": 900 + index, "log_start_offset": 7 * index, "aborted_transactions": [],
                "preferred_read_replica": -1, "records": records, **extra}
    return {
        "throttle_time_ms": 3, "error_code": 0, "session_id": 0,
        "responses": [
            {"topic": "alpha", "topic_id": TOPIC_ID, "partitions": [
                partition(0, b"x" * 300),
                partition(1, None, error_code=6, aborted_transactions=[
                    {"producer_id": 5, "first_offset": 10}, {"producer_id": 6, "first_offset": 12}]),
                partition(2, b"", diverging_epoch={"epoch": 3, "end_offset": 40},
                          current_leader={"leader_id": 2, "leader_epoch": 9}),
            ]},
            {"topic": "beta-" + "é" * 70, "topic_id": uuid.UUID(int=7), "partitions": [
                partition(4, bytes(range(256)) * 3, aborted_transactions=None)]},
        ],
        "node_endpoints": [{"node_id": 2, "host": "127.0.0.1", "port": 9093, "rack": None}],
    }


def frame_payload(version: int, body: dict[str, Any]) -> bytes:
    """The response as a follower receives it, less the size prefix."""
    return encode_response_bytes(FETCH, version, 42, body)[4:]


@pytest.mark.parametrize("version", VERSIONS)
def test_reads_what_the_schema_reads(version: int) -> None:
    body = response(version)
    payload = frame_payload(version, body)
    _, reference = parse_response(FETCH, version, payload)
    view = parse_fetch_response(memoryview(payload), version)
    assert view.error_code == reference.error_code
    expected = [(t.get("topic"), t.get("topic_id"), p.partition_index, p.error_code, p.high_watermark,
                 p.log_start_offset, p.records) for t in reference.responses for p in t.partitions]
    got = [(p.topic, p.topic_id, p.partition, p.error_code, p.high_watermark, p.log_start_offset,
            None if p.records is None else bytes(p.records)) for p in view.partitions]
    if version < 13:
        expected = [(topic, None, *rest) for topic, _, *rest in expected]
    else:
        expected = [(None, topic_id, *rest) for _, topic_id, *rest in expected]
    assert got == expected


def test_records_are_views_into_the_payload_not_copies() -> None:
    payload = bytearray(frame_payload(12, response(12)))
    view = parse_fetch_response(memoryview(payload), 12)
    records = view.partitions[0].records
    assert records is not None and records.obj is payload
    payload[payload.index(b"x" * 300)] = ord("y")
    assert bytes(records[:1]) == b"y"


@pytest.mark.parametrize("version", (12, 13, 16))
def test_every_truncation_is_a_malformed_response(version: int) -> None:
    payload = frame_payload(version, response(version))
    for cut in range(len(payload)):
        with pytest.raises(MalformedResponse):
            parse_fetch_response(memoryview(payload[:cut]), version)


def test_bytes_after_the_body_are_refused() -> None:
    with pytest.raises(MalformedResponse, match="1 bytes left"):
        parse_fetch_response(memoryview(frame_payload(12, response(12)) + b"\x00"), 12)


def test_a_non_flexible_version_is_refused() -> None:
    with pytest.raises(ValueError, match="not flexible"):
        parse_fetch_response(memoryview(b""), 11)
