"""Requests and responses of the supported APIs: headers, bodies, whole frames.

The server side uses `parse_request` on each frame payload from `FrameDecoder` and
`encode_response` / `encode_response_bytes` for its answers; clients, tools and tests
use `encode_request` / `parse_response`. Every body goes through a construct schema
compiled once per (api, version, request|response) and cached (`message_schema`).

Functions here keep no state besides those caches, so any thread or task may call them.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import struct
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from construct import Compiled

from .api_keys import ApiKey
from .apis import all_apis
from .errors import ErrorCode
from .framing import ProtocolError
from .primitives import (
    Array,
    DecodeError,
    Encoded,
    EncodeError,
    FileRegion,
    Int16,
    Int32,
    Message,
    MessageField,
    MessageStruct,
    NullableString,
    RegionWriter,
    TaggedFields,
)
from .schema import ApiDefinition, message_struct

__all__ = [
    "API_VERSIONS_KEY",
    "SUPPORTED_APIS",
    "ApiKey",
    "ApiSpec",
    "DecodeError",
    "EncodeError",
    "FileRegion",
    "MalformedRequest",
    "MalformedResponse",
    "Message",
    "Request",
    "RequestError",
    "RequestHeader",
    "UnknownApi",
    "UnsupportedVersion",
    "api_version_entries",
    "decode_body",
    "encode_api_versions_fallback",
    "encode_body",
    "encode_request",
    "encode_response",
    "encode_response_bytes",
    "message_schema",
    "parse_request",
    "parse_response",
]

# Compared on every response, so a plain int: comparing with an IntEnum member costs more.
API_VERSIONS_KEY = int(ApiKey.API_VERSIONS)
_SIZE = struct.Struct(">i")
_MAX_FRAME = 0x7FFFFFFF
# Errors the compiled parsers can raise on bytes that are not a valid message:
# short reads surface as struct.error, bad UTF-8 and bad UUIDs as ValueError.
_DECODE_ERRORS = (DecodeError, struct.error, ValueError)
# Errors the compiled builders raise on values of the wrong type or range.
_ENCODE_ERRORS = (EncodeError, struct.error, TypeError, ValueError, AttributeError, OverflowError)


@dataclasses.dataclass(frozen=True)
class ApiSpec:
    """What the broker supports of one API; `first_flexible` is None when no version is."""

    key: int
    name: str
    min_version: int
    max_version: int
    first_flexible: int | None

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.first_flexible is not None and version >= self.first_flexible


_DEFINITIONS: dict[int, ApiDefinition] = {api.key: api for api in all_apis()}

SUPPORTED_APIS: dict[int, ApiSpec] = {
    api.key: ApiSpec(api.key, api.name, api.min_version, api.max_version, api.first_flexible)
    for api in _DEFINITIONS.values()
}


@dataclasses.dataclass
class RequestHeader:
    """A parsed request header. `header_version` is 1, or 2 for flexible API versions
    (which adds `tagged_fields`, kept as {tag: raw bytes})."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int = 1
    tagged_fields: dict[int, bytes] = dataclasses.field(default_factory=dict)


BodyT = TypeVar("BodyT", bound=Mapping[str, Any])


@dataclasses.dataclass
class Request(Generic[BodyT]):
    """One parsed request: its header and its body, a `Message`.

    A handler names the body's shape as `Request[HeartbeatRequestView]` (protocol.typed); the
    body is still the plain Message the decoder made.
    """

    header: RequestHeader
    body: BodyT
    # The frame's size without its size prefix, what Kafka's produce quota counts.
    size: int = 0

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


class RequestError(ProtocolError):
    """A request that cannot be served. `header` is the parsed header when the header
    itself was readable (so the server can still answer), else None."""

    def __init__(self, message: str, header: RequestHeader | None = None) -> None:
        super().__init__(message)
        self.header = header


class UnknownApi(RequestError):
    """The request's API key is not in SUPPORTED_APIS."""


class UnsupportedVersion(RequestError):
    """The request's version is outside the supported range of its API."""


class MalformedRequest(RequestError):
    """Truncated data, impossible lengths, bad UTF-8..."""


class MalformedResponse(ProtocolError):
    """A response payload that does not decode as the expected API version."""


# --------------------------------------------------------------------------------------
# Compiled schemas.
# --------------------------------------------------------------------------------------


