"""SaslAuthenticate (key 36): one SASL token each way; v1+ tell the session's lifetime (KIP-368)."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=36,
    name="SaslAuthenticate",
    versions="0-2",
    flexible="2+",
    request=[
        Field("auth_bytes", "bytes", "0+"),
    ],
    response=[
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("auth_bytes", "bytes", "0+"),
        Field("session_lifetime_ms", "int64", "1+", default=0),
    ],
)
