"""DeleteTopics (key 20): delete topics by name (or by id from v6)."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=20,
    name="DeleteTopics",
    versions="1-6",
    flexible="4+",
    request=[
        Field("topics", "[]DeleteTopicState", "6+", fields=[
            Field("name", "string", "6+", nullable="6+", default=None),
            Field("topic_id", "uuid", "6+"),
        ]),
        Field("topic_names", "[]string", "0-5"),
        Field("timeout_ms", "int32", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("responses", "[]DeletableTopicResult", "0+", fields=[
            Field("name", "string", "0+", nullable="6+"),
            Field("topic_id", "uuid", "6+"),
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "5+", nullable="5+", default=None),
        ]),
    ],
)
