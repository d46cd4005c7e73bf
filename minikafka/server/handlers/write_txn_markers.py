"""WriteTxnMarkers (from a transaction coordinator, on the inter-broker listener): append the
markers that end transactions to the partitions this broker leads, as acks=all."""

from __future__ import annotations

import asyncio

from minikafka.server.context import BrokerContext
from minikafka.server.handlers.authorization import from_a_broker
from protocol import Request
from protocol.errors import ErrorCode
from protocol.record_codec import ControlMarker
from protocol.typed.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerView,
    WriteTxnMarkersRequestView,
    WriteTxnMarkersResponse,
)


async def _write(marker: WritableTxnMarkerView, ctx: BrokerContext) -> WritableTxnMarkerResult:
    partitions = [(topic.name, index) for topic in marker.topics for index in topic.partition_indexes]
    errors = await ctx.txn_markers.write_here(marker.producer_id, marker.producer_epoch,
                                              ControlMarker(not marker.transaction_result, marker.coordinator_epoch),
                                              partitions)
    by_topic: dict[str, list[WritableTxnMarkerPartitionResult]] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": error})
    return {"producer_id": marker.producer_id,
            "topics": [{"name": name, "partitions": results} for name, results in by_topic.items()]}


async def handle(request: Request[WriteTxnMarkersRequestView], ctx: BrokerContext) -> WriteTxnMarkersResponse:
    if not from_a_broker(ctx):  # a transaction coordinator's request: CLUSTER_ACTION
        return {"markers": [{"producer_id": marker.producer_id, "topics": [
            {"name": topic.name, "partitions": [{"partition_index": index,
                                                 "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
                                                for index in topic.partition_indexes]}
            for topic in marker.topics]} for marker in request.body.markers]}
    return {"markers": list(await asyncio.gather(*(_write(marker, ctx) for marker in request.body.markers)))}
