"""DeleteRecords (key 21): move partitions' log start offsets forward."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=21,
    name="DeleteRecords",
    versions="0-2",
    flexible="2+",
    request=[
        Field("topics", "[]DeleteRecordsTopic", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]DeleteRecordsPartition", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("offset", "int64", "0+"),
            ]),
        ]),
        Field("timeout_ms", "int32", "0+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("topics", "[]DeleteRecordsTopicResult", "0+", fields=[
            Field("name", "string", "0+"),
            Field("partitions", "[]DeleteRecordsPartitionResult", "0+", fields=[
                Field("partition_index", "int32", "0+"),
                Field("low_watermark", "int64", "0+"),
                Field("error_code", "int16", "0+"),
            ]),
        ]),
    ],
)
