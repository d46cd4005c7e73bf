"""ElectLeaders (key 43): preferred (or unclean) leader election for partitions."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=43,
    name="ElectLeaders",
    versions="0-2",
    flexible="2+",
    request=[
        Field("election_type", "int8", "1+"),
        Field("topic_partitions", "[]TopicPartitions", "0+", nullable="0+", fields=[
            Field("topic", "string", "0+"),
            Field("partitions", "[]int32", "0+"),
        ]),
        Field("timeout_ms", "int32", "0+", default=60000),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "1+"),
        Field("replica_election_results", "[]ReplicaElectionResult", "0+", fields=[
            Field("topic", "string", "0+"),
            Field("partition_result", "[]PartitionResult", "0+", fields=[
                Field("partition_id", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+"),
            ]),
        ]),
    ],
)
