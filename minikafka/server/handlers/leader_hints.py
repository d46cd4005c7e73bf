"""KIP-951: a Produce or Fetch refused because this broker no longer leads the partition names
its leader and that leader's address, so the client need not ask Metadata before it goes on."""

from __future__ import annotations

from collections.abc import Iterable

from minikafka.server.context import BrokerContext
from protocol.typed.produce import NodeEndpoint


def current_leader(ctx: BrokerContext, topic: str, index: int) -> tuple[int, int] | None:
    """The partition's leader and leader epoch in this broker's metadata, which a LeaderAndIsr
    advances at once (ReplicaManager.metadata_follows); None while it has no live leader."""
    known = ctx.metadata.partition(topic, index)
    return (known.leader, known.leader_epoch) if known is not None and known.available else None


def node_endpoints(ctx: BrokerContext, leaders: Iterable[int]) -> list[NodeEndpoint]:
    """The addresses, on the request's listener, of the leaders named in hints (Produce's and
    Fetch's NodeEndpoint are one shape)."""
    endpoints = (ctx.metadata.broker(b, ctx.listener_name) for b in sorted(set(leaders)))
    return [{"node_id": e.broker_id, "host": e.host, "port": e.port, "rack": e.rack} for e in endpoints if e is not None]
