"""LeaveGroup (key 13): members leave a group (one by id, or a batch with instance ids)."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=13,
    name="LeaveGroup",
    versions="0-5",
    flexible="4+",
    request=[
        Field("group_id", "string", "0+"),
        Field("member_id", "string", "0-2"),
        Field("members", "[]MemberIdentity", "3+", fields=[
            Field("member_id", "string", "3+"),
            Field("group_instance_id", "string", "3+", nullable="3+", default=None),
            Field("reason", "string", "5+", nullable="5+", default=None),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0+"),
        Field("members", "[]MemberResponse", "3+", fields=[
            Field("member_id", "string", "3+"),
            Field("group_instance_id", "string", "3+", nullable="3+"),
            Field("error_code", "int16", "3+"),
        ]),
    ],
)
