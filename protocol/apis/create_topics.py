"""CreateTopics (key 19): create topics with a partition count or explicit assignments."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=19,
    name="CreateTopics",
    versions="2-7",
    flexible="5+",
    request=[
        Field("topics", "[]CreatableTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("num_partitions", "int32", "0+"),
            Field("replication_factor", "int16", "0+"),
            Field("assignments", "[]CreatableReplicaAssignment", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("broker_ids", "[]int32", "0+"),
            ]),
            Field("configs", "[]CreatableTopicConfig", "0+", fields=[
                Field("name", "string", "0+"),
                Field("value", "string", "0+", nullable="0+"),
            ]),
        ]),
        Field("timeout_ms", "int32", "0+", default=60000),
        Field("validate_only", "bool", "1+", default=False),
    ],
    response=[
        Field("throttle_time_ms", "int32", "2+"),
        Field("topics", "[]CreatableTopicResult", "0+", fields=[
            Field("name", "string", "0+"),
            Field("topic_id", "uuid", "7+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "1+", nullable="0+"),
            Field("topic_config_error_code", "int16", "5+", tag=0),
            Field("num_partitions", "int32", "5+", default=-1),
            Field("replication_factor", "int16", "5+", default=-1),
            Field("configs", "[]CreatableTopicConfigs", "5+", nullable="5+", fields=[
                Field("name", "string", "5+"),
                Field("value", "string", "5+", nullable="5+"),
                Field("read_only", "bool", "5+"),
                Field("config_source", "int8", "5+", default=-1),
                Field("is_sensitive", "bool", "5+"),
            ]),
        ]),
    ],
)
