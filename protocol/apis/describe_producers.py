"""DescribeProducers (key 61, KIP-664): the producers with state on each partition, for finding
hanging transactions (`kafka-transactions describe-producers`)."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=61,
    name="DescribeProducers",
    versions="0",
    flexible="0+",
    request=[
        Field("topics", "[]TopicRequest", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partition_indexes", "[]int32", "0+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("topics", "[]TopicResponse", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]PartitionResponse", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("error_message", "string", "0+", nullable="0+", default=None),
                Field("active_producers", "[]ProducerState", "0+", fields=[
                    Field("producer_id", "int64", "0+"),
                    Field("producer_epoch", "int32", "0+"),
                    Field("last_sequence", "int32", "0+", default=-1),
                    Field("last_timestamp", "int64", "0+", default=-1),
                    Field("coordinator_epoch", "int32", "0+"),
                    Field("current_txn_start_offset", "int64", "0+", default=-1),
                ]),
            ]),
        ]),
    ],
)
