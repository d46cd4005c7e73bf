"""Request and response headers, request parsing errors, ApiVersions quirks, FileRegions."""

from __future__ import annotations

import random
import struct
import uuid
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from protocol import (
    SUPPORTED_APIS,
    EncodeError,
    ErrorCode,
    FrameDecoder,
    MalformedRequest,
    MalformedResponse,
    RequestError,
    UnknownApi,
    UnsupportedVersion,
    encode_api_versions_fallback,
    encode_request,
    encode_response,
    encode_response_bytes,
    parse_request,
    parse_response,
)

METADATA, FETCH, PRODUCE, API_VERSIONS, INIT_PRODUCER_ID = 3, 1, 0, 18, 22


def payload(framed: bytes) -> bytes:
    frames = FrameDecoder(1 << 24).feed(framed)
    assert len(frames) == 1
    return frames[0]


# --------------------------------------------------------------------------------------
# Headers.
# --------------------------------------------------------------------------------------


def test_request_header_v1_for_non_flexible_versions() -> None:
    data = payload(encode_request(INIT_PRODUCER_ID, 1, 0x01020304, "cli", {"transaction_timeout_ms": 9}))
    assert data == (
        b"\x00\x16\x00\x01\x01\x02\x03\x04\x00\x03cli"  # key, version, correlation id, client id
        b"\xff\xff\x00\x00\x00\x09"  # null transactional id, timeout
    )
    request = parse_request(data)
    assert request.header.header_version == 1
    assert (request.api_key, request.api_version, request.correlation_id) == (22, 1, 0x01020304)
    assert request.header.client_id == "cli"
    assert request.body == {"transactional_id": None, "transaction_timeout_ms": 9, **_init_producer_absent()}


def _init_producer_absent() -> dict[str, Any]:
    return {
        "producer_id": -1,
        "producer_epoch": -1,
        "enable2_pc": False,
        "keep_prepared_txn": False,
    }


def test_request_header_v2_keeps_a_non_compact_client_id_and_adds_tagged_fields() -> None:
    data = payload(
        encode_request(
            INIT_PRODUCER_ID, 2, 7, None, {"transaction_timeout_ms": 9}, header_tagged_fields={3: b"hi"}
        )
    )
    assert data == (
        b"\x00\x16\x00\x02\x00\x00\x00\x07\xff\xff"  # null client id, still int16 length
        b"\x01\x03\x02hi"  # header tagged fields
        b"\x00\x00\x00\x00\x09\x00"  # compact null transactional id, timeout, body tags
    )
    request = parse_request(data)
    assert request.header.header_version == 2
    assert request.header.client_id is None
    assert request.header.tagged_fields == {3: b"hi"}


def test_response_header_v0_and_v1() -> None:
    body = {"throttle_time_ms": 1, "error_code": 0, "producer_id": 5, "producer_epoch": 2}
    v1 = encode_response_bytes(INIT_PRODUCER_ID, 1, 9, body)
    assert v1 == b"\x00\x00\x00\x14" + b"\x00\x00\x00\x09" + bytes.fromhex("00000001 0000 0000000000000005 0002")
    v2 = encode_response_bytes(INIT_PRODUCER_ID, 2, 9, body)
    assert v2 == b"\x00\x00\x00\x16" + b"\x00\x00\x00\x09\x00" + bytes.fromhex("00000001 0000 0000000000000005 0002 00")
    assert parse_response(INIT_PRODUCER_ID, 1, v1[4:])[0] == 9
    correlation_id, decoded = parse_response(INIT_PRODUCER_ID, 2, v2[4:])
    assert correlation_id == 9 and decoded.producer_id == 5


def test_api_versions_response_header_is_v0_even_when_the_body_is_flexible() -> None:
    body = {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}]}
    data = encode_response_bytes(API_VERSIONS, 3, 0x0A0B0C0D, body)
    # size, correlation id, then directly the body: error code, compact array of one.
    assert data[4:8] == b"\x0a\x0b\x0c\x0d"
    assert data[8:11] == b"\x00\x00\x02"
    correlation_id, decoded = parse_response(API_VERSIONS, 3, data[4:])
    assert correlation_id == 0x0A0B0C0D
    assert decoded.api_keys == [{"api_key": 18, "min_version": 0, "max_version": 4}]
    kafka = ApiVersionsResponse.decode(data, version=3, header=True, framed=True)
    assert kafka.header.correlation_id == 0x0A0B0C0D
    assert [k.api_key for k in kafka.api_keys] == [18]


def test_flexible_response_header_carries_a_tagged_section() -> None:
    data = encode_response_bytes(METADATA, 9, 1, {})
    assert data[4:9] == b"\x00\x00\x00\x01\x00"
    assert encode_response_bytes(METADATA, 8, 1, {})[8:12] == b"\x00\x00\x00\x00"  # throttle


# --------------------------------------------------------------------------------------
# ApiVersions: the error body is v0, and the fallback answer.
# --------------------------------------------------------------------------------------


