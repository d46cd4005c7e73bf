"""KIP-392's replica selectors: which replica a leader tells a consumer to read from.

A consumer names its rack (Fetch v11+'s rack_id, librdkafka's and Java's ``client.rack``); a
leader configured with ``replica.selector.class`` weighs its in-sync replicas that hold the fetch
offset and answers with the preferred one's id (Fetch's preferred_read_replica), and the consumer
fetches from it until that fails. Without a selector (Kafka's default) consumers read from the
leader. Pure functions of the views they are given: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from minikafka.config.broker import LEADER_SELECTOR, RACK_AWARE_REPLICA_SELECTOR


@dataclass(frozen=True)
class ClientMetadata:
    """What a consumer's Fetch tells of where it is: its rack ("" for none) and the listener it
    reached this broker on (only replicas with an endpoint there can be offered)."""

    rack_id: str
    listener: str


@dataclass(frozen=True)
class ReplicaView:
    """One replica a consumer could be sent to, as the leader sees it."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int


class ReplicaSelector(Protocol):
    def select(self, client: ClientMetadata, leader: ReplicaView, replicas: Sequence[ReplicaView]) -> ReplicaView:
        """The replica to read from, among ``replicas`` (the leader among them)."""


class LeaderSelector:
    """Kafka's LeaderSelector: always the leader."""

    def select(self, client: ClientMetadata, leader: ReplicaView, replicas: Sequence[ReplicaView]) -> ReplicaView:
        return leader


class RackAwareReplicaSelector:
    """Kafka's RackAwareReplicaSelector: a replica in the consumer's rack, the leader when it is
    there itself (or none is, or the consumer names no rack); among several followers, the one
    furthest ahead, then the one caught up most recently."""

    def select(self, client: ClientMetadata, leader: ReplicaView, replicas: Sequence[ReplicaView]) -> ReplicaView:
        if not client.rack_id:
            return leader
        same_rack = [r for r in replicas if r.rack == client.rack_id]
        if not same_rack or leader in same_rack:
            return leader
        return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_caught_up_ms))


def replica_selector(class_name: str) -> ReplicaSelector | None:
    """The selector ``replica.selector.class`` names (config/broker.py has checked the name); None for
    none."""
    if class_name == RACK_AWARE_REPLICA_SELECTOR:
        return RackAwareReplicaSelector()
    if class_name == LEADER_SELECTOR:
        return LeaderSelector()
    return None
