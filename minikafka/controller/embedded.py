"""The in-process controller of the embedded mode (one broker that is its own controller).

It owns the cluster metadata (through a MetadataStore), creates topics, allocates producer ids
and tells the ReplicaManager which partitions to lead. Handlers call it; it is touched only from
the event loop.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any

from minikafka.config import DEFINITIONS, BrokerConfig, ConfigError
from minikafka.controller.metadata_store import NO_LEADER, MetadataStore, PartitionState, TopicState
from minikafka.replica.replica_manager import ReplicaManager
from minikafka.storage.errors import KafkaStorageError
from minikafka.topic_config import TOPIC_CONFIGS, InvalidTopicConfig, log_config_for, validate_topic_configs
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state"})


@dataclass
class CreateTopicResult:
    name: str
    error: ErrorCode
    message: str | None = None
    topic: TopicState | None = None


def topic_name_error(name: str) -> str | None:
    """Why Kafka would refuse this topic name, or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        return f"Topic name {name} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


class EmbeddedController:
    """Creates topics and leads every partition on the one broker of the embedded mode."""

    def __init__(self, config: BrokerConfig, store: MetadataStore, replica_manager: ReplicaManager) -> None:
        self.config = config
        self.store = store
        self.replica_manager = replica_manager
        self.broker_id = config.broker_id
        self._producer_ids: range = range(0)
        self._next_producer_index = 0
        # Broker keys that give topic configs their defaults: when one changes dynamically, every
        # log that does not override it follows.
        for key in sorted({d.broker_key for d in TOPIC_CONFIGS.values() if d.broker_key is not None}):
            if DEFINITIONS[key].dynamic:
                config.on_change(key, self._refresh_log_configs)

    @property
    def cluster_id(self) -> str:
        return self.store.cluster_id

    def topics(self) -> dict[str, TopicState]:
        return self.store.topics()

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        return self.store.topic_by_id(topic_id)

    def startup(self) -> None:
        """Apply the stored dynamic broker configs and lead every partition. The store is loaded
        already: the broker needs its cluster id before the logs start."""
        self._apply_broker_configs()
        self.replica_manager.log_manager.preferred_log_dirs.update(self.store.log_dir_requests(self.broker_id))
        for topic in self.store.topics().values():
            self._lead(topic)

    def remember_log_dir(self, topic: str, partition: int, log_dir: str) -> None:
        """AlterReplicaLogDirs named a replica this broker does not host yet: create it in
        ``log_dir`` when it comes (KIP-113), even if the broker restarts meanwhile."""
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
        config = log_config_for(topic.configs, self.config)
        changed = False
        for index, state in sorted(topic.partitions.items()):
            if self.broker_id not in state.replicas:
                continue
            is_new = self.broker_id in state.new_replicas
            epoch = state.leader_epoch if state.leader == self.broker_id else state.leader_epoch + 1
            partition = self.replica_manager.become_leader(
                topic.name, index, topic.topic_id, epoch, config, is_new_replica=is_new)
            if partition is None:
                changed |= _without_leader(state)
                continue
            if is_new:
                if state.leader == NO_LEADER:
                    log.warning("re-created %s-%d empty in %s, as the operator asked: the records it held "
                                "are lost", topic.name, index, partition.log.log_dir)
                state.new_replicas.remove(self.broker_id)
                changed = True
            if state.leader != self.broker_id:
                state.leader, state.leader_epoch = self.broker_id, epoch
                changed = True
        if changed:
            self.store.put_topic(topic)
        self._forget_used_log_dir_requests()

    def replicas_offline(self, partitions: list[tuple[str, int]]) -> None:
        """This broker's replicas of ``partitions`` went offline (their log dir failed)."""
        topics = self.store.topics()
        changed: dict[str, TopicState] = {}
        for name, index in partitions:
            topic = topics.get(name)
            state = topic.partitions.get(index) if topic is not None else None
            if topic is not None and state is not None and _without_leader(state):
                changed[name] = topic
        for topic in changed.values():
            try:
                self.store.put_topic(topic)
            except KafkaStorageError as exc:
                log.error("could not record that %s lost its leader: %s", topic.name, exc)

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str | None], validate_only: bool = False) -> CreateTopicResult:
        reason = topic_name_error(name)
        if reason is not None:
            return CreateTopicResult(name, ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        topics = self.store.topics()
        if name in topics:
            return CreateTopicResult(name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        for existing in topics:
            if _collision_key(existing) == _collision_key(name):
                return CreateTopicResult(name, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                         f"Topic '{name}' collides with existing topic: {existing}")
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
        return PartitionState(leader=broker, leader_epoch=0, replicas=[broker], isr=[broker], new_replicas=[broker])

    def auto_create_topic(self, name: str) -> CreateTopicResult:
        if name in INTERNAL_TOPICS:
            return self.create_internal_topic(name)
        return self.create_topic(name, self.config["num.partitions"], self.config["default.replication.factor"], {})

    def next_producer_id(self) -> int:
        if self._next_producer_index >= len(self._producer_ids):
            self._producer_ids = self.store.allocate_producer_id_block()
            self._next_producer_index = 0
        producer_id = self._producer_ids[self._next_producer_index]
        self._next_producer_index += 1
        return producer_id

    # ---- internal topics, deletion, more partitions, configs -------------------------------

    def create_internal_topic(self, name: str) -> CreateTopicResult:
        """Create an internal topic with its fixed layout (only __consumer_offsets is served).

        Its log keeps everything (no retention): the group coordinator bounds it by rewriting
        partitions as snapshots of their live state."""
        if name != OFFSETS_TOPIC:
            return CreateTopicResult(name, ErrorCode.INVALID_TOPIC_EXCEPTION, f"internal topic {name} is not served")
        configs: dict[str, str | None] = {
            "retention.ms": "-1", "retention.bytes": "-1",
            "segment.bytes": str(self.config["offsets.topic.segment.bytes"]),
        }
        return self.create_topic(name, self.config["offsets.topic.num.partitions"], 1, configs)

    def delete_topic(self, name: str) -> tuple[ErrorCode, str | None]:
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
        for index in sorted(topic.partitions):
            self.replica_manager.remove_partition(name, index)
        log.info("deleted topic %s (id %s); its files are removed in the background", name, topic.topic_id)
        return ErrorCode.NONE, None

    def create_partitions(self, name: str, count: int, validate_only: bool) -> tuple[ErrorCode, str | None]:
        topic = self.store.topics().get(name)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        if name in INTERNAL_TOPICS:
            # The group coordinator maps groups to partitions by the partition count.
            return ErrorCode.INVALID_TOPIC_EXCEPTION, f"The partitions of internal topic {name} cannot change"
        current = len(topic.partitions)
        if count == current:
            return ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions."
        if count < current:
            return ErrorCode.INVALID_PARTITIONS, (
                f"Topic currently has {current} partitions, which is higher than the requested {count}.")
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

    def alter_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> tuple[ErrorCode, str | None]:
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
        self.replica_manager.update_config(name, log_config_for(validated, self.config))
        log.info("configs of topic %s are now %s", name, validated)
        return ErrorCode.NONE, None

    def broker_configs(self) -> dict[str, dict[str, str]]:
        return self.store.broker_configs()

    def alter_broker_configs(self, entity: str, configs: dict[str, str], validate_only: bool) -> tuple[ErrorCode, str | None]:
        """Replace the dynamic configs of this broker (entity = its id) or the cluster defaults
        (entity ""); listeners registered with BrokerConfig.on_change see the new values."""
        try:
            self.config.parse_dynamic(configs)
        except ConfigError as exc:
            return ErrorCode.INVALID_CONFIG, str(exc)
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
            self.replica_manager.update_config(topic.name, log_config_for(topic.configs, self.config))


def _without_leader(state: PartitionState) -> bool:
    """Mark the partition leaderless (ISR kept, as Kafka keeps the last ISR member); True if
    that changed anything."""
    if state.leader == NO_LEADER:
        return False
    state.leader = NO_LEADER
    state.leader_epoch += 1
    return True
