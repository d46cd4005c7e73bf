"""InitProducerId (key 22): a producer id and epoch for idempotent/transactional producers."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=22,
    name="InitProducerId",
    versions="0-6",
    flexible="2+",
    request=[
        Field("transactional_id", "string", "0+", nullable="0+"),
        Field("transaction_timeout_ms", "int32", "0+"),
        Field("producer_id", "int64", "3+", default=-1),
        Field("producer_epoch", "int16", "3+", default=-1),
        Field("enable2_pc", "bool", "6+", default=False),
        Field("keep_prepared_txn", "bool", "6+", default=False),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("producer_id", "int64", "0+", default=-1),
        Field("producer_epoch", "int16", "0+"),
        Field("ongoing_txn_producer_id", "int64", "6+", default=-1),
        Field("ongoing_txn_producer_epoch", "int16", "6+", default=-1),
    ],
)
