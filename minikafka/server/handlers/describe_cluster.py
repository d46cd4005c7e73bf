"""DescribeCluster: the brokers, the controller and the cluster id."""

from __future__ import annotations

from minikafka.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import authorized_operations
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.describe_cluster import DescribeClusterRequestView, DescribeClusterResponse

BROKERS_ENDPOINT = 1
NOT_REQUESTED = -(2**31)
CLUSTER_OPERATIONS = (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                      AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                      AclOperation.DESCRIBE)


async def handle(request: Request[DescribeClusterRequestView], ctx: BrokerContext) -> DescribeClusterResponse:
    if request.api_version >= 1 and request.body.endpoint_type != BROKERS_ENDPOINT:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                "error_message": "only the brokers endpoint type is served", "cluster_id": ctx.controller.cluster_id,
                "endpoint_type": request.body.endpoint_type, "brokers": []}
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "endpoint_type": BROKERS_ENDPOINT,
        "cluster_id": ctx.controller.cluster_id,
        "controller_id": ctx.metadata.controller_id,
        "brokers": [{"broker_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack, "is_fenced": False}
                    for b in ctx.metadata.brokers(ctx.listener_name).values()],
        "cluster_authorized_operations": authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME,
                                                               CLUSTER_OPERATIONS)
        if request.body.include_cluster_authorized_operations else NOT_REQUESTED,
    }
