"""DescribeGroups (key 15): state, protocol and members of groups."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=15,
    name="DescribeGroups",
    versions="0-6",
    flexible="5+",
    request=[
        Field("groups", "[]string", "0+"),
        Field("include_authorized_operations", "bool", "3+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("groups", "[]DescribedGroup", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "6+", nullable="6+", default=None),
            Field("group_id", "string", "0+"),
            Field("group_state", "string", "0+"),
            Field("protocol_type", "string", "0+"),
            Field("protocol_data", "string", "0+"),
            Field("members", "[]DescribedGroupMember", "0+", fields=[
                Field("member_id", "string", "0+"),
                Field("group_instance_id", "string", "4+", nullable="4+", default=None),
                Field("client_id", "string", "0+"),
                Field("client_host", "string", "0+"),
                Field("member_metadata", "bytes", "0+"),
                Field("member_assignment", "bytes", "0+"),
            ]),
            Field("authorized_operations", "int32", "3+", default=-2147483648),
        ]),
    ],
)
