"""The one interface through which handlers ask for changes to the cluster.

Two implementations: ``EmbeddedController`` (the broker is its own controller, in-process)
and ``ZkClusterAdmin`` (cluster mode: the request is written to ZooKeeper, as Apache Kafka's
brokers did, and the elected controller carries it out). Handlers read cluster state from the
``MetadataCache``, never from here, and name neither implementation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from minikafka.metadata.store import TopicState
from protocol.errors import ErrorCode

Outcome = tuple[ErrorCode, str | None]


@dataclass
class CreateTopicResult:
    name: str
    error: ErrorCode
    message: str | None = None
    topic: TopicState | None = None


@dataclass(frozen=True)
class NewTopic:
    """One topic of a CreateTopics request: a partition count and replication factor (-1: the
    broker's default), or an explicit ``assignment`` of replicas to partitions."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str | None]
    assignment: dict[int, list[int]] | None = None


class ClusterControl(ABC):
    """Changes to topics, configs and producer ids; every method may wait on the network."""

    @property
    @abstractmethod
    def cluster_id(self) -> str: ...

    @property
    @abstractmethod
    def max_replication_factor(self) -> int:
        """How many brokers a new topic's replicas can be spread over now."""

    @abstractmethod
    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: dict[str, str | None], validate_only: bool = False,
                           assignment: dict[int, list[int]] | None = None) -> CreateTopicResult: ...

    async def create_topics(self, topics: Sequence[NewTopic], validate_only: bool,
                            timeout_ms: int) -> list[CreateTopicResult]:
        """The topics of one CreateTopics request, a result each in their order. Answered once
        they are all written; with ``timeout_ms`` > 0, once they all have leaders too, or when
        it runs out (those still without get REQUEST_TIMED_OUT), as Kafka answers. This default
        makes them one at a time, for a controller that creates a topic at once."""
        return [await self.create_topic(t.name, t.num_partitions, t.replication_factor, t.configs, validate_only,
                                        t.assignment) for t in topics]

    @abstractmethod
    async def auto_create_topic(self, name: str) -> CreateTopicResult: ...

    @abstractmethod
    async def create_internal_topic(self, name: str) -> CreateTopicResult: ...

    @abstractmethod
    async def delete_topic(self, name: str) -> Outcome: ...

    @abstractmethod
    async def create_partitions(self, name: str, count: int, validate_only: bool,
                                assignment: list[list[int]] | None = None) -> Outcome: ...

    @abstractmethod
    async def topic_configs(self, name: str) -> dict[str, str] | None:
        """The topic's dynamic configs, or None if it does not exist."""

    @abstractmethod
    async def alter_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> Outcome: ...

    @abstractmethod
    async def broker_configs(self) -> dict[str, dict[str, str]]:
        """Dynamic broker configs: {broker id as text, or "" for cluster defaults: {key: value}}."""

    @abstractmethod
    async def alter_broker_configs(self, entity: str, configs: dict[str, str], validate_only: bool) -> Outcome: ...

    @abstractmethod
    async def next_producer_id(self) -> int: ...

    @abstractmethod
    async def remember_log_dir(self, topic: str, partition: int, log_dir: str) -> None:
        """AlterReplicaLogDirs named a replica this broker does not host yet: create it in
        ``log_dir`` when it comes (KIP-113), even if the broker restarts meanwhile."""
