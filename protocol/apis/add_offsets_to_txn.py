"""AddOffsetsToTxn (key 25): add a group's __consumer_offsets partition to a transaction."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=25,
    name="AddOffsetsToTxn",
    versions="0-4",
    flexible="3+",
    request=[
        Field("transactional_id", "string", "0+"),
        Field("producer_id", "int64", "0+"),
        Field("producer_epoch", "int16", "0+"),
        Field("group_id", "string", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
    ],
)
