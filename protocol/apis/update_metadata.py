"""UpdateMetadata (key 6): the controller tells every broker the live brokers and partition states."""

from ..schema import ApiDefinition, Field


def _partition_state(topic_name_versions: str) -> list[Field]:
    return [
        Field("topic_name", "string", topic_name_versions),
        Field("partition_index", "int32", "0+"),
        Field("controller_epoch", "int32", "0+"),
        Field("leader", "int32", "0+"),
        Field("leader_epoch", "int32", "0+"),
        Field("isr", "[]int32", "0+"),
        Field("zk_version", "int32", "0+"),
        Field("replicas", "[]int32", "0+"),
        Field("offline_replicas", "[]int32", "4+"),
    ]


API = ApiDefinition(
    key=6,
    name="UpdateMetadata",
    versions="0-8",
    flexible="6+",
    request=[
        Field("controller_id", "int32", "0+"),
        Field("is_kraft_controller", "bool", "8+", default=False),
        # Full (2), incremental (1) or unknown (0), for a KRaft controller during a ZooKeeper
        # migration (KIP-866); tagged, so it trails the body and is left out when 0.
        Field("type", "int8", "8+", tag=0, default=0),
        Field("controller_epoch", "int32", "0+"),
        Field("broker_epoch", "int64", "5+", default=-1),
        Field("ungrouped_partition_states", "[]UpdateMetadataPartitionState", "0-4", fields=_partition_state("0-4")),
        Field("topic_states", "[]UpdateMetadataTopicState", "5+", fields=[
            Field("topic_name", "string", "5+"),
            Field("topic_id", "uuid", "7+"),
            Field("partition_states", "[]UpdateMetadataPartitionState", "5+", fields=_partition_state("0-4")),
        ]),
        Field("live_brokers", "[]UpdateMetadataBroker", "0+", fields=[
            Field("id", "int32", "0+"),
            Field("v0_host", "string", "0"),
            Field("v0_port", "int32", "0"),
            Field("endpoints", "[]UpdateMetadataEndpoint", "1+", fields=[
                Field("port", "int32", "1+"),
                Field("host", "string", "1+"),
                Field("listener", "string", "3+"),
                Field("security_protocol", "int16", "1+"),
            ]),
            Field("rack", "string", "2+", nullable="0+"),
        ]),
    ],
    response=[
        Field("error_code", "int16", "0+"),
    ],
)