def test_api_versions_error_response_is_a_v0_body() -> None:
    body = {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": [], "throttle_time_ms": 5}
    data = encode_response_bytes(API_VERSIONS, 3, 4, body)
    assert data == b"\x00\x00\x00\x0a" + b"\x00\x00\x00\x04" + b"\x00\x23" + b"\x00\x00\x00\x00"
    correlation_id, decoded = parse_response(API_VERSIONS, 3, data[4:])
    assert (correlation_id, decoded.error_code, decoded.api_keys) == (4, 35, [])


def test_api_versions_fallback_lists_every_api_in_a_v0_body() -> None:
    data = encode_api_versions_fallback(123)
    correlation_id, body = parse_response(API_VERSIONS, 4, data[4:])
    assert correlation_id == 123
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert {(k.api_key, k.min_version, k.max_version) for k in body.api_keys} == {
        (spec.key, spec.min_version, spec.max_version) for spec in SUPPORTED_APIS.values()
    }
    assert parse_response(API_VERSIONS, 0, data[4:]) == (correlation_id, body)
    kafka = ApiVersionsResponse.decode(data, version=4, header=True, framed=True)
    assert kafka.error_code == 35
    assert len(kafka.api_keys) == len(SUPPORTED_APIS)


def test_unsupported_api_versions_request_still_yields_its_header() -> None:
    request = ApiVersionsRequest[4](client_software_name="x", client_software_version="1")
    request.API_VERSION = 4
    framed = bytearray(request.encode(version=4, header=False))
    # An ApiVersions v5 (newer than we know) from a client with id "cli".
    data = struct.pack(">hhi", 18, 5, 77) + b"\x00\x03cli" + b"\x00" + bytes(framed)
    with pytest.raises(UnsupportedVersion) as caught:
        parse_request(data)
    header = caught.value.header
    assert header is not None
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 5, 77, "cli")
    assert encode_api_versions_fallback(header.correlation_id)[4:8] == struct.pack(">i", 77)


# --------------------------------------------------------------------------------------
# parse_request errors.
# --------------------------------------------------------------------------------------


def _metadata_request(version: int = 9) -> bytes:
    body = {"topics": [{"name": "orders", "topic_id": uuid.uuid4()}], "allow_auto_topic_creation": False}
    return payload(encode_request(METADATA, version, 42, "client", body))


def test_unknown_api_key() -> None:
    data = struct.pack(">hhi", 9999, 0, 42) + b"\x00\x01c"
    with pytest.raises(UnknownApi) as caught:
        parse_request(data + b"whatever")
    assert caught.value.header is not None
    assert (caught.value.header.api_key, caught.value.header.correlation_id) == (9999, 42)


@pytest.mark.parametrize(("key", "version"), [(PRODUCE, 2), (PRODUCE, 14), (METADATA, 14), (FETCH, 3), (FETCH, -1)])
def test_unsupported_version_keeps_the_header_and_skips_the_body(key: int, version: int) -> None:
    data = struct.pack(">hhi", key, version, 42) + b"\x00\x06client" + b"\xde\xad"
    with pytest.raises(UnsupportedVersion) as caught:
        parse_request(data)
    header = caught.value.header
    assert header is not None
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        key,
        version,
        42,
        "client",
    )


def test_truncated_header_has_no_header() -> None:
    for cut in range(0, 8 + 2 + len("client")):
        with pytest.raises(MalformedRequest) as caught:
            parse_request(_metadata_request()[:cut])
        assert caught.value.header is None


def test_truncated_body_at_every_length() -> None:
    data = _metadata_request()
    header_size = 8 + 2 + len("client") + 1
    for cut in range(header_size, len(data)):
        with pytest.raises(MalformedRequest) as caught:
            parse_request(data[:cut])
        assert caught.value.header is not None
        assert caught.value.header.correlation_id == 42
    assert parse_request(data).body.topics[0].name == "orders"


def test_bytes_after_a_complete_body_are_ignored_as_kafka_does() -> None:
    request = parse_request(_metadata_request() + b"\x00\x00\x00")
    assert request.api_key == METADATA
    assert request.body.topics[0].name == "orders"


def test_invalid_utf8_and_bad_lengths_in_the_body() -> None:
    header = struct.pack(">hhi", METADATA, 8, 1) + b"\xff\xff"
    good = header + b"\x00\x00\x00\x01" + b"\x00\x02ok" + b"\x01\x00\x00"
    assert parse_request(good).body.topics[0].name == "ok"
    for body in (
        b"\x00\x00\x00\x01" + b"\x00\x02\xc3\x28" + b"\x01\x00\x00",  # invalid UTF-8
        b"\x00\x00\x00\x01" + b"\xff\xfe" + b"\x01\x00\x00",  # string length -2
        b"\x00\x00\x00\x01" + b"\xff\xff" + b"\x01\x00\x00",  # null name before v10
        b"\xff\xff\xff\xfe" + b"\x01\x00\x00",  # array length -2
    ):
        with pytest.raises(MalformedRequest):
            parse_request(header + body)


