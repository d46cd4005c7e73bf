"""SaslHandshake (key 17): the client names its SASL mechanism; the broker lists its own.

v0 is followed by bare SASL tokens in size-prefixed frames, v1 by SaslAuthenticate requests."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=17,
    name="SaslHandshake",
    versions="0-1",
    flexible="none",
    request=[
        Field("mechanism", "string", "0+"),
    ],
    response=[
        Field("error_code", "int16", "0+"),
        Field("mechanisms", "[]string", "0+"),
    ],
)
