"""ConsumerGroupHeartbeat (key 68): a member of a KIP-848 consumer group joins, heartbeats,
acknowledges its owned partitions and leaves; the coordinator answers its epoch and assignment."""

from ..schema import ApiDefinition, Field

_TOPIC_PARTITIONS = [
    Field("topic_id", "uuid", "0+"),
    Field("partitions", "[]int32", "0+"),
]

API = ApiDefinition(
    key=68,
    name="ConsumerGroupHeartbeat",
    versions="0-1",
    flexible="0+",
    request=[
        Field("group_id", "string", "0+"),
        Field("member_id", "string", "0+"),
        Field("member_epoch", "int32", "0+"),
        Field("instance_id", "string", "0+", nullable="0+", default=None),
        Field("rack_id", "string", "0+", nullable="0+", default=None),
        Field("rebalance_timeout_ms", "int32", "0+", default=-1),
        Field("subscribed_topic_names", "[]string", "0+", nullable="0+", default=None),
        Field("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
        Field("server_assignor", "string", "0+", nullable="0+", default=None),
        Field("topic_partitions", "[]TopicPartitions", "0+", nullable="0+", default=None, fields=_TOPIC_PARTITIONS),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("member_id", "string", "0+", nullable="0+", default=None),
        Field("member_epoch", "int32", "0+"),
        Field("heartbeat_interval_ms", "int32", "0+"),
        Field("assignment", "Assignment", "0+", nullable="0+", default=None, fields=[
            Field("topic_partitions", "[]TopicPartitions", "0+", fields=_TOPIC_PARTITIONS),
        ]),
    ],
)
