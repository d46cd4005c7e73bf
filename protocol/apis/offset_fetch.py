"""OffsetFetch (key 9): read back a group's committed offsets."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=9,
    name="OffsetFetch",
    versions="1-10",
    flexible="6+",
    request=[
        Field("group_id", "string", "0-7"),
        Field("topics", "[]OffsetFetchRequestTopic", "0-7", nullable="2-7", fields=[
            Field("name", "string", "0-7"),
            Field("partition_indexes", "[]int32", "0-7"),
        ]),
        Field("groups", "[]OffsetFetchRequestGroup", "8+", fields=[
            Field("group_id", "string", "8+"),
            Field("member_id", "string", "9+", nullable="9+", default=None),
            Field("member_epoch", "int32", "9+", default=-1),
            Field("topics", "[]OffsetFetchRequestTopics", "8+", nullable="8+", fields=[
                Field("name", "string", "8-9"),
                Field("topic_id", "uuid", "10+"),
                Field("partition_indexes", "[]int32", "8+"),
            ]),
        ]),
        Field("require_stable", "bool", "7+", default=False),
    ],
    response=[
        Field("throttle_time_ms", "int32", "3+"),
        Field("topics", "[]OffsetFetchResponseTopic", "0-7", fields=[
            Field("name", "string", "0-7"),
            Field("partitions", "[]OffsetFetchResponsePartition", "0-7", fields=[
                Field("partition_index", "int32", "0-7"),
                Field("committed_offset", "int64", "0-7"),
                Field("committed_leader_epoch", "int32", "5-7", default=-1),
                Field("metadata", "string", "0-7", nullable="0-7"),
                Field("error_code", "int16", "0-7"),
            ]),
        ]),
        Field("error_code", "int16", "2-7", default=0),
        Field("groups", "[]OffsetFetchResponseGroup", "8+", fields=[
            Field("group_id", "string", "8+"),
            Field("topics", "[]OffsetFetchResponseTopics", "8+", fields=[
                Field("name", "string", "8-9"),
                Field("topic_id", "uuid", "10+"),
                Field("partitions", "[]OffsetFetchResponsePartitions", "8+", fields=[
                    Field("partition_index", "int32", "8+"),
                    Field("committed_offset", "int64", "8+"),
                    Field("committed_leader_epoch", "int32", "8+", default=-1),
                    Field("metadata", "string", "8+", nullable="8+"),
                    Field("error_code", "int16", "8+"),
                ]),
            ]),
            Field("error_code", "int16", "8+", default=0),
        ]),
    ],
)
