"""AlterPartition (key 56, KIP-497 and KIP-903): a partition leader asks the controller to
change the partition's ISR, instead of writing ZooKeeper itself (Kafka brokers from
inter.broker.protocol.version 2.7-IV2)."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=56,
    name="AlterPartition",
    versions="0-3",
    flexible="0+",
    request=[
        Field("broker_id", "int32", "0+"),
        Field("broker_epoch", "int64", "0+", default=-1),
        Field("topics", "[]TopicData", "0+", fields=[
            Field("topic_name", "string", "0-1"),
            Field("topic_id", "uuid", "2+"),
            Field("partitions", "[]PartitionData", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("leader_epoch", "int32", "0+"),
                Field("new_isr", "[]int32", "0-2"),
                Field("new_isr_with_epochs", "[]BrokerState", "3+", fields=[
                    Field("broker_id", "int32", "3+"),
                    Field("broker_epoch", "int64", "3+", default=-1),
                ]),
                Field("leader_recovery_state", "int8", "1+", default=0),
                Field("partition_epoch", "int32", "0+"),
            ]),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("topics", "[]TopicData", "0+", fields=[
            Field("topic_name", "string", "0-1"),
            Field("topic_id", "uuid", "2+"),
            Field("partitions", "[]PartitionData", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("leader_id", "int32", "0+"),
                Field("leader_epoch", "int32", "0+"),
                Field("isr", "[]int32", "0+"),
                Field("leader_recovery_state", "int8", "1+", default=0),
                Field("partition_epoch", "int32", "0+"),
            ]),
        ]),
    ],
)
