"""LeaderAndIsr (key 4): the controller tells a broker which partitions it leads or follows."""

from ..schema import ApiDefinition, Field


def _partition_state(topic_name_versions: str) -> list[Field]:
    return [
        Field("topic_name", "string", topic_name_versions),
        Field("partition_index", "int32", "0+"),
        Field("controller_epoch", "int32", "0+"),
        Field("leader", "int32", "0+"),
        Field("leader_epoch", "int32", "0+"),
        Field("isr", "[]int32", "0+"),
        Field("partition_epoch", "int32", "0+"),
        Field("replicas", "[]int32", "0+"),
        Field("adding_replicas", "[]int32", "3+"),
        Field("removing_replicas", "[]int32", "3+"),
        Field("is_new", "bool", "1+", default=False),
        Field("leader_recovery_state", "int8", "6+", default=0),
    ]


API = ApiDefinition(
    key=4,
    name="LeaderAndIsr",
    versions="0-7",
    flexible="4+",
    request=[
        Field("controller_id", "int32", "0+"),
        Field("is_kraft_controller", "bool", "7+", default=False),
        Field("controller_epoch", "int32", "0+"),
        Field("broker_epoch", "int64", "2+", default=-1),
        Field("type", "int8", "5+", default=0),
        Field("ungrouped_partition_states", "[]LeaderAndIsrPartitionState", "0-1", fields=_partition_state("0-1")),
        Field("topic_states", "[]LeaderAndIsrTopicState", "2+", fields=[
            Field("topic_name", "string", "2+"),
            Field("topic_id", "uuid", "5+"),
            Field("partition_states", "[]LeaderAndIsrPartitionState", "2+", fields=_partition_state("0-1")),
        ]),
        Field("live_leaders", "[]LeaderAndIsrLiveLeader", "0+", fields=[
            Field("broker_id", "int32", "0+"),
            Field("host_name", "string", "0+"),
            Field("port", "int32", "0+"),
        ]),
    ],
    response=[
        Field("error_code", "int16", "0+"),
        Field("partition_errors", "[]LeaderAndIsrPartitionError", "0-4", fields=[
            Field("topic_name", "string", "0-4"),
            Field("partition_index", "int32", "0+"),
            Field("error_code", "int16", "0+"),
        ]),
        Field("topics", "[]LeaderAndIsrTopicError", "5+", fields=[
            Field("topic_id", "uuid", "5+"),
            Field("partition_errors", "[]LeaderAndIsrPartitionError", "5+", fields=[
                Field("topic_name", "string", "0-4"),
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
            ]),
        ]),
    ],
)
