"""What the controller tells a cluster broker, applied: LeaderAndIsr, UpdateMetadata, StopReplica.

``ControllerCommands`` owns the highest controller epoch this broker has heard (a request
from an older controller changes nothing and is answered STALE_CONTROLLER_EPOCH). LeaderAndIsr
and StopReplica go to replica/leadership.py (Kafka's becomeLeaderOrFollower and stopReplicas,
which the embedded controller calls too); UpdateMetadata fills the MetadataCache (what clients
are told) and deletes the replicas it shows this broker no longer holds. The handlers parse the
wire and call it; nothing else does. Event-loop thread only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from minikafka.config.broker import BrokerConfig
from minikafka.group.coordinator import GroupCoordinator
from minikafka.metadata.cache import BrokerInfo, MetadataCache, PartitionMetadata
from minikafka.replica.leadership import Leadership, PartitionCommand, StopCommand, TopicConfigs
from minikafka.replica.replica_manager import TopicPartition
from minikafka.storage.log import ZERO_UUID
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)
LEADER_DURING_DELETE = -2


@dataclass(frozen=True)
class PartitionUpdate:
    """One partition of an UpdateMetadata request."""

    topic: str
    topic_id: uuid.UUID
    index: int
    state: PartitionMetadata


class ControllerCommands:
    def __init__(self, config: BrokerConfig, leadership: Leadership, metadata: MetadataCache,
                 groups: GroupCoordinator, topic_configs: TopicConfigs,
                 forget_topic_configs: Callable[[str], None],
                 catch_up_configs: Callable[[], Awaitable[None]]) -> None:
        self.broker_id = config.broker_id
        self.config = config
        self.leadership = leadership
        self.replica_manager = leadership.replica_manager
        self.metadata = metadata
        self.groups = groups
        self.topic_configs = topic_configs
        self.forget_topic_configs = forget_topic_configs
        self.catch_up_configs = catch_up_configs
        self.controller_epoch = -1
        self.controller_id = -1

    def accept(self, controller_id: int, controller_epoch: int) -> ErrorCode:
        """NONE if the sender is the newest controller heard of (and remember it)."""
        if controller_epoch < self.controller_epoch:
            log.warning("ignored a request of controller %d with epoch %d: controller %d's epoch %d is newer",
                        controller_id, controller_epoch, self.controller_id, self.controller_epoch)
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch, self.controller_id = controller_epoch, controller_id
        return ErrorCode.NONE

    async def leader_and_isr(self, commands: Sequence[PartitionCommand]) -> dict[TopicPartition, ErrorCode]:
        """Lead or follow each partition as told; per partition, NONE or why not."""
        if any(self._new_replicas(command) for command in commands):
            # A reassignment's copies start now; the throttles written for them come first.
            await self.catch_up_configs()
        return await self.leadership.become_leader_or_follower(commands, self.topic_configs)

    def _new_replicas(self, command: PartitionCommand) -> bool:
        """Whether the command makes a replica here or gives the partition other replicas."""
        partition = self.replica_manager.get_partition(command.topic, command.index)
        return partition is None or partition.replicas != command.replicas

    def update_metadata(self, brokers: Sequence[BrokerInfo], controller_id: int,
                        partitions: Sequence[PartitionUpdate]) -> None:
        """Take the controller's view; partitions whose leader is LEADER_DURING_DELETE belong
        to a topic being deleted, which leaves the metadata at once."""
        metadata = self.metadata
        metadata.set_brokers(brokers, controller_id)
        by_topic: dict[tuple[str, uuid.UUID], dict[int, PartitionMetadata]] = {}
        deleted: set[str] = set()
        for update in partitions:
            if update.state.leader == LEADER_DURING_DELETE:
                deleted.add(update.topic)
                continue
            by_topic.setdefault((update.topic, update.topic_id), {})[update.index] = update.state
        for (name, topic_id), states in by_topic.items():
            metadata.update_partitions(name, topic_id, states)
        for name in deleted:
            metadata.remove_topic(name)
            self.forget_topic_configs(name)
            self.replica_manager.replication_throttles.forget_topic(name)
            # Every coordinator drops the deleted topic's committed offsets, hosting it or not.
            self.groups.on_topic_deleted(name)
        self._delete_strays()

    def _delete_strays(self) -> None:
        """Delete the logs this broker holds but is no replica of, by the controller's metadata:
        replicas removed (a reassignment finished) while this broker was down, so no StopReplica
        reached it, and replicas of a topic the metadata knows under another topic id (deleted
        and re-created meanwhile). Only on that evidence: a topic the metadata does not know is
        left to ``Leadership.delete_replicas_of_deleted_topics``, which asks ZooKeeper."""
        manager = self.replica_manager
        for (topic, index), log_ in list(manager.log_manager.logs.items()):
            if manager.get_partition(topic, index) is not None:
                continue
            known = self.metadata.topic(topic)
            state = known.partitions.get(index) if known is not None else None
            if known is None or state is None:
                continue
            if log_.topic_id not in (known.topic_id, ZERO_UUID):
                self.leadership.delete_replica((topic, index), f"the cluster's topic {topic} has topic id "
                                                               f"{known.topic_id}, the replica here is of topic id "
                                                               f"{log_.topic_id}, deleted since")
            elif self.broker_id not in state.replicas:
                self.leadership.delete_replica((topic, index), f"the cluster keeps it on brokers "
                                                               f"{list(state.replicas)} (its replica here was "
                                                               "removed while this broker was away)")

    def stop_replica(self, commands: Sequence[StopCommand]) -> dict[TopicPartition, ErrorCode]:
        return self.leadership.stop_replicas(commands)
