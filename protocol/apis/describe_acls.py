"""DescribeAcls (key 29): the ACLs a filter matches, grouped by resource pattern."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=29,
    name="DescribeAcls",
    versions="1-3",
    flexible="2+",
    request=[
        Field("resource_type_filter", "int8", "0+"),
        Field("resource_name_filter", "string", "0+", nullable="0+"),
        Field("pattern_type_filter", "int8", "1+", default=3),
        Field("principal_filter", "string", "0+", nullable="0+"),
        Field("host_filter", "string", "0+", nullable="0+"),
        Field("operation", "int8", "0+"),
        Field("permission_type", "int8", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("resources", "[]DescribeAclsResource", "0+", fields=[
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("pattern_type", "int8", "1+", default=3),
            Field("acls", "[]AclDescription", "0+", fields=[
                Field("principal", "string", "0+"),
                Field("host", "string", "0+"),
                Field("operation", "int8", "0+"),
                Field("permission_type", "int8", "0+"),
            ]),
        ]),
    ],
)
