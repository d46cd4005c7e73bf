"""CreatePartitions (key 37): add partitions to existing topics."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=37,
    name="CreatePartitions",
    versions="0-3",
    flexible="2+",
    request=[
        Field("topics", "[]CreatePartitionsTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("count", "int32", "0+"),
            Field("assignments", "[]CreatePartitionsAssignment", "0+", nullable="0+", fields=[
                Field("broker_ids", "[]int32", "0+"),
            ]),
        ]),
        Field("timeout_ms", "int32", "0+"),
        Field("validate_only", "bool", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", "[]CreatePartitionsTopicResult", "0+", fields=[
            Field("name", "string", "0+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+", default=None),
        ]),
    ],
)
