"""ListGroups (key 16): the groups a coordinator knows, optionally filtered."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=16,
    name="ListGroups",
    versions="0-5",
    flexible="3+",
    request=[
        Field("states_filter", "[]string", "4+"),
        Field("types_filter", "[]string", "5+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
        Field("groups", "[]ListedGroup", "0+", fields=[
            Field("group_id", "string", "0+"),
            Field("protocol_type", "string", "0+"),
            Field("group_state", "string", "4+"),
            Field("group_type", "string", "5+"),
        ]),
    ],
)
