"""AddPartitionsToTxn (key 24): add partitions to a producer's transaction (v4+: many
transactions at once, or only check that partitions are in them, KIP-890)."""

from ..schema import ApiDefinition, Field

_TOPIC = [
    Field("name", "string", "0+"),
    Field("partitions", "[]int32", "0+"),
]
_TOPIC_RESULT = [
    Field("name", "string", "0+"),
    Field("results_by_partition", "[]AddPartitionsToTxnPartitionResult", "0+", fields=[
        Field("partition_index", "int32", "0+"),
        Field("partition_error_code", "int16", "0+"),
    ]),
]

API = ApiDefinition(
    key=24,
    name="AddPartitionsToTxn",
    versions="0-5",
    flexible="3+",
    request=[
        Field("transactions", "[]AddPartitionsToTxnTransaction", "4+", fields=[
            Field("transactional_id", "string", "4+"),
            Field("producer_id", "int64", "4+"),
            Field("producer_epoch", "int16", "4+"),
            Field("verify_only", "bool", "4+", default=False),
            Field("topics", "[]AddPartitionsToTxnTopic", "4+", fields=_TOPIC),
        ]),
        Field("v3_and_below_transactional_id", "string", "0-3"),
        Field("v3_and_below_producer_id", "int64", "0-3"),
        Field("v3_and_below_producer_epoch", "int16", "0-3"),
        Field("v3_and_below_topics", "[]AddPartitionsToTxnTopic", "0-3", fields=_TOPIC),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "4+"),
        Field("results_by_transaction", "[]AddPartitionsToTxnResult", "4+", fields=[
            Field("transactional_id", "string", "4+"),
            Field("topic_results", "[]AddPartitionsToTxnTopicResult", "4+", fields=_TOPIC_RESULT),
        ]),
        Field("results_by_topic_v3_and_below", "[]AddPartitionsToTxnTopicResult", "0-3", fields=_TOPIC_RESULT),
    ],
)
