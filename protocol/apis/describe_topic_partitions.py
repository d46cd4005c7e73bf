"""DescribeTopicPartitions (key 75, KIP-966): topics and their partitions, paged by a cursor and
a partition limit, which Kafka 4's AdminClient asks instead of Metadata for `describeTopics`."""

from ..schema import ApiDefinition, Field

_CURSOR = [
    Field("topic_name", "string", "0+"),
    Field("partition_index", "int32", "0+"),
]

API = ApiDefinition(
    key=75,
    name="DescribeTopicPartitions",
    versions="0",
    flexible="0+",
    request=[
        Field("topics", "[]TopicRequest", "0+", fields=[
            Field("name", "string", "0+"),
        ]),
        Field("response_partition_limit", "int32", "0+", default=2000),
        Field("cursor", "Cursor", "0+", nullable="0+", default=None, fields=_CURSOR),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("topics", "[]DescribeTopicPartitionsResponseTopic", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("name", "string", "0+", nullable="0+"),
            Field("topic_id", "uuid", "0+"),
            Field("is_internal", "bool", "0+", default=False),
            Field("partitions", "[]DescribeTopicPartitionsResponsePartition", "0+", fields=[
                Field("error_code", "int16", "0+"),
                Field("partition_index", "int32", "0+"),
                Field("leader_id", "int32", "0+"),
                Field("leader_epoch", "int32", "0+", default=-1),
                Field("replica_nodes", "[]int32", "0+"),
                Field("isr_nodes", "[]int32", "0+"),
                Field("eligible_leader_replicas", "[]int32", "0+", nullable="0+", default=None),
                Field("last_known_elr", "[]int32", "0+", nullable="0+", default=None),
                Field("offline_replicas", "[]int32", "0+"),
            ]),
            Field("topic_authorized_operations", "int32", "0+", default=-2147483648),
        ]),
        Field("next_cursor", "Cursor", "0+", nullable="0+", default=None, fields=_CURSOR),
    ],
)
