"""Produce: append record batches to partitions this broker leads. A transactional producer's
first batch in a partition is appended once its coordinator confirms the partition is in the
producer's transaction (KIP-890)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable

from minikafka.replica.replica_manager import ProduceResult, now_ms
from minikafka.security.acl import AclOperation, ResourceType
from minikafka.security.session import Session
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import may_create_topic, may_on_topic
from minikafka.server.handlers.leader_hints import current_leader, node_endpoints
from minikafka.server.repeated_log import RepeatedLog
from protocol import Request
from protocol.errors import ErrorCode
from protocol.typed.produce import (
    PartitionProduceResponse,
    ProduceRequestView,
    ProduceResponse,
    TopicProduceDataView,
    TopicProduceResponse,
)

log = logging.getLogger(__name__)
# Per connection, the append phase of its latest Produce request (done once it has appended).
_appending: weakref.WeakKeyDictionary[Session, asyncio.Future[None]] = weakref.WeakKeyDictionary()
# One line a minute per topic and error, however often clients retry.
refusals = RepeatedLog(log)
Records = memoryview | None  # a partition's batches, as decoded


@contextlib.asynccontextmanager
async def _in_arrival_order(session: Session) -> AsyncIterator[None]:
    """The append phase of one Produce request, entered once the earlier requests of its
    connection have appended. Requests pipelined on a connection are handled side by side, and
    one may wait before it appends (a resigned leader's partitions, a transaction's
    verification): a later request must not reach the log first, or its batches would fail on
    their sequence numbers (Kafka reads no further request from a connection until it has
    answered the last)."""
    earlier = _appending.get(session)
    mine = _appending[session] = asyncio.get_running_loop().create_future()
    try:
        if earlier is not None and not earlier.done():
            await asyncio.shield(earlier)
        yield
    finally:
        mine.set_result(None)
        if _appending.get(session) is mine:
            del _appending[session]


async def handle(request: Request[ProduceRequestView], ctx: BrokerContext) -> ProduceResponse | None:
    body = request.body
    by_id = request.api_version >= 13
    acks = body.acks
    now = now_ms()
    responses: list[TopicProduceResponse] = []
    replicating: list[Awaitable[None]] = []
    layout: list[tuple[TopicProduceDataView, list[tuple[int, ProduceResult]]]] = []
    names: list[str | None] = []

    def append(name: str, index: int, records: Records, verified: tuple[int, object] | None = None) -> ProduceResult:
        result = ctx.replica_manager.append(name, index, records, now, acks=acks, verified=verified)
        if result.error not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            refusals.log(logging.INFO, (name, result.error), "produce to %s-%d refused: %s %s", name, index,
                         result.error.name, result.error_message or "")
        elif result.error == ErrorCode.NONE and acks == -1:
            replicating.append(ctx.replica_manager.wait_for_replication(name, index, result, body.timeout_ms))
        return result

    async def append_all() -> None:
        # (producer id, epoch) -> the partitions whose batch opens that producer's transaction
        # here: (topic, index, records, the slot of its result)
        to_verify: dict[tuple[int, int], list[tuple[str, int, Records, list[tuple[int, ProduceResult]], int]]] = {}
        # A transactional producer needs WRITE on its transactional id, as in Kafka.
        transactional_denied = body.transactional_id is not None and not ctx.session.allowed(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id)
        for topic_data in body.topic_data:
            name = await _topic_name(topic_data, by_id, ctx)
            names.append(name)
            if name is not None:
                await ctx.replica_manager.leadership_confirmed(
                    [(name, data.index) for data in topic_data.partition_data], body.timeout_ms)
            writable = name is not None and may_on_topic(ctx, AclOperation.WRITE, name)
            partitions: list[tuple[int, ProduceResult]] = []
            for data in topic_data.partition_data:
                if acks not in (-1, 0, 1):
                    result = ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS)
                elif transactional_denied:
                    result = ProduceResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                elif name is not None and not writable:
                    result = ProduceResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                elif name is None:
                    result = ProduceResult(ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                elif body.transactional_id is not None and (
                        producer := ctx.txn_verifier.unverified(name, data.index, data.records)) is not None:
                    to_verify.setdefault(producer, []).append((name, data.index, data.records, partitions, len(partitions)))
                    result = ProduceResult()  # until verified
                else:
                    result = append(name, data.index, data.records)
                partitions.append((data.index, result))
            layout.append((topic_data, partitions))
        for (producer_id, epoch), waiting in to_verify.items():
            assert body.transactional_id is not None  # only a transactional producer's batches wait here
            verdicts = await ctx.txn_verifier.verify(body.transactional_id, producer_id, epoch,
                                                     [(name, index) for name, index, *_ in waiting])
            for name, index, records, slots, slot in waiting:
                error, token = verdicts[(name, index)]
                if error == ErrorCode.NONE:
                    slots[slot] = (index, append(name, index, records, (producer_id, token)))
                    continue
                log.info("transactional produce to %s-%d refused by its verification: %s", name, index, error.name)
                slots[slot] = (index, ProduceResult(error, error_message=(
                    f"{name}-{index} is not part of the producer's ongoing transaction"
                    if error == ErrorCode.INVALID_TXN_STATE else None)))

    async with _in_arrival_order(ctx.session):
        if body.transactional_id is None:
            await append_all()
        else:
            async with ctx.txn_verifier.appends_in_order(body.transactional_id):
                await append_all()
    if replicating:
        await asyncio.gather(*replicating)
    throttle_ms = ctx.quotas.produced(ctx.session.principal.name, request)
    if acks == 0:
        return None
    leaders: set[int] = set()
    for (topic_data, partitions), name in zip(layout, names, strict=True):
        answers = []
        for index, result in partitions:
            answer: PartitionProduceResponse = {
                "index": index,
                "error_code": result.error,
                "base_offset": result.base_offset if result.error == ErrorCode.NONE else -1,
                "log_append_time_ms": result.log_append_time_ms,
                "log_start_offset": result.log_start_offset,
                "error_message": result.error_message,
                "record_errors": [{"batch_index": index, "batch_index_error_message": why}
                                  for index, why in result.record_errors],
            }
            # KIP-951: tell the client where the partition went, so it need not ask Metadata first.
            current = current_leader(ctx, name, index) \
                if result.error == ErrorCode.NOT_LEADER_OR_FOLLOWER and name is not None else None
            if current is not None:
                answer["current_leader"] = {"leader_id": current[0], "leader_epoch": current[1]}
                leaders.add(current[0])
            answers.append(answer)
        responses.append({"name": topic_data.name, "topic_id": topic_data.topic_id,
                          "partition_responses": answers})
    return {"responses": responses, "throttle_time_ms": throttle_ms, "node_endpoints": node_endpoints(ctx, leaders)}


async def _topic_name(topic_data: TopicProduceDataView, by_id: bool, ctx: BrokerContext) -> str | None:
    """The topic's name; auto-creates a topic named by a v0-12 request when the broker allows it."""
    if by_id:
        topic = ctx.metadata.topic_by_id(topic_data.topic_id)
        return topic.name if topic is not None else None
    name = topic_data.name
    if ctx.metadata.topic(name) is None and ctx.config["auto.create.topics.enable"] and may_create_topic(ctx, name):
        await ctx.controller.auto_create_topic(name)
    return name
