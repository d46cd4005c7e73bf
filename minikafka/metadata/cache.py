"""What a broker knows of the cluster: live brokers, the controller, and every partition's
leader, replicas, ISR and offline replicas.

Handlers read cluster state only from here. A cluster broker fills it from the UpdateMetadata
requests of the controller; the embedded controller fills it in-process. Values are frozen:
an update replaces them, so a handler that holds one sees a consistent snapshot.
Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

NO_LEADER = -1


@dataclass(frozen=True)
class BrokerEndpoint:
    """A live broker as one listener reaches it."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker: its address on each listener name."""

    broker_id: int
    endpoints: Mapping[str, tuple[str, int]]
    rack: str | None = None


@dataclass(frozen=True)
class PartitionMetadata:
    leader: int  # NO_LEADER while no replica can lead
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()

    @property
    def available(self) -> bool:
        return self.leader != NO_LEADER and self.leader not in self.offline_replicas


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionMetadata] = field(default_factory=dict)


class MetadataCache:
    """The cluster as this broker last heard of it."""

    def __init__(self, cluster_id: str = "") -> None:
        self.cluster_id = cluster_id
        self.controller_id = -1
        self._brokers: dict[int, BrokerInfo] = {}
        self._by_listener: dict[str, dict[int, BrokerEndpoint]] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._topics_by_id: dict[uuid.UUID, TopicMetadata] = {}
        self._waiters: set[asyncio.Future[None]] = set()

    # ---- reads (handlers) ----------------------------------------------------------------
    def brokers(self, listener: str) -> dict[int, BrokerEndpoint]:
        """The live brokers with an endpoint on ``listener`` (Kafka answers each client with the
        addresses of the listener it connected to)."""
        found = self._by_listener.get(listener)
        if found is None:
            found = self._by_listener[listener] = {
                b.broker_id: BrokerEndpoint(b.broker_id, *b.endpoints[listener], b.rack)
                for b in self._brokers.values() if listener in b.endpoints}
        return found

    def broker(self, broker_id: int, listener: str) -> BrokerEndpoint | None:
        return self.brokers(listener).get(broker_id)

    def live_broker_ids(self) -> list[int]:
        return sorted(self._brokers)

    def topics(self) -> Mapping[str, TopicMetadata]:
        return self._topics

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._topics_by_id.get(topic_id)

    def partition(self, topic: str, index: int) -> PartitionMetadata | None:
        found = self._topics.get(topic)
        return found.partitions.get(index) if found is not None else None

    async def wait_until(self, ready: Callable[[], bool], timeout_s: float) -> bool:
        """Whether ``ready()`` holds within ``timeout_s``, checked again after every update."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not ready():
            left = deadline - loop.time()
            if left <= 0:
                return False
            update = loop.create_future()
            self._waiters.add(update)
            try:
                await asyncio.wait_for(update, left)
            except TimeoutError:
                pass
            finally:
                self._waiters.discard(update)
        return True

    def _updated(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    # ---- updates (the controller, or the UpdateMetadata handler) --------------------------
    def set_brokers(self, brokers: Iterable[BrokerInfo], controller_id: int) -> None:
        self._brokers = {b.broker_id: b for b in brokers}
        self._by_listener = {}
        self.controller_id = controller_id
        self._updated()

    def put_topic(self, topic: TopicMetadata) -> None:
        """Replace the whole topic (its partitions as given)."""
        old = self._topics.get(topic.name)
        if old is not None and old.topic_id != topic.topic_id:
            self._topics_by_id.pop(old.topic_id, None)
        self._topics[topic.name] = topic
        self._topics_by_id[topic.topic_id] = topic
        self._updated()

    def update_partitions(self, name: str, topic_id: uuid.UUID, partitions: Mapping[int, PartitionMetadata]) -> None:
        """Replace the given partitions of a topic, keeping its others (UpdateMetadata is partial)."""
        old = self._topics.get(name)
        merged = dict(old.partitions) if old is not None and old.topic_id == topic_id else {}
        merged.update(partitions)
        self.put_topic(TopicMetadata(name, topic_id, merged))

    def advance_partitions(self, name: str, topic_id: uuid.UUID, partitions: Mapping[int, PartitionMetadata]) -> None:
        """Take the given partitions' states where they are of a newer leader epoch than the
        cache's, for a topic the cache knows under ``topic_id`` (offline replicas kept): a
        LeaderAndIsr reaches a broker a moment before the UpdateMetadata that says the same,
        and clients asking meanwhile were sent to the leader before."""
        old = self._topics.get(name)
        if old is None or old.topic_id != topic_id:
            return
        newer = {index: replace(state, offline_replicas=known.offline_replicas)
                 for index, state in partitions.items()
                 if (known := old.partitions.get(index)) is not None and state.leader_epoch > known.leader_epoch}
        if newer:
            self.update_partitions(name, topic_id, newer)

    def remove_topic(self, name: str) -> None:
        old = self._topics.pop(name, None)
        if old is not None:
            self._topics_by_id.pop(old.topic_id, None)
        self._updated()
