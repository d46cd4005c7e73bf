"""WriteTxnMarkers (key 27, transaction coordinator -> partition leaders): write the commit or
abort markers of transactions."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=27,
    name="WriteTxnMarkers",
    versions="1-2",
    flexible="1+",
    request=[
        Field("markers", "[]WritableTxnMarker", "0+", fields=[
            Field("producer_id", "int64", "0+"),
            Field("producer_epoch", "int16", "0+"),
            Field("transaction_result", "bool", "0+"),
            Field("topics", "[]WritableTxnMarkerTopic", "0+", fields=[
                Field("name", "string", "0+"),
                Field("partition_indexes", "[]int32", "0+"),
            ]),
            Field("coordinator_epoch", "int32", "0+"),
            Field("transaction_version", "int8", "2+", default=0),
        ]),
    ],
    response=[
        Field("markers", "[]WritableTxnMarkerResult", "0+", fields=[
            Field("producer_id", "int64", "0+"),
            Field("topics", "[]WritableTxnMarkerTopicResult", "0+", fields=[
                Field("name", "string", "0+"),
                Field("partitions", "[]WritableTxnMarkerPartitionResult", "0+", fields=[
                    Field("partition_index", "int32", "0+"),
                    Field("error_code", "int16", "0+"),
                ]),
            ]),
        ]),
    ],
)
