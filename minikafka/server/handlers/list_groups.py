"""ListGroups: every group this coordinator knows, optionally filtered by state (v4+) and type (v5+)."""

from __future__ import annotations

from typing import Any

from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_on_group
from protocol import Request
from protocol.errors import ErrorCode


async def handle(request: Request, ctx: BrokerContext) -> dict[str, Any]:
    body = request.body
    groups = ctx.groups.list_groups(body.states_filter, body.types_filter)
    # DESCRIBE on the cluster lists every group; otherwise those the principal may DESCRIBE.
    if not ctx.session.allowed_on_cluster(AclOperation.DESCRIBE):
        groups = [g for g in groups if may_on_group(ctx, AclOperation.DESCRIBE, g["group_id"])]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": groups}
