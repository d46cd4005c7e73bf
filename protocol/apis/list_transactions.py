"""ListTransactions (key 66): the transactions this coordinator owns, filtered."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=66,
    name="ListTransactions",
    versions="0-2",
    flexible="0+",
    request=[
        Field("state_filters", "[]string", "0+"),
        Field("producer_id_filters", "[]int64", "0+"),
        Field("duration_filter", "int64", "1+", default=-1),
        Field("transactional_id_pattern", "string", "2+", nullable="2+", default=None),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("unknown_state_filters", "[]string", "0+"),
        Field("transaction_states", "[]TransactionState", "0+", fields=[
            Field("transactional_id", "string", "0+"),
            Field("producer_id", "int64", "0+"),
            Field("transaction_state", "string", "0+"),
        ]),
    ],
)
