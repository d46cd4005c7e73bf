"""DeleteGroups (key 42): delete empty groups and their committed offsets."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=42,
    name="DeleteGroups",
    versions="0-2",
    flexible="2+",
    request=[
        Field("groups_names", "[]string", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", "[]DeletableGroupResult", "0+", fields=[
            Field("group_id", "string", "0+"),
            Field("error_code", "int16", "0+"),
        ]),
    ],
)