def test_hostile_array_count_is_a_malformed_request() -> None:
    header = struct.pack(">hhi", METADATA, 8, 1) + b"\xff\xff"
    with pytest.raises(MalformedRequest):
        parse_request(header + b"\x7f\xff\xff\xff" + b"\x00\x01x" * 10)
    fetch = struct.pack(">hhi", FETCH, 4, 1) + b"\xff\xff" + bytes(17) + b"\x7f\xff\xff\xff"
    with pytest.raises(MalformedRequest):
        parse_request(fetch)


def test_out_of_order_tagged_fields_in_the_body() -> None:
    header = struct.pack(">hhi", METADATA, 9, 1) + b"\xff\xff" + b"\x00"
    body = b"\x01" + b"\x01\x00\x00" + b"\x02" + b"\x05\x00" + b"\x01\x00"
    with pytest.raises(MalformedRequest, match="out of order"):
        parse_request(header + body)


def test_random_garbage_only_raises_request_errors() -> None:
    rng = random.Random(3)
    keys = sorted(SUPPORTED_APIS)
    for _ in range(3000):
        key = rng.choice(keys)
        spec = SUPPORTED_APIS[key]
        version = rng.randint(spec.min_version, spec.max_version)
        junk = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 60)))
        try:
            parse_request(struct.pack(">hhi", key, version, 1) + b"\xff\xff" + junk)
        except RequestError as exc:
            assert isinstance(exc, MalformedRequest)
            assert exc.header is not None


def test_garbage_responses_raise_malformed_response() -> None:
    with pytest.raises(MalformedResponse):
        parse_response(METADATA, 9, b"\x00\x00\x00\x01")
    good = encode_response_bytes(METADATA, 9, 1, {})[4:]
    with pytest.raises(MalformedResponse, match="left after the body"):
        parse_response(METADATA, 9, good + b"\x00")


def test_encoding_errors_name_the_message() -> None:
    with pytest.raises(EncodeError, match="Metadata v12 response"):
        encode_response(METADATA, 12, 1, {"brokers": [{"node_id": "one"}]})
    with pytest.raises(EncodeError, match="Metadata v12 response"):
        encode_response(METADATA, 12, 1, {"topics": [{"partitions": [{"replica_nodes": [2**40]}]}]})
    with pytest.raises(ValueError):
        encode_response(METADATA, 14, 1, {})
    with pytest.raises(ValueError):
        encode_request(4242, 0, 1, None, {})


# --------------------------------------------------------------------------------------
# FileRegion cutting of Fetch responses.
# --------------------------------------------------------------------------------------


class Region:
    """Stands for `data`, which the server would send from a file."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)


def _fetch_response(version: int, records: list[Any]) -> dict[str, Any]:
    partitions = [
        {
            "partition_index": index,
            "high_watermark": 100 + index,
            "aborted_transactions": None if index % 2 else [{"producer_id": 7, "first_offset": 3}],
            "current_leader": {"leader_id": 1, "leader_epoch": 4},
            "records": value,
        }
        for index, value in enumerate(records)
    ]
    return {
        "session_id": 9,
        "responses": [
            {"topic": "t1", "topic_id": uuid.UUID(int=1), "partitions": partitions[:2]},
            {"topic": "t2", "topic_id": uuid.UUID(int=2), "partitions": partitions[2:]},
        ],
    }


def _inline(records: list[Any]) -> list[Any]:
    return [value.data if isinstance(value, Region) else value for value in records]


@pytest.mark.parametrize("version", [4, 11, 12, 13, 16, 18])
def test_file_regions_cut_the_fetch_response(version: int) -> None:
    records = [Region(b"A" * 10), b"inline", None, Region(b"B" * 300), Region(b"")]
    parts = encode_response(FETCH, version, 77, _fetch_response(version, records))
    expected = encode_response_bytes(FETCH, version, 77, _fetch_response(version, _inline(records)))

    regions = [value for value in records if isinstance(value, Region)]
    assert parts[1::2] == regions
    assert all(isinstance(part, bytes) for part in parts[0::2])
    joined = b"".join(part.data if isinstance(part, Region) else part for part in parts)
    assert joined == expected
    assert struct.unpack(">i", parts[0][:4])[0] == len(expected) - 4

    correlation_id, body = parse_response(FETCH, version, expected[4:])
    got = [p.records for topic in body.responses for p in topic.partitions]
    assert correlation_id == 77 and got == _inline(records)


def test_without_regions_the_response_is_one_chunk() -> None:
    parts = encode_response(FETCH, 12, 1, _fetch_response(12, [b"x", None, b"y"]))
    assert len(parts) == 1 and isinstance(parts[0], bytes)
    assert parts[0] == encode_response_bytes(FETCH, 12, 1, _fetch_response(12, [b"x", None, b"y"]))


def test_encode_response_bytes_refuses_regions() -> None:
    with pytest.raises(EncodeError, match="FileRegion"):
        encode_response_bytes(FETCH, 12, 1, _fetch_response(12, [Region(b"x")]))
