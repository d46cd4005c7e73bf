"""ApiVersions (key 18): which APIs and versions the broker supports."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=18,
    name="ApiVersions",
    versions="0-4",
    flexible="3+",
    request=[
        Field("client_software_name", "string", "3+"),
        Field("client_software_version", "string", "3+"),
    ],
    response=[
        Field("error_code", "int16", "0+"),
        Field("api_keys", "[]ApiVersion", "0+", fields=[
            Field("api_key", "int16", "0+"),
            Field("min_version", "int16", "0+"),
            Field("max_version", "int16", "0+"),
        ]),
        Field("throttle_time_ms", "int32", "1+"),
        Field("supported_features", "[]SupportedFeatureKey", "3+", tag=0, fields=[
            Field("name", "string", "3+"),
            Field("min_version", "int16", "3+"),
            Field("max_version", "int16", "3+"),
        ]),
        Field("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
        Field("finalized_features", "[]FinalizedFeatureKey", "3+", tag=2, fields=[
            Field("name", "string", "3+"),
            Field("max_version_level", "int16", "3+"),
            Field("min_version_level", "int16", "3+"),
        ]),
        Field("zk_migration_ready", "bool", "3+", tag=3, default=False),
    ],
)
