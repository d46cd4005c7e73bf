"""Produce (key 0): append record batches to partitions."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=0,
    name="Produce",
    versions="3-13",
    flexible="9+",
    request=[
        Field("transactional_id", "string", "3+", nullable="3+", default=None),
        Field("acks", "int16", "0+"),
        Field("timeout_ms", "int32", "0+"),
        Field("topic_data", "[]TopicProduceData", "0+", fields=[
            Field("name", "string", "0-12"),
            Field("topic_id", "uuid", "13+"),
            Field("partition_data", "[]PartitionProduceData", "0+", fields=[
                Field("index", "int32", "0+"),
                Field("records", "records", "0+", nullable="0+"),
            ]),
        ]),
    ],
    response=[
        Field("responses", "[]TopicProduceResponse", "0+", fields=[
            Field("name", "string", "0-12"),
            Field("topic_id", "uuid", "13+"),
            Field("partition_responses", "[]PartitionProduceResponse", "0+", fields=[
                Field("index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("base_offset", "int64", "0+"),
                Field("log_append_time_ms", "int64", "2+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Field("record_errors", "[]BatchIndexAndErrorMessage", "8+", fields=[
                    Field("batch_index", "int32", "8+"),
                    Field("batch_index_error_message", "string", "8+", nullable="8+", default=None),
                ]),
                Field("error_message", "string", "8+", nullable="8+", default=None),
                Field("current_leader", "LeaderIdAndEpoch", "10+", tag=0, fields=[
                    Field("leader_id", "int32", "10+", default=-1),
                    Field("leader_epoch", "int32", "10+", default=-1),
                ]),
            ]),
        ]),
        Field("throttle_time_ms", "int32", "1+", default=0),
        Field("node_endpoints", "[]NodeEndpoint", "10+", tag=0, fields=[
            Field("node_id", "int32", "10+"),
            Field("host", "string", "10+"),
            Field("port", "int32", "10+"),
            Field("rack", "string", "10+", nullable="10+", default=None),
        ]),
    ],
)
