"""Heartbeat (key 12): a member is alive and learns whether a rebalance started."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=12,
    name="Heartbeat",
    versions="0-4",
    flexible="4+",
    request=[
        Field("group_id", "string", "0+"),
        Field("generation_id", "int32", "0+"),
        Field("member_id", "string", "0+"),
        Field("group_instance_id", "string", "3+", nullable="3+", default=None),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
    ],
)
