"""minikafka's sans-IO Kafka wire protocol: bytes in, messages out.

Imports nothing from minikafka and does no I/O; see `protocol.framing` for the byte
stream, `protocol.messages` for requests and responses, `protocol.errors` for codes.
"""

from .errors import ErrorCode
from .framing import FrameDecoder, FrameError, FrameTooLarge, MalformedFrame, ProtocolError, frame
from .messages import (
    API_VERSIONS_KEY,
    SUPPORTED_APIS,
    ApiSpec,
    DecodeError,
    EncodeError,
    FileRegion,
    MalformedRequest,
    MalformedResponse,
    Message,
    Request,
    RequestError,
    RequestHeader,
    UnknownApi,
    UnsupportedVersion,
    api_version_entries,
    decode_body,
    encode_api_versions_fallback,
    encode_body,
    encode_request,
    encode_response,
    encode_response_bytes,
    message_schema,
    parse_request,
    parse_response,
)

__all__ = [
    "API_VERSIONS_KEY",
    "SUPPORTED_APIS",
    "ApiSpec",
    "DecodeError",
    "EncodeError",
    "ErrorCode",
    "FileRegion",
    "FrameDecoder",
    "FrameError",
    "FrameTooLarge",
    "MalformedFrame",
    "MalformedRequest",
    "MalformedResponse",
    "Message",
    "ProtocolError",
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
    "frame",
    "message_schema",
    "parse_request",
    "parse_response",
]
