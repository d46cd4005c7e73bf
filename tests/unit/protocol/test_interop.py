"""Every message of every supported API and version against kafka-python's encoder.

For each (api, version, request|response) both we and kafka-python support, a fully
populated message (non-default values everywhere, some nulls, tagged fields, UUIDs)
is encoded by kafka-python and decoded by us, and encoded by us and decoded by
kafka-python; the bytes of the two encoders must also be identical.
"""

from __future__ import annotations

import zlib
from typing import Any

import pytest

from protocol import (
    SUPPORTED_APIS,
    FrameDecoder,
    decode_body,
    encode_body,
    encode_request,
    encode_response_bytes,
    parse_request,
    parse_response,
)

from .kafka_python_oracle import (
    ValueMaker,
    from_kafka_python,
    has_message_class,
    message_class,
    our_name,
    to_kafka_python,
    to_ours,
)
from .test_inter_broker_apis import HAND_CHECKED

API_VERSIONS = 18


def _cases() -> list[Any]:
    cases = []
    for key, spec in sorted(SUPPORTED_APIS.items()):
        if key in HAND_CHECKED:
            continue
        for request in (True, False):
            cls = message_class(spec.name, request)
            kind = "Request" if request else "Response"
            high = min(spec.max_version, cls.max_version)
            for version in range(spec.min_version, high + 1):
                cases.append(pytest.param(key, version, request, id=f"{spec.name}{kind}-v{version}"))
    return cases


CASES = _cases()


def test_every_supported_version_is_covered() -> None:
    """By kafka-python's classes, or (the inter-broker APIs it lacks) by hand-built bytes."""
    covered = {(case.values[0], case.values[1], case.values[2]) for case in CASES}
    for key in HAND_CHECKED:
        assert not has_message_class(SUPPORTED_APIS[key].name), f"kafka-python has {key} now: use it as the oracle"
    for key, spec in SUPPORTED_APIS.items():
        if key in HAND_CHECKED:
            continue
        for version in range(spec.min_version, spec.max_version + 1):
            assert (key, version, True) in covered
            assert (key, version, False) in covered


class Sample:
    """One populated message in kafka-python's shape and in ours."""

    def __init__(self, key: int, version: int, request: bool) -> None:
        spec = SUPPORTED_APIS[key]
        self.key, self.version, self.request = key, version, request
        self.name = spec.name + ("Request" if request else "Response")
        self.cls = message_class(spec.name, request)
        self.struct = self.cls._struct
        maker = ValueMaker(zlib.crc32(f"{self.name}-{version}".encode()))
        self.values = maker.struct(self.struct, version)
        if key == API_VERSIONS and not request:
            # A non-zero error code makes every client read the body as v0; that
            # quirk has its own tests.
            self.values["error_code"] = 0
        self.ours = to_ours(self.struct, self.values)

    def kafka_python_object(self) -> Any:
        return to_kafka_python(self.struct, self.values, self.version, self.cls)

    def kafka_python_bytes(self) -> bytes:
        return bytes(self.kafka_python_object().encode(version=self.version))


def assert_matches(ours: Any, expected: Any, struct_field: Any, version: int, path: str) -> None:
    """Our decoded Message equals the expected value tree for every field the version
    has, and holds exactly kafka-python's set of field names (versions outside filled)."""
    top_level = "." not in path and "[" not in path
    fields = {our_name(f, top_level): f for f in struct_field._fields}
    assert set(ours) - {"_unknown_tagged_fields"} == set(fields), path
    for key, field in fields.items():
        if not field.for_version_q(version):
            continue
        got, want = ours[key], expected[key]
        where = f"{path}.{key}"
        if want is None or not (field.is_struct() or field.is_struct_array()):
            assert got == want, where
            assert getattr(ours, key) == want, where
        elif field.is_struct_array():
            assert isinstance(got, list) and len(got) == len(want), where
            for index, (got_item, want_item) in enumerate(zip(got, want, strict=True)):
                assert_matches(got_item, want_item, field.array_of, version, f"{where}[{index}]")
        else:
            assert_matches(got, want, field, version, where)


