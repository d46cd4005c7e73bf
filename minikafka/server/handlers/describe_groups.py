"""DescribeGroups: state, protocol and members (with metadata and assignment when Stable) of groups."""

from __future__ import annotations

from minikafka.security.acl import AclOperation, ResourceType
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import authorized_operations, may_on_group
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequestView,
    DescribeGroupsResponse,
)

NOT_REQUESTED = -(2**31)
# Everything a group allows (KIP-430).
GROUP_OPERATIONS = (AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE)


async def handle(request: Request[DescribeGroupsRequestView], ctx: BrokerContext) -> DescribeGroupsResponse:
    body = request.body
    described: list[DescribedGroup] = []
    for group_id in body.groups:
        operations = authorized_operations(ctx, ResourceType.GROUP, group_id, GROUP_OPERATIONS) \
            if body.include_authorized_operations else NOT_REQUESTED
        if not may_on_group(ctx, AclOperation.DESCRIBE, group_id):
            described.append({"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "error_message": None,
                              "group_id": group_id, "group_state": "", "protocol_type": "", "protocol_data": "",
                              "members": [], "authorized_operations": operations})
            continue
        error, description = ctx.groups.describe_group(group_id)
        if description is not None:
            members: list[DescribedGroupMember] = [
                {"member_id": m["member_id"], "group_instance_id": m["group_instance_id"], "client_id": m["client_id"],
                 "client_host": m["client_host"], "member_metadata": m["member_metadata"],
                 "member_assignment": m["member_assignment"]} for m in description["members"]]
            described.append({"error_code": ErrorCode.NONE, "error_message": None,
                              "group_id": description["group_id"], "group_state": description["group_state"],
                              "protocol_type": description["protocol_type"],
                              "protocol_data": description["protocol_data"], "members": members,
                              "authorized_operations": operations})
            continue
        entry: DescribedGroup = {"error_code": error, "error_message": None, "group_id": group_id,
                                 "group_state": "", "protocol_type": "", "protocol_data": "", "members": [],
                                 "authorized_operations": operations}
        if error == ErrorCode.NONE:
            # Before v6 an unknown group is described as Dead; v6 names the error (KIP-1043).
            if request.api_version >= 6:
                entry["error_code"] = ErrorCode.GROUP_ID_NOT_FOUND
                entry["error_message"] = f"Group {group_id} not found."
            else:
                entry["group_state"] = "Dead"
        described.append(entry)
    return {"throttle_time_ms": 0, "groups": described}
