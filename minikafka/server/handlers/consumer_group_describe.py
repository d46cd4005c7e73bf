"""ConsumerGroupDescribe: epochs, assignor and members (current and target assignments) of
KIP-848 consumer groups."""

from __future__ import annotations

from collections.abc import Mapping

from minikafka.group.consumer_group import ConsumerGroup, Partitions, TopicId, TopicInfo
from minikafka.security.acl import AclOperation, ResourceType
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import authorized_operations, may_on_group
from minikafka.server.handlers.describe_groups import GROUP_OPERATIONS, NOT_REQUESTED
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.consumer_group_describe import (
    Assignment,
    ConsumerGroupDescribeRequestView,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    Member,
)

CONSUMER_MEMBER_TYPE = 1  # a member speaking the consumer protocol (0 would be a classic member)


def _assignment(partitions: Partitions, topics: Mapping[TopicId, TopicInfo]) -> Assignment:
    return {"topic_partitions": [
        {"topic_id": topic, "topic_name": topics[topic].name if topic in topics else "", "partitions": sorted(parts)}
        for topic, parts in sorted(partitions.items(), key=lambda item: str(item[0]))]}


def _members(group: ConsumerGroup) -> list[Member]:
    members: list[Member] = []
    for member_id, meta in group.members.items():
        current = group.member_assignment(member_id)
        members.append({
            "member_id": member_id, "instance_id": meta.instance_id, "rack_id": meta.rack_id,
            "member_epoch": current.member_epoch, "client_id": meta.client_id, "client_host": meta.client_host,
            "subscribed_topic_names": list(meta.subscribed_topic_names),
            "subscribed_topic_regex": meta.subscribed_topic_regex,
            "assignment": _assignment(current.assigned, group.topics),
            "target_assignment": _assignment(group.targets.get(member_id, {}), group.topics),
            "member_type": CONSUMER_MEMBER_TYPE})
    return members


async def handle(request: Request[ConsumerGroupDescribeRequestView],
                 ctx: BrokerContext) -> ConsumerGroupDescribeResponse:
    body = request.body
    described: list[DescribedGroup] = []
    for group_id in body.group_ids:
        operations = authorized_operations(ctx, ResourceType.GROUP, group_id, GROUP_OPERATIONS) \
            if body.include_authorized_operations else NOT_REQUESTED
        entry: DescribedGroup = {"error_code": ErrorCode.NONE, "error_message": None, "group_id": group_id,
                                 "group_state": "", "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "",
                                 "members": [], "authorized_operations": operations}
        if not may_on_group(ctx, AclOperation.DESCRIBE, group_id):
            entry["error_code"] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            entry["error_message"] = "Group authorization failed."
        else:
            consumer_groups = ctx.groups.consumer_groups
            error, message, group = consumer_groups.describe(group_id)
            if group is None:
                entry["error_code"], entry["error_message"] = error, message
            else:
                entry["group_state"] = group.state().value
                entry["group_epoch"], entry["assignment_epoch"] = group.epoch, group.target_epoch
                entry["assignor_name"] = consumer_groups.assignor_name(group)
                entry["members"] = _members(group)
        described.append(entry)
    return {"throttle_time_ms": 0, "groups": described}
