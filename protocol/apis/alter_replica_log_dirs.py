"""AlterReplicaLogDirs (key 34): move replicas to other log dirs of the same broker (KIP-113).

v0 is served although Kafka 4 dropped it (KIP-896): the JBOD tools of Kafka 1.x to 3.x send it.
"""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=34,
    name="AlterReplicaLogDirs",
    versions="0-2",
    flexible="2+",
    request=[
        Field("dirs", "[]AlterReplicaLogDir", "0+", fields=[
            Field("path", "string", "0+"),
            Field("topics", "[]AlterReplicaLogDirTopic", "0+", fields=[
                Field("name", "string", "0+"),
                Field("partitions", "[]int32", "0+"),
            ]),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", "[]AlterReplicaLogDirTopicResult", "0+", fields=[
            Field("topic_name", "string", "0+"),
            Field("partitions", "[]AlterReplicaLogDirPartitionResult", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
            ]),
        ]),
    ],
)
