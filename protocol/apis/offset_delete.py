"""OffsetDelete (key 47): delete a group's committed offsets of some partitions."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=47,
    name="OffsetDelete",
    versions="0",
    flexible="none",
    request=[
        Field("group_id", "string", "0+"),
        Field("topics", "[]OffsetDeleteRequestTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]OffsetDeleteRequestPartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
            ]),
        ]),
    ],
    response=[
        Field("error_code", "int16", "0+"),
        Field("throttle_time_ms", "int32", "0+"),
        Field("topics", "[]OffsetDeleteResponseTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]OffsetDeleteResponsePartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
            ]),
        ]),
    ],
)