def _parse(schema: Compiled, stream: io.BytesIO) -> Any:
    # The compiled functions never consult construct's context (see primitives), so
    # they are called directly instead of paying for parse_stream's context setup.
    return schema.parsefunc(stream, None)


def _build(schema: Compiled, value: Any, stream: io.BytesIO) -> None:
    schema.buildfunc(value, stream, None)


def _definition(api_key: int, version: int) -> ApiDefinition:
    definition = _DEFINITIONS.get(api_key)
    if definition is None:
        raise ValueError(f"unsupported api key {api_key}")
    if not definition.min_version <= version <= definition.max_version:
        raise ValueError(
            f"{definition.name} v{version} is outside the supported versions "
            f"{definition.min_version}-{definition.max_version}"
        )
    return definition


@functools.cache
def message_struct_for(api_key: int, version: int, request: bool) -> MessageStruct:
    """The uncompiled schema of one message version (for inspection and tests)."""
    definition = _definition(api_key, version)
    kind = "Request" if request else "Response"
    fields = definition.request if request else definition.response
    return message_struct(
        f"{definition.name}{kind}", fields, version, definition.is_flexible(version)
    )


@functools.cache
def message_schema(api_key: int, version: int, request: bool) -> Compiled:
    """The compiled construct schema of one message version, built on first use."""
    return message_struct_for(api_key, version, request).compile()


_REQUEST_HEADER_V1 = MessageStruct(
    "RequestHeader",
    [
        MessageField("api_key", Int16, 0),
        MessageField("api_version", Int16, 0),
        MessageField("correlation_id", Int32, 0),
        # Stays a non-compact string in header v2 too, so that any broker can read
        # the client id of an ApiVersions request whatever its version.
        MessageField("client_id", NullableString, None),
    ],
    tagged=None,
).compile()
_RESPONSE_HEADER_V0 = MessageStruct(
    "ResponseHeader", [MessageField("correlation_id", Int32, 0)], tagged=None
).compile()
_RESPONSE_HEADER_V1 = MessageStruct(
    "ResponseHeader", [MessageField("correlation_id", Int32, 0)], tagged=[]
).compile()
_TAGGED_FIELDS = TaggedFields().compile()


def header_schemas() -> dict[str, Compiled]:
    """The compiled header schemas by name (for inspection and tests)."""
    return {
        "request_header_v1": _REQUEST_HEADER_V1,
        "response_header_v0": _RESPONSE_HEADER_V0,
        "response_header_v1": _RESPONSE_HEADER_V1,
        "tagged_fields": _TAGGED_FIELDS,
    }


def _response_header_version(api_key: int, version: int) -> int:
    # ApiVersions answers with header v0 in every version, so that a client that
    # does not yet know what the broker supports can always read the reply.
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if _DEFINITIONS[api_key].is_flexible(version) else 0


# --------------------------------------------------------------------------------------
# Bodies.
# --------------------------------------------------------------------------------------


def decode_body(api_key: int, version: int, request: bool, data: bytes) -> Message:
    """Decode a whole body (no header, no size prefix); raises DecodeError."""
    schema = message_schema(api_key, version, request)
    stream = io.BytesIO(data)
    try:
        body = _parse(schema, stream)
    except _DECODE_ERRORS as exc:
        raise DecodeError(str(exc)) from exc
    if stream.tell() != len(data):
        raise DecodeError(f"{len(data) - stream.tell()} bytes left after the body")
    return body


@functools.cache
def _element_schema(api_key: int, version: int, request: bool, field: str) -> Compiled:
    struct = message_struct_for(api_key, version, request)
    wire = next(f.wire for f in struct.fields if f.name == field)
    if not isinstance(wire, Array) or not isinstance(wire.element, MessageStruct):
        raise ValueError(f"{struct.struct_name} v{version}: {field} is no array of structs")
    return wire.element.compile()


def encode_element(api_key: int, version: int, request: bool, field: str, value: Mapping[str, Any]) -> Encoded:
    """``value`` as one element of the message's top-level array of structs ``field``, encoded
    for ``version``: it may stand for the element in bodies of that version only."""
    try:
        return Encoded(_element_schema(api_key, version, request, field).build(value))
    except _ENCODE_ERRORS as exc:
        raise _encode_error(api_key, version, request, exc) from exc


