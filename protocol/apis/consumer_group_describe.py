"""ConsumerGroupDescribe (key 69): epochs, assignor and members (with their current and target
assignments) of KIP-848 consumer groups."""

from ..schema import ApiDefinition, Field

_ASSIGNMENT = [
    Field("topic_partitions", "[]TopicPartitions", "0+", fields=[
        Field("topic_id", "uuid", "0+"),
        Field("topic_name", "string", "0+"),
        Field("partitions", "[]int32", "0+"),
    ]),
]

API = ApiDefinition(
    key=69,
    name="ConsumerGroupDescribe",
    versions="0-1",
    flexible="0+",
    request=[
        Field("group_ids", "[]string", "0+"),
        Field("include_authorized_operations", "bool", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("groups", "[]DescribedGroup", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("error_message", "string", "0+", nullable="0+", default=None),
            Field("group_id", "string", "0+"),
            Field("group_state", "string", "0+"),
            Field("group_epoch", "int32", "0+"),
            Field("assignment_epoch", "int32", "0+"),
            Field("assignor_name", "string", "0+"),
            Field("members", "[]Member", "0+", fields=[
                Field("member_id", "string", "0+"),
                Field("instance_id", "string", "0+", nullable="0+", default=None),
                Field("rack_id", "string", "0+", nullable="0+", default=None),
                Field("member_epoch", "int32", "0+"),
                Field("client_id", "string", "0+"),
                Field("client_host", "string", "0+"),
                Field("subscribed_topic_names", "[]string", "0+"),
                Field("subscribed_topic_regex", "string", "0+", nullable="0+", default=None),
                Field("assignment", "Assignment", "0+", fields=_ASSIGNMENT),
                Field("target_assignment", "Assignment", "0+", fields=_ASSIGNMENT),
                Field("member_type", "int8", "1+", default=-1),
            ]),
            Field("authorized_operations", "int32", "0+", default=-2147483648),
        ]),
    ],
)
