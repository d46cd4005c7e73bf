"""DescribeCluster (key 60): cluster id, controller and brokers (admin clients)."""

from ..schema import ApiDefinition, Field

API = ApiDefinition(
    key=60,
    name="DescribeCluster",
    versions="0-2",
    flexible="0+",
    request=[
        Field("include_cluster_authorized_operations", "bool", "0+"),
        Field("endpoint_type", "int8", "1+", default=1),
        Field("include_fenced_brokers", "bool", "2+"),
    ],
    response=[
        Field("throttle_time_ms", "int32", "0+"),
        Field("error_code", "int16", "0+"),
        Field("error_message", "string", "0+", nullable="0+", default=None),
        Field("endpoint_type", "int8", "1+", default=1),
        Field("cluster_id", "string", "0+"),
        Field("controller_id", "int32", "0+", default=-1),
        Field("brokers", "[]DescribeClusterBroker", "0+", fields=[
            Field("broker_id", "int32", "0+"),
            Field("host", "string", "0+"),
            Field("port", "int32", "0+"),
            Field("rack", "string", "0+", nullable="0+", default=None),
            Field("is_fenced", "bool", "2+"),
        ]),
        Field("cluster_authorized_operations", "int32", "0+", default=-2147483648),
    ],
)
