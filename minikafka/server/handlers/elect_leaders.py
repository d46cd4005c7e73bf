"""ElectLeaders: give partitions back to their preferred (first) replica, or (unclean) give
offline partitions a leader among their out-of-sync replicas, through any broker.

The controller decides; a broker that is not the controller forwards the request to it on
the inter-broker listener and relays its answer. As Kafka's, the answer waits (up to the
request's timeout) until this broker's metadata shows each elected leader, so a client that
asks this broker next sees the election done. The embedded broker is the only replica of
everything, so it answers itself: a partition it leads needs no election of either kind, and
one it cannot lead (its dir failed) has no other replica to elect."""

from __future__ import annotations

from typing import cast

from minikafka.metadata.cache import PartitionMetadata
from minikafka.security.acl import AclOperation
from minikafka.server.context import BrokerContext
from minikafka.server.forward import to_controller
from protocol import ApiKey, Request
from protocol.errors import ErrorCode
from protocol.typed.elect_leaders import ElectLeadersRequestView, ElectLeadersResponse, PartitionResult

PREFERRED, UNCLEAN = 0, 1


async def handle(request: Request[ElectLeadersRequestView], ctx: BrokerContext) -> ElectLeadersResponse:
    body = request.body
    wanted = None if body.topic_partitions is None else [
        (t.topic, p) for t in body.topic_partitions for p in t.partitions]
    election = body.get("election_type", PREFERRED)
    if not ctx.session.allowed_on_cluster(AclOperation.ALTER):
        denied = _answer(wanted or [], (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed."))
        denied["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return denied
    if election not in (PREFERRED, UNCLEAN):
        return _answer(wanted or [], (ErrorCode.INVALID_REQUEST, f"unknown election type {election}"))
    controller = ctx.cluster_controller
    if controller is None:
        if wanted is None:
            wanted = [(name, index) for name, topic in ctx.metadata.topics().items() for index in topic.partitions]
        return _respond({(topic, index): embedded_outcome(election, ctx.metadata.partition(topic, index))
                         for topic, index in wanted})
    if controller.active:
        if election == UNCLEAN:
            results = await controller.elect_unclean(wanted)
        else:
            results = await controller.elect_preferred(wanted)
        answer = _respond(results)
    else:
        answer = await _forward(request, ctx, wanted)
    await _until_seen_here(answer, election, ctx, body.timeout_ms / 1000)
    return answer


def embedded_outcome(election: int, partition: PartitionMetadata | None) -> tuple[ErrorCode, str | None]:
    """What electing a leader of one partition of the embedded broker (its only replica) gives."""
    if partition is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition"
    if partition.available:
        return ErrorCode.ELECTION_NOT_NEEDED, "its only replica leads it already"
    if election == PREFERRED:
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "its only replica is offline"
    return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "its only replica is offline"


async def _until_seen_here(answer: ElectLeadersResponse, election: int, ctx: BrokerContext, timeout_s: float
                           ) -> None:
    """Wait until this broker's metadata shows a leader for each partition elected in ``answer``
    (its preferred replica, for a preferred election); those still not shown when the time is up
    answer REQUEST_TIMED_OUT, as Kafka's do."""
    elected = [(topic["topic"], partition) for topic in answer["replica_election_results"]
               for partition in topic["partition_result"] if partition["error_code"] == ErrorCode.NONE]

    def shown(topic: str, index: int) -> bool:
        found = ctx.metadata.partition(topic, index)
        if found is None or not found.available:
            return False
        return election == UNCLEAN or found.leader == found.replicas[0]

    if elected and not await ctx.metadata.wait_until(lambda: all(shown(t, p["partition_id"]) for t, p in elected),
                                                     timeout_s):
        for topic, partition in elected:
            if not shown(topic, partition["partition_id"]):
                partition["error_code"] = ErrorCode.REQUEST_TIMED_OUT
                partition["error_message"] = "elected, but this broker has not heard of the new leader yet"


def _answer(wanted: list[tuple[str, int]], outcome: tuple[ErrorCode, str | None]) -> ElectLeadersResponse:
    return _respond(dict.fromkeys(wanted, outcome))


def _respond(results: dict[tuple[str, int], tuple[ErrorCode, str | None]]) -> ElectLeadersResponse:
    by_topic: dict[str, list[PartitionResult]] = {}
    for (topic, index), (error, message) in sorted(results.items()):
        by_topic.setdefault(topic, []).append({"partition_id": index, "error_code": error, "error_message": message})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "replica_election_results": [
        {"topic": topic, "partition_result": partitions} for topic, partitions in by_topic.items()]}


async def _forward(request: Request[ElectLeadersRequestView], ctx: BrokerContext, wanted: list[tuple[str, int]] | None
                   ) -> ElectLeadersResponse:
    forwarded = await to_controller(ApiKey.ELECT_LEADERS, request, ctx, request.body.timeout_ms / 1000)
    if forwarded is None:
        return _answer(wanted or [], (ErrorCode.NOT_CONTROLLER, "no controller answered"))
    # The controller answered in this request's version: passed on as it came.
    return cast("ElectLeadersResponse", forwarded)
