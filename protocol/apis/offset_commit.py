"""OffsetCommit (key 8): store a group's committed offsets."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=8,
    name="OffsetCommit",
    versions="2-10",
    flexible="8+",
    request=[
        Field("group_id", "string", "0+"),
        Field("generation_id_or_member_epoch", "int32", "1+", default=-1),
        Field("member_id", "string", "1+"),
        Field("group_instance_id", "string", "7+", nullable="7+", default=None),
        Field("retention_time_ms", "int64", "2-4", default=-1),
        Field("topics", "[]OffsetCommitRequestTopic", "0+", fields=[
            Field("name", "string", "0-9"),
            Field("topic_id", "uuid", "10+"),
            Field("partitions", "[]OffsetCommitRequestPartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("committed_offset", "int64", "0+"),
                Field("committed_leader_epoch", "int32", "6+", default=-1),
                Field("commit_timestamp", "int64", "1", default=-1),
                Field("committed_metadata", "string", "0+", nullable="0+"),
            ]),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "3+"),
        Field("topics", "[]OffsetCommitResponseTopic", "0+", fields=[
            Field("name", "string", "0-9"),
            Field("topic_id", "uuid", "10+"),
            Field("partitions", "[]OffsetCommitResponsePartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
            ]),
        ]),
    ],
)
