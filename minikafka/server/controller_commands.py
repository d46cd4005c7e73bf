"""What the controller tells a cluster broker, applied: LeaderAndIsr, UpdateMetadata, StopReplica.

``ControllerCommands`` owns the highest controller epoch this broker has heard (a request
from an older controller changes nothing and is answered STALE_CONTROLLER_EPOCH) and turns each
command into calls on the ReplicaManager (roles), the ReplicaFetcherManager (what to follow),
the MetadataCache (what clients are told) and the coordinators (the groups and transactions
of the __consumer_offsets and __transaction_state partitions it leads). The handlers parse the wire and call it; nothing
else does. Event-loop thread only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from minikafka.config.broker import BrokerConfig
from minikafka.group.coordinator import GroupCoordinator
from minikafka.metadata.cache import BrokerInfo, MetadataCache, PartitionMetadata
from minikafka.replica.fetcher import ReplicaFetcherManager
from minikafka.replica.replica_manager import ReplicaManager, TopicPartition
from minikafka.replica.topic_config import log_config_for
from minikafka.storage.log import ZERO_UUID
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)
LEADER_DURING_DELETE = -2


@dataclass(frozen=True)
class PartitionCommand:
    """One partition of a LeaderAndIsr request."""

    topic: str
    topic_id: uuid.UUID
    index: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int
    is_new: bool


@dataclass(frozen=True)
class PartitionUpdate:
    """One partition of an UpdateMetadata request."""

    topic: str
    topic_id: uuid.UUID
    index: int
    state: PartitionMetadata


@dataclass(frozen=True)
class StopCommand:
    topic: str
    index: int
    delete: bool
    leader_epoch: int = -1


TopicConfigs = Callable[[str], Awaitable[dict[str, str]]]


@dataclass
class RoleChanges:
    """The partitions one LeaderAndIsr made this broker lead, or follow after leading. A few are
    logged one line each; more (a cluster starting, a broker coming back) as one summary line
    per kind, with a count per topic, so that hundreds of partitions do not bury the log."""

    leads: list[PartitionCommand] = field(default_factory=list)
    follows: list[PartitionCommand] = field(default_factory=list)
    ONE_LINE_EACH_UP_TO: ClassVar[int] = 5

    def log(self) -> None:
        if len(self.leads) + len(self.follows) <= self.ONE_LINE_EACH_UP_TO:
            for c in self.leads:
                log.info("leading %s-%d in epoch %d with in-sync replicas %s", c.topic, c.index, c.leader_epoch,
                         list(c.isr))
            for c in self.follows:
                log.info("%s-%d: following broker %d from epoch %d", c.topic, c.index, c.leader, c.leader_epoch)
            return
        if self.leads:
            log.info("leading %d partition(s): %s", len(self.leads), _per_topic(self.leads))
        if self.follows:
            leaders = sorted({c.leader for c in self.follows})
            log.info("following %d partition(s) this broker led (now led by broker(s) %s): %s", len(self.follows),
                     ", ".join(map(str, leaders)), _per_topic(self.follows))


def _per_topic(commands: Sequence[PartitionCommand]) -> str:
    counts: dict[str, int] = {}
    for command in commands:
        counts[command.topic] = counts.get(command.topic, 0) + 1
    return ", ".join(f"{topic} ({count})" for topic, count in sorted(counts.items()))


class ControllerCommands:
    def __init__(self, config: BrokerConfig, replica_manager: ReplicaManager, fetchers: ReplicaFetcherManager,
                 metadata: MetadataCache, groups: GroupCoordinator, topic_configs: TopicConfigs,
                 forget_topic_configs: Callable[[str], None],
                 coordinators: Mapping[str, Callable[[int, bool], None]]) -> None:
        self.broker_id = config.broker_id
        self.config = config
        self.replica_manager = replica_manager
        self.fetchers = fetchers
        self.metadata = metadata
        self.groups = groups
        # internal topic -> its coordinator's leadership_changed(partition, leads)
        self.coordinators = coordinators
        self.topic_configs = topic_configs
        self.forget_topic_configs = forget_topic_configs
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
        """Lead or follow each partition as told; per partition, NONE or why not. The replicas
        it creates reach the disk together, before it answers (a new topic's hundred replicas
        fsynced one by one took seconds)."""
        async with self.replica_manager.creating_many():
            return await self._leader_and_isr(commands)

    async def _leader_and_isr(self, commands: Sequence[PartitionCommand]) -> dict[TopicPartition, ErrorCode]:
        results: dict[TopicPartition, ErrorCode] = {}
        configs: dict[str, dict[str, str]] = {}
        roles = RoleChanges()
        for command in commands:
            key = (command.topic, command.index)
            if self.broker_id not in command.replicas:
                results[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            stale = self._topic_id_here(*key)
            if stale is not None and stale != command.topic_id:
                # The newest controller names another topic id: the replica here is of a topic
                # deleted (and re-created) while this broker was away.
                self._delete_replica(key, f"the topic was deleted and re-created as topic id {command.topic_id} "
                                          f"while this broker was away (the replica here is of topic id {stale})")
            hosted = self.replica_manager.get_partition(*key)
            if hosted is not None:
                told, held = (command.leader_epoch, command.partition_epoch), (hosted.leader_epoch,
                                                                              hosted.partition_epoch)
                if told < held:
                    # A controller that read the state before this broker's last change (a new
                    # controller taking over while the leader wrote an ISR change): taking it would
                    # put an ISR that ZooKeeper no longer holds back into the leader's memory.
                    log.info("%s-%d: ignoring the controller's state of leader epoch %d, version %d: this broker "
                             "holds leader epoch %d, version %d", *key, *told, *held)
                    results[key] = ErrorCode.STALE_CONTROLLER_EPOCH
                    continue
                if told == held and hosted.leader_id == command.leader:
                    results[key] = ErrorCode.NONE  # nothing new: a pending ISR change stays pending
                    continue
            if command.topic not in configs:
                configs[command.topic] = await self.topic_configs(command.topic)
                self.replica_manager.replication_throttles.update_topic(command.topic, configs[command.topic])
            results[key] = self._apply(command, configs[command.topic], roles)
        roles.log()
        return results

    def _apply(self, command: PartitionCommand, topic_configs: dict[str, str], roles: RoleChanges) -> ErrorCode:
        key = (command.topic, command.index)
        config = log_config_for(topic_configs, self.config, command.topic)
        manager = self.replica_manager
        before = manager.get_partition(*key)
        was_leader = before is not None and before.is_leader
        if command.leader == self.broker_id:
            self.fetchers.stop_following([key])
            partition = manager.become_leader(
                command.topic, command.index, command.topic_id, command.leader_epoch, config,
                is_new_replica=command.is_new, isr=command.isr, replicas=command.replicas,
                partition_epoch=command.partition_epoch)
        else:
            partition = manager.become_follower(
                command.topic, command.index, command.topic_id, command.leader_epoch, config,
                leader_id=command.leader, is_new_replica=command.is_new, isr=command.isr,
                replicas=command.replicas, partition_epoch=command.partition_epoch)
            if partition is not None and command.leader >= 0:
                self.fetchers.follow(partition, command.leader, command.leader_epoch)
            else:
                self.fetchers.stop_following([key])
        if partition is None:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if not was_leader and partition.is_leader:
            roles.leads.append(command)
        elif was_leader and not partition.is_leader:
            roles.follows.append(command)
        if command.topic in self.coordinators:
            self.coordinators[command.topic](command.index, partition.is_leader)
        return ErrorCode.NONE

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
        left to ``delete_replicas_of_deleted_topics``, which asks ZooKeeper."""
        manager = self.replica_manager
        for (topic, index), log_ in list(manager.log_manager.logs.items()):
            if manager.get_partition(topic, index) is not None:
                continue
            known = self.metadata.topic(topic)
            state = known.partitions.get(index) if known is not None else None
            if known is None or state is None:
                continue
            if log_.topic_id not in (known.topic_id, ZERO_UUID):
                self._delete_replica((topic, index), f"the cluster's topic {topic} has topic id {known.topic_id}, the "
                                                     f"replica here is of topic id {log_.topic_id}, deleted since")
            elif self.broker_id not in state.replicas:
                self._delete_replica((topic, index), f"the cluster keeps it on brokers {list(state.replicas)} (its "
                                                     "replica here was removed while this broker was away)")

    def delete_replicas_of_deleted_topics(self, checked: Mapping[TopicPartition, uuid.UUID],
                                          existing: Mapping[str, uuid.UUID | None]) -> None:
        """``checked``: replicas found here (their topic ids), ``existing``: the topic id each of
        their topics has in the cluster now (None: no such topic). A replica whose topic is gone,
        or is another topic of the same name, was deleted while this broker was away (down, or
        cut off from ZooKeeper), so no StopReplica reached it: it goes now. One that changed since
        it was checked (re-created meanwhile) is left alone."""
        for key, topic_id in checked.items():
            current = existing.get(key[0])
            if current == topic_id or topic_id == ZERO_UUID or self._topic_id_here(*key) != topic_id:
                continue
            why = ("the topic was deleted while this broker was away" if current is None else
                   f"the topic was deleted and re-created as topic id {current} while this broker was away")
            self._delete_replica(key, why)

    def _topic_id_here(self, topic: str, index: int) -> uuid.UUID | None:
        """The topic id of this broker's replica (hosted, or a log found at startup), if any."""
        hosted = self.replica_manager.get_partition(topic, index)
        if hosted is not None:
            return hosted.topic_id
        found = self.replica_manager.log_manager.get_log(topic, index)
        return found.topic_id if found is not None else None

    def _delete_replica(self, key: TopicPartition, why: str) -> None:
        found = self.replica_manager.log_manager.get_log(*key)
        log.warning("deleting %s-%d%s: %s", *key, f" from {found.log_dir}" if found is not None else "", why)
        self.fetchers.stop_following([key])
        self.replica_manager.stop_replica(*key, delete=True)

    def stop_replica(self, commands: Sequence[StopCommand]) -> dict[TopicPartition, ErrorCode]:
        results: dict[TopicPartition, ErrorCode] = {}
        for command in commands:
            key = (command.topic, command.index)
            hosted = self.replica_manager.get_partition(*key)
            if hosted is not None and 0 <= command.leader_epoch < hosted.leader_epoch:
                results[key] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            self.fetchers.stop_following([key])
            self.replica_manager.stop_replica(command.topic, command.index, command.delete)
            if command.topic in self.coordinators:
                self.coordinators[command.topic](command.index, False)
            results[key] = ErrorCode.NONE
        return results
