"""The in-process controller of the embedded mode (one broker that is its own controller).

It owns the cluster metadata (through a MetadataStore), creates topics, allocates producer ids
and leads every partition, through replica/leadership.py as a cluster broker's LeaderAndIsr
does. Handlers call it; it is touched only from the event loop.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from minikafka.config.broker import BrokerConfig, ConfigError
from minikafka.controller.api import ClusterControl, CreateTopicResult, Outcome
from minikafka.controller.topics import assignment_error, collision_error, topic_name_error
from minikafka.metadata.cache import BrokerInfo, MetadataCache, PartitionMetadata, TopicMetadata
from minikafka.metadata.store import NO_LEADER, MetadataStore, PartitionState, TopicState
from minikafka.metadata.topics import INTERNAL_TOPICS, OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from minikafka.replica.leadership import Leadership, PartitionCommand
from minikafka.replica.replica_manager import ReplicaManager
from minikafka.replica.topic_config import (
    InvalidTopicConfig,
    dynamic_topic_defaults,
    log_config_for,
    validate_topic_configs,
)
from minikafka.storage.errors import KafkaStorageError
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

__all__ = ["INTERNAL_TOPICS", "OFFSETS_TOPIC", "EmbeddedController"]

class EmbeddedController(ClusterControl):
    """Creates topics and leads every partition on the one broker of the embedded mode, and
    publishes what it decides into the broker's MetadataCache."""

    def __init__(self, config: BrokerConfig, store: MetadataStore, replica_manager: ReplicaManager,
                 metadata: MetadataCache | None = None, leadership: Leadership | None = None) -> None:
        self.config = config
        self.store = store
        self.replica_manager = replica_manager
        # The path a cluster broker's LeaderAndIsr takes too (no fetchers: nothing to follow).
        self.leadership = leadership if leadership is not None else Leadership(config, replica_manager)
        self.metadata = metadata if metadata is not None else MetadataCache(store.cluster_id)
        self.broker_id = config.broker_id
        self._producer_ids: range = range(0)
        self._next_producer_index = 0
        # Broker keys that give topic configs their defaults: when one changes dynamically, every
        # log that does not override it follows.
        for key in dynamic_topic_defaults():
            config.on_change(key, self._refresh_log_configs)

    @property
    def cluster_id(self) -> str:
        return self.store.cluster_id

    @property
    def max_replication_factor(self) -> int:
        return 1

    def topics(self) -> dict[str, TopicState]:
        return self.store.topics()

    def startup(self) -> None:
        """Apply the stored dynamic broker configs and lead every partition. The store is loaded
        already: the broker needs its cluster id before the logs start."""
        self.metadata.cluster_id = self.store.cluster_id
        self._apply_broker_configs()
        self.replica_manager.log_manager.preferred_log_dirs.update(self.store.log_dir_requests(self.broker_id))
        for topic in self.store.topics().values():
            self._lead(topic)

    def serving_on(self, endpoints: dict[str, tuple[str, int]]) -> None:
        """The broker listens (advertised address per listener name): it is the one live broker
        and the controller."""
        self.metadata.set_brokers([BrokerInfo(self.broker_id, endpoints, self.config["broker.rack"] or None)],
                                  self.broker_id)

    def _publish(self, topic: TopicState) -> None:
        offline = self.replica_manager.is_offline
        self.metadata.put_topic(TopicMetadata(topic.name, topic.topic_id, {
            index: PartitionMetadata(
                state.leader, state.leader_epoch, tuple(state.replicas), tuple(state.isr),
                (self.broker_id,) if offline(topic.name, index) else ())
            for index, state in topic.partitions.items()
        }))

    async def remember_log_dir(self, topic: str, partition: int, log_dir: str) -> None:
        self.replica_manager.log_manager.preferred_log_dirs[(topic, partition)] = log_dir
        self.store.put_log_dir_request(self.broker_id, topic, partition, log_dir)

    def _forget_used_log_dir_requests(self) -> None:
        pending = self.replica_manager.log_manager.preferred_log_dirs
        for topic, partition in list(self.store.log_dir_requests(self.broker_id)):
            if (topic, partition) not in pending:
                self.store.put_log_dir_request(self.broker_id, topic, partition, None)

    def _lead(self, topic: TopicState) -> None:
        """Lead every partition of ``topic`` this broker has a replica of, or record that it
        cannot (its replica is offline): no leader, a new leader epoch, as Kafka's controller
        does for a partition whose only replica is gone."""
        config = log_config_for(topic.configs, self.config, topic.name)
        partitions = dict(topic.partitions)
        for index, state in sorted(topic.partitions.items()):
            if self.broker_id not in state.replicas:
                continue
            is_new = self.broker_id in state.new_replicas
            epoch = state.leader_epoch if state.leader == self.broker_id else state.leader_epoch + 1
            partition = self.leadership.make_leader_or_follower(PartitionCommand(
                topic.name, topic.topic_id, index, leader=self.broker_id, leader_epoch=epoch, isr=(), replicas=(),
                partition_epoch=0, is_new=is_new), config)
            if partition is None:
                partitions[index] = _without_leader(state)
                continue
            if is_new and state.leader == NO_LEADER:
                log.warning("re-created %s-%d empty in %s, as the operator asked: the records it held "
                            "are lost", topic.name, index, partition.log.log_dir)
            partitions[index] = dataclasses.replace(
                state, leader=self.broker_id, leader_epoch=epoch,
                new_replicas=tuple(b for b in state.new_replicas if b != self.broker_id))
        if partitions != topic.partitions:
            topic = dataclasses.replace(topic, partitions=partitions)
            self.store.put_topic(topic)
        self._publish(topic)
        self._forget_used_log_dir_requests()

    def replicas_offline(self, partitions: list[tuple[str, int]]) -> None:
        """This broker's replicas of ``partitions`` went offline (their log dir failed)."""
        topics = self.store.topics()
        changed: dict[str, TopicState] = {}
        for name, index in partitions:
            topic = changed.get(name) or topics.get(name)
            state = topic.partitions.get(index) if topic is not None else None
            if topic is None or state is None:
                continue
            changed[name] = dataclasses.replace(topic, partitions={**topic.partitions, index: _without_leader(state)})
        for topic in changed.values():
            try:
                self.store.put_topic(topic)
            except KafkaStorageError as exc:
                log.error("could not record that %s lost its leader: %s", topic.name, exc)
            self._publish(topic)

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: dict[str, str | None], validate_only: bool = False,
                           assignment: dict[int, list[int]] | None = None) -> CreateTopicResult:
        return self.create_topic_now(name, num_partitions, replication_factor, configs, validate_only, assignment)

    def create_topic_now(self, name: str, num_partitions: int, replication_factor: int,
                         configs: dict[str, str | None], validate_only: bool = False,
                         assignment: dict[int, list[int]] | None = None) -> CreateTopicResult:
        reason = topic_name_error(name)
        if reason is not None:
            return CreateTopicResult(name, ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        topics = self.store.topics()
        if name in topics:
            return CreateTopicResult(name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        reason = collision_error(name, topics)
        if reason is not None:
            return CreateTopicResult(name, ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        if assignment is not None:
            reason = assignment_error(assignment, [self.broker_id])
            if reason is not None:
                return CreateTopicResult(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, reason)
            num_partitions, replication_factor = len(assignment), 1
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if num_partitions <= 0:
            return CreateTopicResult(name, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if replication_factor != 1:
            return CreateTopicResult(
                name, ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {replication_factor} larger than available brokers: 1.")
        try:
            validated = validate_topic_configs(configs)
        except InvalidTopicConfig as exc:
            return CreateTopicResult(name, ErrorCode.INVALID_CONFIG, str(exc))
        topic = TopicState(
            name=name,
            topic_id=uuid.uuid4(),
            configs=validated,
            partitions={p: self._new_partition() for p in range(num_partitions)},
        )
        if validate_only:
            return CreateTopicResult(name, ErrorCode.NONE, topic=topic)
        self.store.put_topic(topic)
        self._lead(topic)
        log.info("created topic %s with %d partition(s) (id %s)", name, num_partitions, topic.topic_id)
        return CreateTopicResult(name, ErrorCode.NONE, topic=topic)

    def _new_partition(self) -> PartitionState:
        """A partition whose one replica, on this broker, is still to be created."""
        broker = self.broker_id
        return PartitionState(leader=broker, leader_epoch=0, replicas=(broker,), isr=(broker,), new_replicas=(broker,))

    async def auto_create_topic(self, name: str) -> CreateTopicResult:
        if name in INTERNAL_TOPICS:
            return self.create_internal_topic_now(name)
        return self.create_topic_now(name, self.config["num.partitions"], self.config["default.replication.factor"], {})

    async def next_producer_id(self) -> int:
        if self._next_producer_index >= len(self._producer_ids):
            self._producer_ids = self.store.allocate_producer_id_block()
            self._next_producer_index = 0
        producer_id = self._producer_ids[self._next_producer_index]
        self._next_producer_index += 1
        return producer_id

    # ---- internal topics, deletion, more partitions, configs -------------------------------

    async def create_internal_topic(self, name: str) -> CreateTopicResult:
        return self.create_internal_topic_now(name)

    def create_internal_topic_now(self, name: str) -> CreateTopicResult:
        """Create an internal topic with its fixed layout (one replica: this broker is all there is)."""
        layout = internal_topic_layout(name, self.config)
        if layout is None:
            return CreateTopicResult(name, ErrorCode.INVALID_TOPIC_EXCEPTION, f"{name} is not an internal topic")
        # Its min.insync.replicas cannot be met by a single broker's one replica.
        configs = {k: v for k, v in layout.configs.items() if k != "min.insync.replicas"}
        return self.create_topic_now(name, layout.partitions, 1, configs)

    async def delete_topic(self, name: str) -> Outcome:
        """Remove the topic from the metadata now; its logs are renamed at once and their files
        removed in the background (LogManager, after file.delete.delay.ms)."""
        topic = self.store.topics().get(name)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist"
        if name in INTERNAL_TOPICS:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, f"Internal topic {name} cannot be deleted"
        try:
            self.store.delete_topic(name)
        except KafkaStorageError as exc:
            return ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
        self.metadata.remove_topic(name)
        for index in sorted(topic.partitions):
            self.replica_manager.remove_partition(name, index)
        log.info("deleted topic %s (id %s); its files are removed in the background", name, topic.topic_id)
        return ErrorCode.NONE, None

    async def create_partitions(self, name: str, count: int, validate_only: bool,
                                assignment: list[list[int]] | None = None) -> Outcome:
        topic = self.store.topics().get(name)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        if name in INTERNAL_TOPICS:
            # The group coordinator maps groups to partitions by the partition count.
            return ErrorCode.INVALID_TOPIC_EXCEPTION, f"The partitions of internal topic {name} cannot change"
        current = len(topic.partitions)
        error = partition_count_error(current, count, assignment, [self.broker_id])
        if error is not None:
            return error
        if validate_only:
            return ErrorCode.NONE, None
        partitions = dict(topic.partitions)
        for index in range(current, count):
            partitions[index] = self._new_partition()
        grown = dataclasses.replace(topic, partitions=partitions)
        try:
            self.store.put_topic(grown)
        except KafkaStorageError as exc:
            return ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
        self._lead(grown)
        log.info("topic %s now has %d partitions (was %d)", name, count, current)
        return ErrorCode.NONE, None

    async def topic_configs(self, name: str) -> dict[str, str] | None:
        topic = self.store.topics().get(name)
        return None if topic is None else dict(topic.configs)

    async def alter_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> Outcome:
        """Replace the topic's dynamic configs; the logs of its partitions follow at once."""
        topic = self.store.topics().get(name)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist"
        try:
            validated = validate_topic_configs(dict(configs))
        except InvalidTopicConfig as exc:
            return ErrorCode.INVALID_CONFIG, str(exc)
        if validate_only:
            return ErrorCode.NONE, None
        try:
            self.store.put_topic(dataclasses.replace(topic, configs=validated))
        except KafkaStorageError as exc:
            return ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
        self.replica_manager.update_config(name, log_config_for(validated, self.config, name))
        log.info("configs of topic %s are now %s", name, validated)
        return ErrorCode.NONE, None

    async def broker_configs(self) -> dict[str, dict[str, str]]:
        return self.store.broker_configs()

    async def alter_broker_configs(self, entity: str, configs: dict[str, str], validate_only: bool) -> Outcome:
        """Replace the dynamic configs of this broker (entity = its id) or the cluster defaults
        (entity ""); listeners registered with BrokerConfig.on_change see the new values."""
        try:
            self.config.parse_dynamic(configs, per_broker=entity != "")
        except ConfigError as exc:
            # Kafka answers a refused broker config with INVALID_REQUEST (INVALID_CONFIG is a topic's).
            return ErrorCode.INVALID_REQUEST, str(exc)
        if validate_only:
            return ErrorCode.NONE, None
        try:
            self.store.put_broker_configs(entity, configs)
        except KafkaStorageError as exc:
            return ErrorCode.KAFKA_STORAGE_ERROR, str(exc)
        self._apply_broker_configs()
        return ErrorCode.NONE, None

    def _apply_broker_configs(self) -> None:
        stored = self.store.broker_configs()
        try:
            self.config.apply_dynamic(stored.get(str(self.broker_id), {}), stored.get("", {}))
        except ConfigError as exc:
            log.error("stored dynamic broker configs not applied: %s", exc)

    def _refresh_log_configs(self, key: str, value: Any) -> None:
        for topic in self.store.topics().values():
            self.replica_manager.update_config(topic.name, log_config_for(topic.configs, self.config, topic.name))


@dataclass(frozen=True)
class InternalTopicLayout:
    """How an internal topic is created: Kafka's keys for its partitions, replication and configs."""

    partitions: int
    replication_factor: int
    configs: dict[str, str | None]


def internal_topic_layout(name: str, config: BrokerConfig) -> InternalTopicLayout | None:
    """The layout of __consumer_offsets or __transaction_state (None for another name): both are
    compacted, as Kafka's, so the latest record of each group, offset or transactional id stays."""
    if name == OFFSETS_TOPIC:
        return InternalTopicLayout(config["offsets.topic.num.partitions"], config["offsets.topic.replication.factor"],
                                   {"cleanup.policy": "compact", "segment.bytes": str(config["offsets.topic.segment.bytes"])})
    if name == TRANSACTION_STATE_TOPIC:
        return InternalTopicLayout(
            config["transaction.state.log.num.partitions"], config["transaction.state.log.replication.factor"],
            {"cleanup.policy": "compact", "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
             "min.insync.replicas": str(config["transaction.state.log.min.isr"])})
    return None


def partition_count_error(current: int, count: int, assignment: list[list[int]] | None,
                          live_brokers: list[int]) -> Outcome | None:
    """Why a topic of ``current`` partitions cannot grow to ``count``, or None."""
    if count == current:
        return ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions."
    if count < current:
        return ErrorCode.INVALID_PARTITIONS, (
            f"Topic currently has {current} partitions, which is higher than the requested {count}.")
    if assignment is not None:
        if len(assignment) != count - current:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                f"Increasing the number of partitions by {count - current} but {len(assignment)} "
                "assignments provided.")
        reason = assignment_error({current + i: list(r) for i, r in enumerate(assignment)}, live_brokers)
        if reason is not None:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, reason
    return None


def _without_leader(state: PartitionState) -> PartitionState:
    """The partition leaderless (ISR kept, as Kafka keeps the last ISR member)."""
    if state.leader == NO_LEADER:
        return state
    return dataclasses.replace(state, leader=NO_LEADER, leader_epoch=state.leader_epoch + 1)
