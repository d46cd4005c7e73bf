"""ListPartitionReassignments (key 46, KIP-455): the reassignments in progress."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=46,
    name="ListPartitionReassignments",
    versions="0",
    flexible="0+",
    request=[
        Field("timeout_ms", "int32", "0+", default=60000),
        Field("topics", "[]ListPartitionReassignmentsTopics", "0+", nullable="0+", default=None, fields=[
            Field("name", "string", "0+"),
            Field("partition_indexes", "[]int32", "0+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+"),
        Field("topics", "[]OngoingTopicReassignment", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]OngoingPartitionReassignment", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("replicas", "[]int32", "0+"),
                Field("adding_replicas", "[]int32", "0+"),
                Field("removing_replicas", "[]int32", "0+"),
            ]),
        ]),
    ],
)
