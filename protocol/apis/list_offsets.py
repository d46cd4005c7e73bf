"""ListOffsets (key 2): the offset for a timestamp, or the earliest/latest offset."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=2,
    name="ListOffsets",
    versions="1-11",
    flexible="6+",
    request=[
        Field("replica_id", "int32", "0+"),
        Field("isolation_level", "int8", "2+"),
        Field("topics", "[]ListOffsetsTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]ListOffsetsPartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("current_leader_epoch", "int32", "4+", default=-1),
                Field("timestamp", "int64", "0+"),
                Field("max_num_offsets", "int32", "0", default=1),
            ]),
        ]),
        Field("timeout_ms", "int32", "10+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "2+"),
        Field("topics", "[]ListOffsetsTopicResponse", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]ListOffsetsPartitionResponse", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("old_style_offsets", "[]int64", "0"),
                Field("timestamp", "int64", "1+", default=-1),
                Field("offset", "int64", "1+", default=-1),
                Field("leader_epoch", "int32", "4+", default=-1),
            ]),
        ]),
    ],
)
