"""UpdateMetadata (controller -> broker): the live brokers and every partition's state, as the
metadata this broker gives its clients."""

from __future__ import annotations

import uuid

from minikafka.metadata_cache import BrokerInfo, PartitionMetadata
from minikafka.server.context import BrokerContext
from minikafka.server.controller_commands import PartitionUpdate
from minikafka.server.handlers.controller_requests import refusal
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.update_metadata import (
    UpdateMetadataPartitionStateView,
    UpdateMetadataRequestView,
    UpdateMetadataResponse,
)

ZERO_UUID = uuid.UUID(int=0)


def _brokers(request: Request[UpdateMetadataRequestView]) -> list[BrokerInfo]:
    found: list[BrokerInfo] = []
    for broker in request.body.live_brokers:
        if request.api_version == 0:
            endpoints = {"PLAINTEXT": (broker.v0_host, broker.v0_port)}
        else:
            endpoints = {(e.listener or _PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT")): (e.host, e.port)
                         for e in broker.endpoints}
        found.append(BrokerInfo(broker.id, endpoints, broker.rack))
    return found


_PROTOCOL_NAMES = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


def _partitions(request: Request[UpdateMetadataRequestView]) -> list[PartitionUpdate]:
    body = request.body
    if request.api_version <= 4:
        groups: list[tuple[str, uuid.UUID, list[UpdateMetadataPartitionStateView]]] = [
            (s.topic_name, ZERO_UUID, [s]) for s in body.ungrouped_partition_states]
    else:
        groups = [(t.topic_name, t.topic_id or ZERO_UUID, t.partition_states) for t in body.topic_states]
    return [PartitionUpdate(topic, topic_id, s.partition_index, PartitionMetadata(
                s.leader, s.leader_epoch, tuple(s.replicas), tuple(s.isr), tuple(s.get("offline_replicas") or ())))
            for topic, topic_id, states in groups for s in states]


async def handle(request: Request[UpdateMetadataRequestView], ctx: BrokerContext) -> UpdateMetadataResponse:
    body = request.body
    error = refusal(request.api_key, ctx, body.controller_id, body.controller_epoch, body.broker_epoch)
    if error is not None:
        return {"error_code": error}
    assert ctx.commands is not None
    ctx.commands.update_metadata(_brokers(request), body.controller_id, _partitions(request))
    return {"error_code": ErrorCode.NONE}
