"""DescribeClientQuotas (key 48, KIP-546): the client quotas (produce/fetch byte rates, request
percentage...) set for users, client ids and IPs that match a filter."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=48,
    name="DescribeClientQuotas",
    versions="0-1",
    flexible="1+",
    request=[
        Field("components", "[]ComponentData", "0+", fields=[
            Field("entity_type", "string", "0+"),
            Field("match_type", "int8", "0+"),
            Field("match", "string", "0+", nullable="0+"),
        ]),
        Field("strict", "bool", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("entries", "[]EntryData", "0+", nullable="0+", fields=[
            Field("entity", "[]EntityData", "0+", fields=[
                Field("entity_type", "string", "0+"),
                Field("entity_name", "string", "0+", nullable="0+"),
            ]),
            Field("values", "[]ValueData", "0+", fields=[
                Field("key", "string", "0+"),
                Field("value", "float64", "0+"),
            ]),
        ]),
    ],
)
