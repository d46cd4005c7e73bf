"""Fetch (key 1): read record batches from partitions (consumers and followers)."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=1,
    name="Fetch",
    versions="4-18",
    flexible="12+",
    request=[
        Field("cluster_id", "string", "12+", nullable="12+", tag=0, default=None),
        Field("replica_id", "int32", "0-14", default=-1),
        Field("replica_state", "ReplicaState", "15+", tag=1, fields=[
            Field("replica_id", "int32", "15+", default=-1),
            Field("replica_epoch", "int64", "15+", default=-1),
        ]),
        Field("max_wait_ms", "int32", "0+"),
        Field("min_bytes", "int32", "0+"),
        Field("max_bytes", "int32", "3+", default=0x7FFFFFFF),
        Field("isolation_level", "int8", "4+", default=0),
        Field("session_id", "int32", "7+", default=0),
        Field("session_epoch", "int32", "7+", default=-1),
        Field("topics", "[]FetchTopic", "0+", fields=[
            Field("topic", "string", "0-12"),
            Field("topic_id", "uuid", "13+"),
            Field("partitions", "[]FetchPartition", "0+", fields=[
                Field("partition", "int32", "0+"),
                Field("current_leader_epoch", "int32", "9+", default=-1),
                Field("fetch_offset", "int64", "0+"),
                Field("last_fetched_epoch", "int32", "12+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Field("partition_max_bytes", "int32", "0+"),
                Field("replica_directory_id", "uuid", "17+", tag=0),
                Field("high_watermark", "int64", "18+", tag=1, default=0x7FFFFFFFFFFFFFFF),
            ]),
        ]),
        Field("forgotten_topics_data", "[]ForgottenTopic", "7+", fields=[
            Field("topic", "string", "7-12"),
            Field("topic_id", "uuid", "13+"),
            Field("partitions", "[]int32", "7+"),
        ]),
        Field("rack_id", "string", "11+", default=""),
    ],
    response=[
        Field("throttle_time_ms", "int32", "1+"),
        Field("error_code", "int16", "7+"),
        Field("session_id", "int32", "7+", default=0),
        Field("responses", "[]FetchableTopicResponse", "0+", fields=[
            Field("topic", "string", "0-12"),
            Field("topic_id", "uuid", "13+"),
            Field("partitions", "[]PartitionData", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("error_code", "int16", "0+"),
                Field("high_watermark", "int64", "0+"),
                Field("last_stable_offset", "int64", "4+", default=-1),
                Field("log_start_offset", "int64", "5+", default=-1),
                Field("diverging_epoch", "EpochEndOffset", "12+", tag=0, fields=[
                    Field("epoch", "int32", "12+", default=-1),
                    Field("end_offset", "int64", "12+", default=-1),
                ]),
                Field("current_leader", "LeaderIdAndEpoch", "12+", tag=1, fields=[
                    Field("leader_id", "int32", "12+", default=-1),
                    Field("leader_epoch", "int32", "12+", default=-1),
                ]),
                Field("snapshot_id", "SnapshotId", "12+", tag=2, fields=[
                    Field("end_offset", "int64", "0+", default=-1),
                    Field("epoch", "int32", "0+", default=-1),
                ]),
                Field("aborted_transactions", "[]AbortedTransaction", "4+", nullable="4+", fields=[
                    Field("producer_id", "int64", "4+"),
                    Field("first_offset", "int64", "4+"),
                ]),
                Field("preferred_read_replica", "int32", "11+", default=-1),
                Field("records", "records", "0+", nullable="0+"),
            ]),
        ]),
        Field("node_endpoints", "[]NodeEndpoint", "16+", tag=0, fields=[
            Field("node_id", "int32", "16+"),
            Field("host", "string", "16+"),
            Field("port", "int32", "16+"),
            Field("rack", "string", "16+", nullable="16+", default=None),
        ]),
    ],
)
