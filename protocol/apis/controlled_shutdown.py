"""ControlledShutdown (key 7): a broker asks the controller to move its leaderships away before
it stops. Version 0 used a request header without a client id and is not served."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=7,
    name="ControlledShutdown",
    versions="1-3",
    flexible="3+",
    request=[
        Field("broker_id", "int32", "0+"),
        Field("broker_epoch", "int64", "2+", default=-1),
    ],
    response=[
        Field("error_code", "int16", "0+"),
        Field("remaining_partitions", "[]RemainingPartition", "0+", fields=[
            Field("topic_name", "string", "0+"),
            Field("partition_index", "int32", "0+"),
        ]),
    ],
)
