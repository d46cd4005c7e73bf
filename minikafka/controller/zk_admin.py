"""Cluster mode's ClusterControl: what a client asks of any broker, written to ZooKeeper.

As Apache Kafka's ZooKeeper-mode brokers did, the broker that receives CreateTopics,
CreatePartitions, DeleteTopics or a config change validates it and writes it to Kafka's
znodes (/brokers/topics, /config, /admin/delete_topics); the elected controller watches them
and carries the change out, and every broker learns the result through UpdateMetadata. Calls
that a client waits on (CreateTopics, DeleteTopics) return once this broker's metadata shows
the result, or after a bounded wait. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any, TypeVar, cast

from kazoo.exceptions import NodeExistsError

from minikafka.config.broker import BrokerConfig, ConfigError
from minikafka.controller.api import ClusterControl, CreateTopicResult, NewTopic, Outcome
from minikafka.controller.embedded import internal_topic_layout, partition_count_error
from minikafka.controller.topics import (
    RacksIncomplete,
    assign_replicas,
    assignment_error,
    collision_error,
    continuing_start,
    topic_name_error,
)
from minikafka.metadata.cache import MetadataCache
from minikafka.metadata.store import PartitionState, TopicState
from minikafka.metadata.topics import INTERNAL_TOPICS
from minikafka.replica.topic_config import InvalidTopicConfig, validate_topic_configs
from minikafka.zk.kafka_zk import ZOOKEEPER_UNAVAILABLE, KafkaZk, StaleState, TopicAssignment, topic_path
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

PROPAGATION_WAIT_S = 10.0

Method = TypeVar("Method", bound=Callable[..., Coroutine[Any, Any, Any]])


def _assignment_of(topic: TopicState) -> TopicAssignment:
    return TopicAssignment(topic.topic_id, {p: tuple(state.replicas) for p, state in topic.partitions.items()})


def _refused_without_zookeeper(refusal: Callable[[str, str], object]) -> Callable[[Method], Method]:
    """A change this broker cannot write while it has no ZooKeeper session (ZooKeeper away, or a
    session expired and not yet renewed) is answered NOT_CONTROLLER, which clients retry after
    looking for the controller again, as a ZooKeeper-mode Kafka broker that cannot act answers;
    not with a closed connection. ``refusal(name, message)`` builds the method's answer."""
    def decorate(method: Method) -> Method:
        @functools.wraps(method)
        async def guarded(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
            try:
                return await method(self, name, *args, **kwargs)
            except ZOOKEEPER_UNAVAILABLE as exc:
                message = f"ZooKeeper is unavailable to this broker ({type(exc).__name__}); try again"
                log.warning("%s of %s refused: %s", method.__name__, name or "<default>", message)
                return refusal(name, message)
        return cast(Method, guarded)
    return decorate


_REFUSED_TOPIC = _refused_without_zookeeper(lambda name, message: CreateTopicResult(name, ErrorCode.NOT_CONTROLLER,
                                                                                    message))
_REFUSED = _refused_without_zookeeper(lambda _name, message: (ErrorCode.NOT_CONTROLLER, message))


def _racks_incomplete(name: str, live: dict[int, str | None], exc: RacksIncomplete) -> Outcome:
    """Kafka's answer when only some brokers have a rack: its AdminOperationException is no API
    error, so the client gets UNKNOWN_SERVER_ERROR; the message and the log say which brokers lack one."""
    message = f"{exc} Brokers without broker.rack: {sorted(b for b, rack in live.items() if not rack)}"
    log.error("cannot place the new replicas of %s: %s", name, message)
    return ErrorCode.UNKNOWN_SERVER_ERROR, message


class ZkClusterAdmin(ClusterControl):
    def __init__(self, config: BrokerConfig, zk: KafkaZk, metadata: MetadataCache,
                 apply_broker_configs: Callable[[], None], preferred_log_dirs: dict[tuple[str, int], str],
                 producer_ids_from_controller: Callable[[], Awaitable[range]] | None = None) -> None:
        self.config = config
        self.zk = zk
        self.metadata = metadata
        self.broker_id = config.broker_id
        self._apply_broker_configs = apply_broker_configs
        self._producer_ids: range = range(0)
        self._next_producer_index = 0
        self._producer_id_lock = asyncio.Lock()
        # From inter.broker.protocol.version 3.0-IV0 the controller hands out producer id blocks
        # (KIP-730): the broker's way to ask it (None: ZooKeeper's /latest_producer_id_block only).
        self.producer_ids_from_controller = producer_ids_from_controller
        # The log manager's: it creates a replica in the dir asked for before the replica existed.
        self.preferred_log_dirs = preferred_log_dirs

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id

    @property
    def max_replication_factor(self) -> int:
        return len(self.metadata.live_broker_ids())

    async def _live_brokers(self) -> dict[int, str | None]:
        """Each live broker's rack. The registrations are the truth; the cache may lag a broker
        that just started."""
        return {broker: registration.rack for broker, registration in sorted((await self.zk.live_brokers()).items())}

    @_REFUSED_TOPIC
    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           configs: dict[str, str | None], validate_only: bool = False,
                           assignment: dict[int, list[int]] | None = None, wait: bool = True) -> CreateTopicResult:
        """One topic; with ``wait``, answered once this broker's metadata shows its leaders (or
        after PROPAGATION_WAIT_S, without an error: the topic is created all the same)."""
        (result,) = await self._create([NewTopic(name, num_partitions, replication_factor, configs, assignment)],
                                       validate_only)
        topic = result.topic
        if wait and not validate_only and result.error == ErrorCode.NONE and topic is not None:
            await self._await(lambda: self._ready(name, len(topic.partitions)))
        return result

    async def create_topics(self, topics: Sequence[NewTopic], validate_only: bool,
                            timeout_ms: int) -> list[CreateTopicResult]:
        """As Kafka's ZooKeeper-mode brokers: every topic validated and written (in one
        transaction, so the controller creates all their partitions in one go), then, with
        ``timeout_ms`` > 0, one wait for all of them to have leaders in this broker's metadata."""
        try:
            results = await self._create(topics, validate_only)
        except ZOOKEEPER_UNAVAILABLE as exc:
            message = f"ZooKeeper is unavailable to this broker ({type(exc).__name__}); try again"
            log.warning("CreateTopics of %s refused: %s", ", ".join(t.name for t in topics), message)
            return [CreateTopicResult(t.name, ErrorCode.NOT_CONTROLLER, message) for t in topics]
        created = {r.name: len(r.topic.partitions) for r in results
                   if r.error == ErrorCode.NONE and r.topic is not None}
        if validate_only or timeout_ms <= 0 or not created:
            return results
        await self._await(lambda: all(self._ready(name, count) for name, count in created.items()), timeout_ms / 1000)
        late = {name for name, count in created.items() if not self._ready(name, count)}
        if late:
            log.warning("CreateTopics: %s created, but not every partition has a leader in this broker's metadata "
                        "within the request's %d ms", ", ".join(sorted(late)), timeout_ms)
        return [replace(r, error=ErrorCode.REQUEST_TIMED_OUT,
                        message=f"Topic '{r.name}' is created, but not all its partitions had a leader within "
                                f"{timeout_ms} ms") if r.name in late else r for r in results]

    async def _create(self, topics: Sequence[NewTopic], validate_only: bool) -> list[CreateTopicResult]:
        """Validate each topic (against those before it in the request too) and write the valid
        ones; a result for each."""
        existing = set(await self.zk.topic_names())
        live = await self._live_brokers()
        results = [await self._validate(topic, existing, live) for topic in topics]
        if validate_only:
            return results
        valid = {r.name: r.topic for r in results if r.error == ErrorCode.NONE and r.topic is not None}
        if not valid:
            return results
        try:
            await self.zk.create_topics({name: (_assignment_of(topic), topic.configs) for name, topic in valid.items()})
        except (NodeExistsError, StaleState):
            # One of them was created meanwhile: each on its own, to tell which.
            results = [await self._write_one(r) if r.name in valid else r for r in results]
        for result in results:
            topic = result.topic
            if result.error == ErrorCode.NONE and topic is not None:
                log.info("topic %s (id %s) written to ZooKeeper: %d partition(s), replicas %s", topic.name,
                         topic.topic_id, len(topic.partitions),
                         {p: list(state.replicas) for p, state in sorted(topic.partitions.items())})
        return results

    async def _write_one(self, result: CreateTopicResult) -> CreateTopicResult:
        topic = result.topic
        assert topic is not None
        try:
            await self.zk.create_topic(topic.name, _assignment_of(topic), topic.configs)
        except (NodeExistsError, StaleState):
            return CreateTopicResult(topic.name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
        return result

    async def _validate(self, new: NewTopic, existing: set[str], live: dict[int, str | None]) -> CreateTopicResult:
        """The topic to write (its result carries it), or why not; a valid name joins ``existing``,
        so that a later topic of the same request that collides with it is refused."""
        name, assignment = new.name, new.assignment
        reason = topic_name_error(name)
        if reason is not None:
            return CreateTopicResult(name, ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        if name in existing:
            marked = name in await self.zk.topics_to_delete()
            return CreateTopicResult(name, ErrorCode.TOPIC_ALREADY_EXISTS,
                                     f"Topic '{name}' is marked for deletion." if marked
                                     else f"Topic '{name}' already exists.")
        reason = collision_error(name, existing)
        if reason is not None:
            return CreateTopicResult(name, ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        if assignment is not None:
            reason = assignment_error(assignment, live)
            if reason is not None:
                return CreateTopicResult(name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, reason)
        else:
            num_partitions, replication_factor = new.num_partitions, new.replication_factor
            if num_partitions == -1:
                num_partitions = self.config["num.partitions"]
            if replication_factor == -1:
                replication_factor = self.config["default.replication.factor"]
            if num_partitions <= 0:
                return CreateTopicResult(name, ErrorCode.INVALID_PARTITIONS,
                                         "Number of partitions must be larger than 0.")
            if replication_factor <= 0:
                return CreateTopicResult(name, ErrorCode.INVALID_REPLICATION_FACTOR,
                                         "Replication factor must be larger than 0.")
            if replication_factor > len(live):
                return CreateTopicResult(name, ErrorCode.INVALID_REPLICATION_FACTOR,
                                         f"Replication factor: {replication_factor} larger than available brokers: "
                                         f"{len(live)}.")
            try:
                assignment = assign_replicas(live, num_partitions, replication_factor)
            except RacksIncomplete as exc:
                return CreateTopicResult(name, *_racks_incomplete(name, live, exc))
        try:
            validated = validate_topic_configs(new.configs)
        except InvalidTopicConfig as exc:
            return CreateTopicResult(name, ErrorCode.INVALID_CONFIG, str(exc))
        existing.add(name)
        topic = TopicState(name, uuid.uuid4(), {p: PartitionState(r[0], 0, tuple(r), tuple(r))
                                                for p, r in assignment.items()}, validated)
        return CreateTopicResult(name, ErrorCode.NONE, topic=topic)

    def _ready(self, name: str, partitions: int) -> bool:
        topic = self.metadata.topic(name)
        return topic is not None and len(topic.partitions) >= partitions and all(
            p.leader >= 0 for p in topic.partitions.values())

    async def _await(self, condition: Callable[[], bool], timeout_s: float = PROPAGATION_WAIT_S) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not condition():
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return True

    async def auto_create_topic(self, name: str) -> CreateTopicResult:
        if name in INTERNAL_TOPICS:
            return await self.create_internal_topic(name)
        return await self.create_topic(name, self.config["num.partitions"], self.config["default.replication.factor"],
                                       {}, wait=False)

    async def create_internal_topic(self, name: str) -> CreateTopicResult:
        layout = internal_topic_layout(name, self.config)
        if layout is None:
            return CreateTopicResult(name, ErrorCode.INVALID_TOPIC_EXCEPTION, f"{name} is not an internal topic")
        live = len(await self._live_brokers())
        factor = min(layout.replication_factor, live)
        configs = dict(layout.configs)
        if factor < layout.replication_factor:
            log.warning("creating %s with replication factor %d: %d is configured but only %d broker(s) are alive",
                        name, factor, layout.replication_factor, live)
            if int(configs.get("min.insync.replicas") or 1) > factor:
                configs["min.insync.replicas"] = str(factor)
        return await self.create_topic(name, layout.partitions, factor, configs, wait=False)

    @_REFUSED
    async def delete_topic(self, name: str) -> Outcome:
        if name not in await self.zk.topic_names():
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist"
        if name in INTERNAL_TOPICS:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, f"Internal topic {name} cannot be deleted"
        await self.zk.mark_topic_for_deletion(name)
        log.info("topic %s marked for deletion", name)
        # Answered once the controller has finished (the name is free again). When a replica's
        # broker is down, the controller keeps the topic pending until that broker is back (as
        # Kafka's does): then answered once the topic has left the metadata, as Kafka answers.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PROPAGATION_WAIT_S
        while loop.time() < deadline and await self.zk.exists(topic_path(name)) is not None:
            if self.metadata.topic(name) is None and (away := await self._replica_brokers_down(name)):
                log.info("topic %s is deleted from the metadata; its deletion is pending until brokers %s, which are "
                         "down, delete their replicas", name, away)
                return ErrorCode.NONE, None
            await asyncio.sleep(0.05)
        await self._await(lambda: self.metadata.topic(name) is None)
        return ErrorCode.NONE, None

    async def _replica_brokers_down(self, name: str) -> list[int]:
        """The brokers holding replicas of topic ``name`` that are not registered."""
        assignment = await self.zk.topic_assignment(name)
        if assignment is None:
            return []
        live = await self.zk.live_brokers()
        return sorted({b for replicas in assignment.partitions.values() for b in replicas} - set(live))

    @_REFUSED
    async def create_partitions(self, name: str, count: int, validate_only: bool,
                                assignment: list[list[int]] | None = None) -> Outcome:
        found = await self.zk.topic_assignment_versioned(name)
        if found is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        if name in INTERNAL_TOPICS:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, f"The partitions of internal topic {name} cannot change"
        current_assignment, version = found
        current = len(current_assignment.partitions)
        live = await self._live_brokers()
        error = partition_count_error(current, count, assignment, list(live))
        if error is not None:
            return error
        if assignment is None:
            factor = len(current_assignment.partitions[0])
            if factor > len(live):
                return ErrorCode.INVALID_REPLICATION_FACTOR, (
                    f"Replication factor: {factor} larger than available brokers: {len(live)}.")
            start = continuing_start(live, current_assignment.partitions[0][0])
            try:
                added = assign_replicas(live, count - current, factor, first_partition=current, start=start)
            except RacksIncomplete as exc:
                return _racks_incomplete(name, live, exc)
        else:
            added = {current + i: list(r) for i, r in enumerate(assignment)}
        if validate_only:
            return ErrorCode.NONE, None
        grown = TopicAssignment(current_assignment.topic_id, {**current_assignment.partitions,
                                                              **{p: tuple(r) for p, r in added.items()}})
        try:
            await self.zk.set_topic_assignment(name, grown, version)
        except StaleState:
            return ErrorCode.REASSIGNMENT_IN_PROGRESS, f"Topic {name} changed meanwhile; try again"
        log.info("topic %s grows from %d to %d partitions", name, current, count)
        await self._await(lambda: self._ready(name, count))
        return ErrorCode.NONE, None

    async def topic_configs(self, name: str) -> dict[str, str] | None:
        if name not in await self.zk.topic_names():
            return None
        return await self.zk.entity_configs("topics", name) or {}

    @_REFUSED
    async def alter_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> Outcome:
        if name not in await self.zk.topic_names():
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist"
        try:
            validated = validate_topic_configs(dict(configs))
        except InvalidTopicConfig as exc:
            return ErrorCode.INVALID_CONFIG, str(exc)
        if validate_only:
            return ErrorCode.NONE, None
        await self.zk.set_entity_configs("topics", name, validated)
        log.info("configs of topic %s are now %s", name, validated)
        return ErrorCode.NONE, None

    async def broker_configs(self) -> dict[str, dict[str, str]]:
        found = {}
        for entity in (str(self.broker_id), "<default>"):
            configs = await self.zk.entity_configs("brokers", entity)
            if configs:
                found["" if entity == "<default>" else entity] = configs
        return found

    @_REFUSED
    async def alter_broker_configs(self, entity: str, configs: dict[str, str], validate_only: bool) -> Outcome:
        try:
            self.config.parse_dynamic(configs, per_broker=entity != "")
        except ConfigError as exc:
            # Kafka answers a refused broker config with INVALID_REQUEST (INVALID_CONFIG is a topic's).
            return ErrorCode.INVALID_REQUEST, str(exc)
        if validate_only:
            return ErrorCode.NONE, None
        await self.zk.set_entity_configs("brokers", entity or "<default>", configs)
        self._apply_broker_configs()
        return ErrorCode.NONE, None

    async def next_producer_id(self) -> int:
        async with self._producer_id_lock:
            if self._next_producer_index >= len(self._producer_ids):
                if self.producer_ids_from_controller is not None \
                        and self.config["inter.broker.protocol.version"].allocate_producer_ids:
                    self._producer_ids = await self.producer_ids_from_controller()
                else:
                    self._producer_ids = await self.zk.allocate_producer_ids(self.broker_id)
                self._next_producer_index = 0
            producer_id = self._producer_ids[self._next_producer_index]
            self._next_producer_index += 1
            return producer_id

    async def remember_log_dir(self, topic: str, partition: int, log_dir: str) -> None:
        self.preferred_log_dirs[(topic, partition)] = log_dir
