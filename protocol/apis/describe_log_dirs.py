"""DescribeLogDirs (key 35): each log dir of a broker, its replicas and, from v4, its room.

v0 is served although Kafka 4 dropped it (KIP-896): the JBOD tools of Kafka 1.x to 3.x send it.
"""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=35,
    name="DescribeLogDirs",
    versions="0-4",
    flexible="2+",
    request=[
        Field("topics", "[]DescribableLogDirTopic", "0+", nullable="0+", fields=[
            Field("topic", "string", "0+"),
            Field("partitions", "[]int32", "0+"),
        ]),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "3+"),
        Field("results", "[]DescribeLogDirsResult", "0+", fields=[
            Field("error_code", "int16", "0+"),
            Field("log_dir", "string", "0+"),
            Field("topics", "[]DescribeLogDirsTopic", "0+", fields=[
                Field("name", "string", "0+"),
                Field("partitions", "[]DescribeLogDirsPartition", "0+", fields=[
                    Field("partition_index", "int32", "0+"),
                    Field("partition_size", "int64", "0+"),
                    Field("offset_lag", "int64", "0+"),
                    Field("is_future_key", "bool", "0+"),
                ]),
            ]),
            Field("total_bytes", "int64", "4+", default=-1),
            Field("usable_bytes", "int64", "4+", default=-1),
            # v5 (KIP-1066 cordoning) is not served; declared so messages have Kafka's shape.
            Field("is_cordoned", "bool", "5+", default=False),
        ]),
    ],
)
