"""DeleteGroups: delete empty groups with their committed offsets."""

from __future__ import annotations

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.delete_groups import DeleteGroupsRequestView, DeleteGroupsResponse


async def handle(request: Request[DeleteGroupsRequestView], ctx: BrokerContext) -> DeleteGroupsResponse:
    wanted = list(dict.fromkeys(request.body.groups_names))
    allowed = [group_id for group_id in wanted if may_on_group(ctx, AclOperation.DELETE, group_id)]
    results = ctx.groups.delete_groups(allowed)
    return {"throttle_time_ms": 0, "results": [
        {"group_id": group_id, "error_code": results.get(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)}
        for group_id in wanted]}
