"""CreateAcls (key 30): add ACL bindings."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=30,
    name="CreateAcls",
    versions="1-3",
    flexible="2+",
    request=[
        Field("creations", "[]AclCreation", "0+", fields=[
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("resource_pattern_type", "int8", "1+", default=3),
            Field("principal", "string", "0+"),
            Field("host", "string", "0+"),
            Field("operation", "int8", "0+"),
            Field("permission_type", "int8", "0+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", "[]AclCreationResult", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
        ]),
    ],
)
