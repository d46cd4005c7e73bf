"""AlterConfigs (key 33): replace the whole set of dynamic configs of a resource."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=33,
    name="AlterConfigs",
    versions="0-2",
    flexible="2+",
    request=[
        Field("resources", "[]AlterConfigsResource", "0+", fields=[
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("configs", "[]AlterableConfig", "0+", fields=[
                Field("name", "string", "0+"),
                Field("value", "string", "0+", nullable="0+"),
            ]),
        ]),
        Field("validate_only", "bool", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("responses", "[]AlterConfigsResourceResponse", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
        ]),
    ],
)