def encode_body(api_key: int, version: int, request: bool, body: Mapping[str, Any]) -> bytes:
    """Encode a body alone (no header, no size prefix); raises EncodeError."""
    schema = message_schema(api_key, version, request)
    stream = io.BytesIO()
    try:
        _build(schema, body, stream)
    except _ENCODE_ERRORS as exc:
        raise _encode_error(api_key, version, request, exc) from exc
    return stream.getvalue()


def _encode_error(api_key: int, version: int, request: bool, exc: Exception) -> EncodeError:
    kind = "request" if request else "response"
    name = _DEFINITIONS[api_key].name
    return EncodeError(f"cannot encode {name} v{version} {kind}: {type(exc).__name__}: {exc}")


# --------------------------------------------------------------------------------------
# Server side.
# --------------------------------------------------------------------------------------


def parse_request(payload: bytes) -> Request[Message]:
    """Parse one request frame payload (without its size prefix)."""
    stream = io.BytesIO(payload)
    try:
        fields = _parse(_REQUEST_HEADER_V1, stream)
    except _DECODE_ERRORS as exc:
        raise MalformedRequest(f"unreadable request header: {exc}") from exc
    header = RequestHeader(
        api_key=fields["api_key"],
        api_version=fields["api_version"],
        correlation_id=fields["correlation_id"],
        client_id=fields["client_id"],
    )
    spec = SUPPORTED_APIS.get(header.api_key)
    if spec is None:
        raise UnknownApi(f"unknown api key {header.api_key}", header)
    version = header.api_version
    if not spec.supports(version):
        raise UnsupportedVersion(
            f"{spec.name} v{version} is not supported "
            f"(supported: {spec.min_version}-{spec.max_version})",
            header,
        )
    try:
        if spec.is_flexible(version):
            header.header_version = 2
            header.tagged_fields = _parse(_TAGGED_FIELDS, stream)
        body = _parse(message_schema(spec.key, version, True), stream)
    except _DECODE_ERRORS as exc:
        raise MalformedRequest(f"{spec.name} v{version} request: {exc}", header) from exc
    # Bytes after a complete body are ignored, as Apache Kafka's parser does: librdkafka 2.16
    # sends three of them after an all-topics Metadata v13 request.
    return Request(header, body, len(payload))


_strict_field_names = False


def check_field_names(enabled: bool) -> None:
    """Make every encode refuse a field name that no version of the message has (a misspelt
    key would otherwise be encoded as its default). The test suite turns it on; the hot path
    stays without the walk."""
    global _strict_field_names
    _strict_field_names = enabled


@functools.cache
def _field_names(api_key: int, request: bool) -> dict[str, Any]:
    """{field name: the same for its struct's fields, or None} over every version."""
    definition = _definition(api_key, SUPPORTED_APIS[api_key].min_version)

    def tree(fields: Any) -> dict[str, Any]:
        return {f.name: (tree(f.fields) if f.fields else None) for f in fields}
    return tree(definition.request if request else definition.response)


def unknown_field_names(api_key: int, request: bool, body: Mapping[str, Any]) -> list[str]:
    """Paths of the keys of ``body`` that no version of the message has."""
    found: list[str] = []

    def walk(names: dict[str, Any], value: Any, path: str) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if key == "_unknown_tagged_fields":
                    continue
                if key not in names:
                    found.append(path + key)
                elif names[key] is not None:
                    walk(names[key], item, f"{path}{key}.")
        elif isinstance(value, list | tuple):
            for item in value:
                walk(names, item, path)
    walk(_field_names(api_key, request), body, "")
    return found


def _check_names(api_key: int, api_version: int, request: bool, body: Mapping[str, Any]) -> None:
    unknown = unknown_field_names(api_key, request, body)
    if unknown:
        kind = "request" if request else "response"
        raise EncodeError(f"{SUPPORTED_APIS[api_key].name} v{api_version} {kind} has no field named "
                          f"{', '.join(unknown)}")


