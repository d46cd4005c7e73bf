"""DescribeTransactions (key 65): the state of transactional ids this coordinator owns."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=65,
    name="DescribeTransactions",
    versions="0",
    flexible="0+",
    request=[
        Field("transactional_ids", "[]string", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("transaction_states", "[]TransactionState", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("transactional_id", "string", "0+"),
            Field("transaction_state", "string", "0+"),
            Field("transaction_timeout_ms", "int32", "0+"),
            Field("transaction_start_time_ms", "int64", "0+"),
            Field("producer_id", "int64", "0+"),
            Field("producer_epoch", "int16", "0+"),
            Field("topics", "[]TopicData", "0+", fields=[
                Field("topic", "string", "0+"),
                Field("partitions", "[]int32", "0+"),
            ]),
        ]),
    ],
)
