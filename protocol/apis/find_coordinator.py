"""FindCoordinator (key 10): which broker coordinates a group (or a transactional id)."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=10,
    name="FindCoordinator",
    versions="0-6",
    flexible="3+",
    request=[
        Field("key", "string", "0-3"),
        Field("key_type", "int8", "1+", default=0),
        Field("coordinator_keys", "[]string", "4+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "0-3"),
        Field("error_message", "string", "1-3", nullable="1-3"),
        Field("node_id", "int32", "0-3"),
        Field("host", "string", "0-3"),
        Field("port", "int32", "0-3"),
        Field("coordinators", "[]Coordinator", "4+", fields=[
            Field("key", "string", "4+"),
            Field("node_id", "int32", "4+"),
            Field("host", "string", "4+"),
            Field("port", "int32", "4+"),
            Field("error_code", "int16", "4+"),
            Field("error_message", "string", "4+", nullable="4+"),
        ]),
    ],
)