def _encode_response_into(
    writer: io.BytesIO, api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]
) -> None:
    if _strict_field_names:
        _check_names(api_key, api_version, False, body)
    if api_key == API_VERSIONS_KEY and body.get("error_code", 0):
        # Clients read an ApiVersions error as a v0 body, whatever they asked for.
        api_version = 0
    schema = message_schema(api_key, api_version, False)
    writer.write(b"\x00\x00\x00\x00")
    header = {"correlation_id": correlation_id}
    try:
        if _response_header_version(api_key, api_version):
            _build(_RESPONSE_HEADER_V1, header, writer)
        else:
            _build(_RESPONSE_HEADER_V0, header, writer)
        _build(schema, body, writer)
    except _ENCODE_ERRORS as exc:
        raise _encode_error(api_key, api_version, False, exc) from exc


def _patch_size(writer: io.BytesIO, size: int) -> None:
    if size > _MAX_FRAME:
        raise EncodeError(f"response of {size} bytes does not fit in a frame")
    writer.seek(0)
    writer.write(_SIZE.pack(size))


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]
) -> list[bytes | FileRegion]:
    """The whole framed response, cut around FileRegions given as `records`.

    Returns [bytes] when no FileRegion was given, else alternating
    [bytes, region, bytes, region, ..., bytes] (bytes parts may be empty); the
    leading size prefix counts the regions' sizes.
    """
    writer = RegionWriter()
    _encode_response_into(writer, api_key, api_version, correlation_id, body)
    _patch_size(writer, writer.tell() - 4 + writer.region_bytes())
    return writer.parts()


def encode_response_bytes(
    api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]
) -> bytes:
    """The whole framed response as bytes; a FileRegion in it raises EncodeError."""
    writer = io.BytesIO()
    _encode_response_into(writer, api_key, api_version, correlation_id, body)
    _patch_size(writer, writer.tell() - 4)
    return writer.getvalue()


def api_version_entries() -> list[dict[str, int]]:
    """The `api_keys` array of an ApiVersions response: every supported API."""
    return [
        {"api_key": spec.key, "min_version": spec.min_version, "max_version": spec.max_version}
        for spec in SUPPORTED_APIS.values()
    ]


def encode_api_versions_fallback(correlation_id: int) -> bytes:
    """Kafka's answer to an ApiVersions request of a version it does not support:
    a v0 body with UNSUPPORTED_VERSION and the full list of supported APIs."""
    body = {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": api_version_entries()}
    return encode_response_bytes(API_VERSIONS_KEY, 0, correlation_id, body)


# --------------------------------------------------------------------------------------
# Client side.
# --------------------------------------------------------------------------------------


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: Mapping[str, Any],
    header_tagged_fields: Mapping[int, bytes] | None = None,
) -> bytes:
    """A whole framed request: size, header v1 (v2 for flexible versions), body."""
    definition = _definition(api_key, api_version)
    schema = message_schema(api_key, api_version, True)
    if _strict_field_names:
        _check_names(api_key, api_version, True, body)
    writer = io.BytesIO()
    writer.write(b"\x00\x00\x00\x00")
    header = {
        "api_key": api_key,
        "api_version": api_version,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    try:
        _build(_REQUEST_HEADER_V1, header, writer)
        if definition.is_flexible(api_version):
            _build(_TAGGED_FIELDS, header_tagged_fields, writer)
        _build(schema, body, writer)
    except _ENCODE_ERRORS as exc:
        raise _encode_error(api_key, api_version, True, exc) from exc
    _patch_size(writer, writer.tell() - 4)
    return writer.getvalue()


def parse_response(api_key: int, api_version: int, payload: bytes | memoryview) -> tuple[int, Message]:
    """Parse a response frame payload (without its size prefix) of a request sent as
    `api_version`; returns (correlation_id, body). Raises MalformedResponse."""
    definition = _definition(api_key, api_version)
    stream = io.BytesIO(payload)
    try:
        if _response_header_version(api_key, api_version):
            header = _parse(_RESPONSE_HEADER_V1, stream)
        else:
            header = _parse(_RESPONSE_HEADER_V0, stream)
        if api_key == API_VERSIONS_KEY:
            start = stream.tell()
            (error_code,) = struct.unpack(">h", stream.read(2))
            stream.seek(start)
            if error_code:
                api_version = 0
        body = _parse(message_schema(api_key, api_version, False), stream)
    except _DECODE_ERRORS as exc:
        raise MalformedResponse(f"{definition.name} v{api_version} response: {exc}") from exc
    left = len(payload) - stream.tell()
    if left:
        raise MalformedResponse(
            f"{definition.name} v{api_version} response: {left} bytes left after the body"
        )
    return header["correlation_id"], body
