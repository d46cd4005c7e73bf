"""ListGroups: every group this coordinator knows, optionally filtered by state (v4+) and type (v5+)."""

from __future__ import annotations

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.list_groups import ListedGroup, ListGroupsRequestView, ListGroupsResponse


async def handle(request: Request[ListGroupsRequestView], ctx: BrokerContext) -> ListGroupsResponse:
    body = request.body
    groups = ctx.groups.list_groups(body.states_filter, body.types_filter)
    # DESCRIBE on the cluster lists every group; otherwise those the principal may DESCRIBE.
    if not ctx.session.allowed_on_cluster(AclOperation.DESCRIBE):
        groups = [g for g in groups if may_on_group(ctx, AclOperation.DESCRIBE, g["group_id"])]
    listed: list[ListedGroup] = [
        {"group_id": g["group_id"], "protocol_type": g["protocol_type"], "group_state": g["group_state"],
         "group_type": g["group_type"]} for g in groups]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": listed}
