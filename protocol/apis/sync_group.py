"""SyncGroup (key 14): the leader hands out assignments; every member receives its own."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=14,
    name="SyncGroup",
    versions="0-5",
    flexible="4+",
    request=[
        Field("group_id", "string", "0+"),
        Field("generation_id", "int32", "0+"),
        Field("member_id", "string", "0+"),
        Field("group_instance_id", "string", "3+", nullable="3+", default=None),
        Field("protocol_type", "string", "5+", nullable="5+", default=None),
        Field("protocol_name", "string", "5+", nullable="5+", default=None),
        Field("assignments", "[]SyncGroupRequestAssignment", "0+", fields=[
            Field("member_id", "string", "0+"),
            Field("assignment", "bytes", "0+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
        Field("protocol_type", "string", "5+", nullable="5+", default=None),
        Field("protocol_name", "string", "5+", nullable="5+", default=None),
        Field("assignment", "bytes", "0+"),
    ],
)