@pytest.mark.parametrize(("key", "version", "request_"), CASES)
def test_kafka_python_encodes_we_decode(key: int, version: int, request_: bool) -> None:
    sample = Sample(key, version, request_)
    body = decode_body(key, version, request_, sample.kafka_python_bytes())
    assert_matches(body, sample.ours, sample.struct, version, sample.name)


@pytest.mark.parametrize(("key", "version", "request_"), CASES)
def test_we_encode_kafka_python_decodes(key: int, version: int, request_: bool) -> None:
    sample = Sample(key, version, request_)
    ours = encode_body(key, version, request_, sample.ours)
    decoded = sample.cls.decode(ours, version=version)
    assert from_kafka_python(sample.struct, decoded, version) == sample.values
    assert ours == sample.kafka_python_bytes()


@pytest.mark.parametrize(("key", "version", "request_"), CASES)
def test_whole_frames_with_headers(key: int, version: int, request_: bool) -> None:
    sample = Sample(key, version, request_)
    correlation_id = 0x5EED0000 + version
    theirs = sample.kafka_python_object()
    if request_:
        theirs.with_header(correlation_id=correlation_id, client_id="client-\u03bb")
        frames = FrameDecoder(1 << 20).feed(bytes(theirs.encode(header=True, framed=True)))
        assert len(frames) == 1
        parsed = parse_request(frames[0])
        assert (parsed.api_key, parsed.api_version, parsed.correlation_id) == (key, version, correlation_id)
        assert parsed.header.client_id == "client-\u03bb"
        assert parsed.header.header_version == (2 if SUPPORTED_APIS[key].is_flexible(version) else 1)
        assert_matches(parsed.body, sample.ours, sample.struct, version, sample.name)

        ours = encode_request(key, version, correlation_id, "client-\u03bb", sample.ours)
        decoded = sample.cls.decode(ours, version=version, header=True, framed=True)
        assert decoded.header.request_api_key == key
        assert decoded.header.request_api_version == version
        assert decoded.header.correlation_id == correlation_id
        assert decoded.header.client_id == "client-\u03bb"
        assert from_kafka_python(sample.struct, decoded, version) == sample.values
    else:
        theirs.with_header(correlation_id=correlation_id)
        frame = bytes(theirs.encode(header=True, framed=True))
        got_id, body = parse_response(key, version, frame[4:])
        assert got_id == correlation_id
        assert_matches(body, sample.ours, sample.struct, version, sample.name)

        ours = encode_response_bytes(key, version, correlation_id, sample.ours)
        assert ours == frame
        decoded = sample.cls.decode(ours, version=version, header=True, framed=True)
        assert decoded.header.correlation_id == correlation_id
        assert from_kafka_python(sample.struct, decoded, version) == sample.values


FLEXIBLE_CASES = [case for case in CASES if SUPPORTED_APIS[case.values[0]].is_flexible(case.values[1])]


def _first_nested_struct(body: dict[str, Any]) -> dict[str, Any] | None:
    for value in body.values():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            return value[0]
    return None


@pytest.mark.parametrize(("key", "version", "request_"), FLEXIBLE_CASES)
def test_unknown_tagged_fields_survive_and_kafka_python_sees_them(
    key: int, version: int, request_: bool
) -> None:
    sample = Sample(key, version, request_)
    body = sample.ours
    body["_unknown_tagged_fields"] = {90: b"\x01\x02\x03", 91: b""}
    nested = _first_nested_struct(body)
    if nested is not None:
        nested["_unknown_tagged_fields"] = {77: b"kept"}

    encoded = encode_body(key, version, request_, body)
    decoded = decode_body(key, version, request_, encoded)
    assert decoded["_unknown_tagged_fields"] == {90: b"\x01\x02\x03", 91: b""}
    if nested is not None:
        assert _first_nested_struct(decoded)["_unknown_tagged_fields"] == {77: b"kept"}  # type: ignore[index]
    assert encode_body(key, version, request_, decoded) == encoded

    theirs = sample.cls.decode(encoded, version=version)
    assert theirs.unknown_tags == {"_90": b"\x01\x02\x03", "_91": b""}
    assert from_kafka_python(sample.struct, theirs, version) == sample.values
