"""EndTxn (key 26): commit or abort a producer's transaction."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=26,
    name="EndTxn",
    versions="0-5",
    flexible="3+",
    request=[
        Field("transactional_id", "string", "0+"),
        Field("producer_id", "int64", "0+"),
        Field("producer_epoch", "int16", "0+"),
        Field("committed", "bool", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("producer_id", "int64", "5+", default=-1),
        Field("producer_epoch", "int16", "5+", default=-1),
    ],
)
