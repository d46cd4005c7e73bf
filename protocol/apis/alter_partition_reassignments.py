"""AlterPartitionReassignments (key 45, KIP-455): move partitions' replicas to other brokers, or
cancel a move (null replicas)."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=45,
    name="AlterPartitionReassignments",
    versions="0-1",
    flexible="0+",
    request=[
        Field("timeout_ms", "int32", "0+", default=60000),
        Field("allow_replication_factor_change", "bool", "1+", default=True),
        Field("topics", "[]ReassignableTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]ReassignablePartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("replicas", "[]int32", "0+", nullable="0+", default=None),
            ]),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("allow_replication_factor_change", "bool", "1+", default=True),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("responses", "[]ReassignableTopicResponse", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]ReassignablePartitionResponse", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+"),
            ]),
        ]),
    ],
)
