"""AssignReplicasToDirs (key 73, KIP-858): a broker tells the controller which log dir
(directory id) holds each of its replicas."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=73,
    name="AssignReplicasToDirs",
    versions="0",
    flexible="0+",
    request=[
        Field("broker_id", "int32", "0+"),
        Field("broker_epoch", "int64", "0+", default=-1),
        Field("directories", "[]DirectoryData", "0+", fields=[
            Field("id", "uuid", "0+"),
            Field("topics", "[]TopicData", "0+", fields=[
                Field("topic_id", "uuid", "0+"),
                Field("partitions", "[]PartitionData", "0+", fields=[
                    Field("partition_index", "int32", "0+"),
                ]),
            ]),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("directories", "[]DirectoryData", "0+", fields=[
            Field("id", "uuid", "0+"),
            Field("topics", "[]TopicData", "0+", fields=[
                Field("topic_id", "uuid", "0+"),
                Field("partitions", "[]PartitionData", "0+", fields=[
                    Field("partition_index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                ]),
            ]),
        ]),
    ],
)
