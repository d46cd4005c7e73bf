"""Which partitions this broker leads and which it follows, applied: Kafka's
becomeLeaderOrFollower and stopReplicas.

``Leadership`` is the one place that turns a partition's state, as a controller decided it, into
a role on this broker: the ReplicaManager makes the replica leader or follower, the fetchers start
or stop following its leader, and the coordinators of the internal topics learn that they gained
or lost a partition. Both controllers come through here: a cluster broker's LeaderAndIsr and
StopReplica (server/controller_commands.py, which checks the controller's epoch first) and the
embedded controller, which leads every partition itself. Event-loop thread only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from minikafka.config.broker import BrokerConfig
from minikafka.replica.fetcher import ReplicaFetcherManager
from minikafka.replica.partition import Partition
from minikafka.replica.replica_manager import ReplicaManager, TopicPartition
from minikafka.replica.topic_config import log_config_for
from minikafka.storage.log import ZERO_UUID, LogConfig
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


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
class StopCommand:
    topic: str
    index: int
    delete: bool
    leader_epoch: int = -1


TopicConfigs = Callable[[str], Awaitable[dict[str, str]]]
# internal topic -> its coordinator's leadership_changed(partition, leads)
Coordinators = Mapping[str, Callable[[int, bool], None]]


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


class Leadership:
    """Applies the controllers' decisions to this broker's replicas. ``fetchers`` is None on the
    embedded broker (no other broker to follow); ``coordinators`` maps each internal topic to
    its coordinator's leadership_changed (empty where the coordinators load every partition
    themselves, as the embedded broker's do at start)."""

    def __init__(self, config: BrokerConfig, replica_manager: ReplicaManager,
                 fetchers: ReplicaFetcherManager | None = None, coordinators: Coordinators | None = None) -> None:
        self.broker_id = config.broker_id
        self.config = config
        self.replica_manager = replica_manager
        self.fetchers = fetchers
        self.coordinators: Coordinators = coordinators if coordinators is not None else {}

    async def become_leader_or_follower(self, commands: Sequence[PartitionCommand],
                                        topic_configs: TopicConfigs) -> dict[TopicPartition, ErrorCode]:
        """Lead or follow each partition as told; per partition, NONE or why not. The files of
        the replicas it creates are made side by side first, and reach the disk together before
        it answers (a new topic's hundred replicas fsynced one by one took seconds)."""
        async with self.replica_manager.creating_many():
            await self.replica_manager.prepare_new_logs([
                (c.topic, c.index, c.topic_id, c.leader_epoch if c.leader == self.broker_id else None)
                for c in commands if c.is_new and self.broker_id in c.replicas])
            return await self._become_leader_or_follower(commands, topic_configs)

    async def _become_leader_or_follower(self, commands: Sequence[PartitionCommand],
                                         topic_configs: TopicConfigs) -> dict[TopicPartition, ErrorCode]:
        results: dict[TopicPartition, ErrorCode] = {}
        configs: dict[str, dict[str, str]] = {}
        roles = RoleChanges()
        taken: list[Partition] = []
        for command in commands:
            key = (command.topic, command.index)
            if self.broker_id not in command.replicas:
                results[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            stale = self.topic_id_here(*key)
            # A request without topic ids (LeaderAndIsr v4 and older, below inter.broker.protocol
            # 2.8-IV1) names none: the replica here is not taken for another topic's (as in Kafka).
            if stale is not None and command.topic_id != ZERO_UUID and stale != command.topic_id:
                # The newest controller names another topic id: the replica here is of a topic
                # deleted (and re-created) while this broker was away.
                self.delete_replica(key, f"the topic was deleted and re-created as topic id {command.topic_id} "
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
                configs[command.topic] = await topic_configs(command.topic)
                self.replica_manager.replication_throttles.update_topic(command.topic, configs[command.topic])
            config = log_config_for(configs[command.topic], self.config, command.topic)
            partition = self.make_leader_or_follower(command, config, roles)
            results[key] = ErrorCode.KAFKA_STORAGE_ERROR if partition is None else ErrorCode.NONE
            if partition is not None:
                taken.append(partition)
        # Once for the request: per partition, each update copied its topic's partitions.
        self.replica_manager.metadata_follows(taken)
        roles.log()
        return results

    def make_leader_or_follower(self, command: PartitionCommand, config: LogConfig,
                                roles: RoleChanges | None = None) -> Partition | None:
        """One partition, as the controller decided it; None when its replica is offline. An
        empty ``command.isr`` and ``replicas`` make this broker the only replica (the embedded
        mode)."""
        key = (command.topic, command.index)
        manager = self.replica_manager
        before = manager.get_partition(*key)
        was_leader = before is not None and before.is_leader
        if command.leader == self.broker_id:
            if self.fetchers is not None:
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
            if self.fetchers is not None:
                if partition is not None and command.leader >= 0:
                    self.fetchers.follow(partition, command.leader, command.leader_epoch)
                else:
                    self.fetchers.stop_following([key])
        if partition is None:
            return None
        if roles is not None:
            if not was_leader and partition.is_leader:
                roles.leads.append(command)
            elif was_leader and not partition.is_leader:
                roles.follows.append(command)
        if command.topic in self.coordinators:
            self.coordinators[command.topic](command.index, partition.is_leader)
        return partition

    def stop_replicas(self, commands: Sequence[StopCommand]) -> dict[TopicPartition, ErrorCode]:
        """StopReplica: stop following, and delete when told; per partition, NONE or why not."""
        results: dict[TopicPartition, ErrorCode] = {}
        for command in commands:
            key = (command.topic, command.index)
            hosted = self.replica_manager.get_partition(*key)
            if hosted is not None and 0 <= command.leader_epoch < hosted.leader_epoch:
                results[key] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            if self.fetchers is not None:
                self.fetchers.stop_following([key])
            self.replica_manager.stop_replica(command.topic, command.index, command.delete)
            if command.topic in self.coordinators:
                self.coordinators[command.topic](command.index, False)
            results[key] = ErrorCode.NONE
        return results

    def delete_replicas_of_deleted_topics(self, checked: Mapping[TopicPartition, uuid.UUID],
                                          existing: Mapping[str, uuid.UUID | None]) -> None:
        """``checked``: replicas found here (their topic ids), ``existing``: the topic id each of
        their topics has in the cluster now (None: no such topic). A replica whose topic is gone,
        or is another topic of the same name, was deleted while this broker was away (down, or
        cut off from ZooKeeper), so no StopReplica reached it: it goes now. One that changed since
        it was checked (re-created meanwhile) is left alone."""
        for key, topic_id in checked.items():
            current = existing.get(key[0])
            if current == topic_id or topic_id == ZERO_UUID or self.topic_id_here(*key) != topic_id:
                continue
            why = ("the topic was deleted while this broker was away" if current is None else
                   f"the topic was deleted and re-created as topic id {current} while this broker was away")
            self.delete_replica(key, why)

    def topic_id_here(self, topic: str, index: int) -> uuid.UUID | None:
        """The topic id of this broker's replica (hosted, or a log found at startup), if any."""
        hosted = self.replica_manager.get_partition(topic, index)
        if hosted is not None:
            return hosted.topic_id
        found = self.replica_manager.log_manager.get_log(topic, index)
        return found.topic_id if found is not None else None

    def delete_replica(self, key: TopicPartition, why: str) -> None:
        found = self.replica_manager.log_manager.get_log(*key)
        log.warning("deleting %s-%d%s: %s", *key, f" from {found.log_dir}" if found is not None else "", why)
        if self.fetchers is not None:
            self.fetchers.stop_following([key])
        self.replica_manager.stop_replica(*key, delete=True)
