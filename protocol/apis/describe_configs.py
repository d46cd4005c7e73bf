"""DescribeConfigs (key 32): the configuration of topics and brokers."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=32,
    name="DescribeConfigs",
    versions="1-4",
    flexible="4+",
    request=[
        Field("resources", "[]DescribeConfigsResource", "0+", fields=[
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("configuration_keys", "[]string", "0+", nullable="0+"),
        ]),
        Field("include_synonyms", "bool", "1+", default=False),
        Field("include_documentation", "bool", "3+", default=False),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("results", "[]DescribeConfigsResult", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+"),
            Field("resource_type", "int8", "0+"),
            Field("resource_name", "string", "0+"),
            Field("configs", "[]DescribeConfigsResourceResult", "0+", fields=[
                Field("name", "string", "0+"),
                Field("value", "string", "0+", nullable="0+"),
                Field("read_only", "bool", "0+"),
                Field("config_source", "int8", "1+", default=-1),
                Field("is_default", "bool", "0"),
                Field("is_sensitive", "bool", "0+"),
                Field("synonyms", "[]DescribeConfigsSynonym", "1+", fields=[
                    Field("name", "string", "1+"),
                    Field("value", "string", "1+", nullable="0+"),
                    Field("source", "int8", "1+"),
                ]),
                Field("config_type", "int8", "3+", default=0),
                Field("documentation", "string", "3+", nullable="0+"),
            ]),
        ]),
    ],
)
