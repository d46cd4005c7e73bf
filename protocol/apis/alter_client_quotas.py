"""AlterClientQuotas (key 49, KIP-546): set or remove client quotas (produce/fetch byte rates,
request percentage...) of users, client ids and their defaults."""

from ..schema import ApiDefinition, Field

_ENTITY = [
    Field("entity_type", "string", "0+"),
    Field("entity_name", "string", "0+", nullable="0+"),
]

API = ApiDefinition(
    key=49,
    name="AlterClientQuotas",
    versions="0-1",
    flexible="1+",
    request=[
        Field("entries", "[]EntryData", "0+", fields=[
            Field("entity", "[]EntityData", "0+", fields=_ENTITY),
            Field("ops", "[]OpData", "0+", fields=[
                Field("key", "string", "0+"),
                Field("value", "float64", "0+"),
                Field("remove", "bool", "0+"),
            ]),
        ]),
        Field("validate_only", "bool", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("entries", "[]EntryData", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("entity", "[]EntityData", "0+", fields=_ENTITY),
        ]),
    ],
)
