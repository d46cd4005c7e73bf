"""Fetch: record data of partitions, served from the segment files, with long polling. A
read_committed consumer (isolation_level 1, v4+) reads up to the last stable offset and is told
the aborted transactions in what it got, whose records it drops.

Fetch sessions (KIP-227) are declined by answering session id 0, so every request is a full
fetch; clients handle that as Kafka specifies.
"""

from __future__ import annotations

from minikafka.replica.replica_manager import FetchRequestPartition
from minikafka.replica.replica_selector import ClientMetadata
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import from_a_broker, may_on_topic
from minikafka.server.handlers.leader_hints import current_leader, node_endpoints
from minikafka.server.metrics import BYTES_OUT
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.fetch import (
    FetchableTopicResponse,
    FetchRequestView,
    FetchResponse,
    FetchTopicView,
    PartitionData,
)

READ_COMMITTED = 1
# KIP-951: the refusals whose answer names the partition's leader (Kafka's two).
_HINTED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


async def handle(request: Request[FetchRequestView], ctx: BrokerContext) -> FetchResponse:
    body = request.body
    by_id = request.api_version >= 13
    replica_id = body.replica_id if request.api_version <= 14 else body.replica_state.replica_id
    read_committed = request.api_version >= 4 and body.isolation_level == READ_COMMITTED
    # A follower's fetch needs CLUSTER_ACTION (it is a broker), a consumer's READ on each topic.
    follower_allowed = replica_id < 0 or from_a_broker(ctx)
    wanted: list[FetchRequestPartition] = []
    layout: list[tuple[FetchTopicView, str | None, list[tuple[int, int | ErrorCode | None]]]] = []
    for topic in body.topics:
        if by_id:
            state = ctx.metadata.topic_by_id(topic.topic_id)
            name = state.name if state is not None else None
        else:
            name = topic.topic
        allowed = follower_allowed and (name is None or replica_id >= 0
                                        or may_on_topic(ctx, AclOperation.READ, name))
        slots: list[tuple[int, int | ErrorCode | None]] = []
        for p in topic.partitions:
            if not allowed:
                slots.append((p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if name is None:
                slots.append((p.partition, None))
                continue
            slots.append((p.partition, len(wanted)))
            wanted.append(FetchRequestPartition(name, p.partition, p.fetch_offset, p.partition_max_bytes,
                                                p.current_leader_epoch, replica_id, read_committed,
                                                p.last_fetched_epoch if request.api_version >= 12 else -1))
        layout.append((topic, name, slots))
    max_bytes = min(body.max_bytes, ctx.config["fetch.max.bytes"])
    # KIP-392: a consumer's Fetch v11+ may be served by a follower, and sent to one by the leader.
    client = ClientMetadata(body.rack_id, ctx.listener_name) if request.api_version >= 11 and replica_id < 0 else None
    results = await ctx.replica_manager.fetch(wanted, body.max_wait_ms, body.min_bytes, max_bytes, client)
    throttle_ms = 0
    if replica_id < 0:
        size = sum(r.size for r in results)
        BYTES_OUT.inc(size)
        throttle_ms = ctx.quotas.fetched(ctx.session.principal.name, request, size)
    responses: list[FetchableTopicResponse] = []
    leaders: set[int] = set()
    for topic, name, slots in layout:
        partitions: list[PartitionData] = []
        for index, slot in slots:
            if slot is None or isinstance(slot, ErrorCode):
                partitions.append({"partition_index": index, "error_code": slot or ErrorCode.UNKNOWN_TOPIC_ID,
                                   "high_watermark": -1, "aborted_transactions": None, "records": b""})
                continue
            result = results[slot]
            partitions.append({
                "partition_index": index,
                "error_code": result.error,
                "high_watermark": result.high_watermark,
                "last_stable_offset": result.last_stable_offset,
                "log_start_offset": result.log_start_offset,
                "aborted_transactions": None if result.error else [
                    {"producer_id": t.producer_id, "first_offset": t.first_offset}
                    for t in result.aborted_transactions or ()],
                "preferred_read_replica": result.preferred_read_replica,
                "records": result.records if result.records is not None else b"",
            })
            if result.error in _HINTED and name is not None \
                    and (current := current_leader(ctx, name, index)) is not None:
                partitions[-1]["current_leader"] = {"leader_id": current[0], "leader_epoch": current[1]}
                leaders.add(current[0])
            if result.diverging_epoch is not None:
                epoch, end_offset = result.diverging_epoch
                partitions[-1]["diverging_epoch"] = {"epoch": epoch, "end_offset": end_offset}
        responses.append({"topic": name or "", "topic_id": topic.topic_id, "partitions": partitions})
    return {"throttle_time_ms": throttle_ms, "error_code": ErrorCode.NONE, "session_id": 0, "responses": responses,
            "node_endpoints": node_endpoints(ctx, leaders)}
