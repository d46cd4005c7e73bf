"""KIP-951: a Produce or Fetch refused because this broker no longer leads the partition names
its leader and that leader's address, so the client need not ask Metadata before it goes on."""

from __future__ import annotations

from collections.abc import Iterable

from minikafka.server.context import BrokerContext
from protocol.typed.produce import NodeEndpoint


def current_leader(ctx: BrokerContext, topic: str, index: int) -> tuple[int, int] | None:
    """The partition's leader and leader epoch as this broker knows them best: the controller's
    LeaderAndIsr that made this replica a follower arrives before its UpdateMetadata, and in a
    controlled shutdown the broker may close before the latter; a hint naming this broker again
    would send the client back here until it learned otherwise from Metadata."""
    known = ctx.metadata.partition(topic, index)
    best = (known.leader, known.leader_epoch) if known is not None and known.available else None
    replica = ctx.replica_manager.get_partition(topic, index)
    if replica is not None and not replica.is_leader and replica.leader_id >= 0 \
            and (best is None or replica.leader_epoch > best[1]):
        best = (replica.leader_id, replica.leader_epoch)
    return best


def node_endpoints(ctx: BrokerContext, leaders: Iterable[int]) -> list[NodeEndpoint]:
    """The addresses, on the request's listener, of the leaders named in hints (Produce's and
    Fetch's NodeEndpoint are one shape)."""
    endpoints = (ctx.metadata.broker(b, ctx.listener_name) for b in sorted(set(leaders)))
    return [{"node_id": e.broker_id, "host": e.host, "port": e.port, "rack": e.rack} for e in endpoints if e is not None]
