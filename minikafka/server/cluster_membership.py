"""A cluster broker's life in ZooKeeper: its registration, its standing for controller, the
ISR changes it makes as leader (proposed to the controller with AlterPartition, or written to
ZooKeeper below inter.broker.protocol.version 2.7-IV2), the producer id blocks it asks the
controller for (3.0-IV0 on), the topic configs it applies, and its clean shutdown.

``ClusterMembership`` owns the broker's ZooKeeper session (``KafkaZk``) and its ``ZkController``.
When the session expires (ZooKeeper unreachable for zookeeper.session.timeout.ms, or the broker
paused that long) the broker's ephemeral registration is gone and the controller elects other
leaders; once ZooKeeper is back the broker registers again with a new broker epoch, and the
controller's LeaderAndIsr tells it what it leads and follows now. Meanwhile it cannot change an
ISR (the write is conditional), so as a deposed leader it can never acknowledge acks=all alone.
Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from minikafka.config.broker import BrokerConfig, ConfigError
from minikafka.controller.events import ControllerMoved, SessionExpired
from minikafka.controller.isr_proposals import UNKNOWN_BROKER_EPOCH
from minikafka.controller.isr_proposals import IsrProposal as ControllerIsrProposal
from minikafka.controller.zk_controller import ZkController
from minikafka.net.client import BrokerClient, BrokerUnreachable
from minikafka.replica.partition import IsrProposal, Partition
from minikafka.replica.replica_manager import ReplicaManager, TopicPartition
from minikafka.replica.topic_config import dynamic_topic_defaults, log_config_for
from minikafka.security.client import PLAINTEXT_CLIENT, ClientSecurity
from minikafka.server.repeated_log import RepeatedLog
from minikafka.storage.log import ZERO_UUID
from minikafka.zk.kafka_zk import (
    ZOOKEEPER_UNAVAILABLE,
    BrokerIdTaken,
    BrokerRegistration,
    KafkaZk,
    LogDirState,
    StaleState,
)
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)
# One line a minute per partition and error for an ISR change proposed again and again.
isr_retries = RepeatedLog(log)

DeletedTopics = Callable[[Mapping[TopicPartition, uuid.UUID], Mapping[str, uuid.UUID | None]], None]
CONTROLLED_SHUTDOWN = 7
CONTROLLED_SHUTDOWN_VERSION = 3
ALTER_PARTITION = 56
ALLOCATE_PRODUCER_IDS, ALLOCATE_PRODUCER_IDS_VERSION = 67, 0
CONTROLLER_REQUEST_TIMEOUT_S = 30.0
CONTROLLER_WATCH_S = 0.2  # how often an unanswered request looks whether the controller changed
# After the controller could not be reached or refused a whole request (NOT_CONTROLLER during an
# election, a stale broker epoch before the new registration is seen): wait before asking again.
CONTROLLER_RETRY_BACKOFF_S = 0.5
CONFIG_CATCH_UP_S = 2.0  # the longest a LeaderAndIsr waits to read config changes first
PRODUCER_ID_BLOCK_ATTEMPTS = 20
# AlterPartition errors that say the proposal was not recorded and the state is still the one it
# was decided from (or the partition is gone): only these let a pending ISR change drop unanswered.
NOT_RECORDED = frozenset({ErrorCode.INELIGIBLE_REPLICA, ErrorCode.INVALID_REQUEST,
                          ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID})


class ControllerRequestFailed(Exception):
    """The controller could not be asked, or refused the whole request."""


@dataclass(frozen=True)
class _IsrAnswer:
    """The controller's answer for one partition of an AlterPartition."""

    error: ErrorCode
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


class ClusterMembership:
    def __init__(self, config: BrokerConfig, zk: KafkaZk, replica_manager: ReplicaManager,
                 registration: BrokerRegistration, inter_broker_listener: str,
                 security: ClientSecurity = PLAINTEXT_CLIENT, *,
                 control_plane_security: ClientSecurity | None = None,
                 controller_endpoint: Callable[[], tuple[str, int] | None] = lambda: None,
                 on_deleted_topics: DeletedTopics | None = None,
                 on_user_changed: Callable[[str], Awaitable[None]] | None = None,
                 on_new_session: Callable[[], Awaitable[None]] | None = None,
                 on_quota_changed: Callable[[str], Awaitable[None]] | None = None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.zk = zk
        self.replica_manager = replica_manager
        self.registration = registration
        self.inter_broker_listener = inter_broker_listener
        self.broker_epoch = -1
        self.security = security  # how this broker connects to the others (and its controller to them)
        self.controller = ZkController(config, zk, inter_broker_listener, security, control_plane_security)
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._seen_config_changes: set[str] = set()
        self._config_changes_lock = asyncio.Lock()
        self._session_lost = False
        self._stopping = False
        # ISR changes waiting to be proposed to the controller (AlterPartition), and whether a
        # task is sending them.
        self._isr_proposals: dict[TopicPartition, tuple[Partition, IsrProposal]] = {}
        self._sending_isr_proposals = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.controller_endpoint = controller_endpoint
        # Told, after each registration, which of this broker's replicas are of topics deleted
        # while it was away (see Leadership.delete_replicas_of_deleted_topics).
        self.on_deleted_topics = on_deleted_topics
        # Security (minikafka/security): a user's /config/users znode changed (its name as in the
        # znode path), and a new session began whose watches must be set again.
        self.on_user_changed = on_user_changed
        self.on_new_session = on_new_session
        # Client quotas (minikafka/quota): an entity's znode changed (its entity path, "users/alice").
        self.on_quota_changed = on_quota_changed
        # Broker keys that give topic configs their defaults: when one changes dynamically, every
        # hosted log that does not override it follows (as the embedded controller does).
        for key in dynamic_topic_defaults():
            config.on_change(key, lambda _key, _value: self._spawn(self._refresh_log_configs))

    async def start(self) -> None:
        self.broker_epoch = await self._register()
        log.info("registered broker %d in ZooKeeper (broker epoch %d)", self.broker_id, self.broker_epoch)
        self.zk.on_state(self._session_state)
        self._seen_config_changes = set(await self.zk.children("/config/changes", self._config_changed))
        await self._apply_broker_configs()
        self.controller.start()
        self._spawn(self._find_deleted_topics)

    async def _register(self) -> int:
        """Register; a registration left by this broker's previous process (killed before its
        session ended) expires within the session timeout, so wait that long before calling
        the id taken by another live broker."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config["zookeeper.session.timeout.ms"] * 1.5 / 1000
        waited = False
        while True:
            try:
                return await self.zk.register_broker(self.registration)
            except BrokerIdTaken:
                if loop.time() >= deadline:
                    raise
                if not waited:
                    waited = True
                    log.info("broker.id %d is still registered by an earlier session (this broker's previous "
                             "run?); waiting up to the session timeout for it to expire", self.broker_id)
                await asyncio.sleep(0.5)

    def _spawn(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        task = asyncio.get_running_loop().create_task(work())
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        """Every background task's outcome is looked at: one that failed says so in the log
        (the work that needs ZooKeeper is started again by its watch once ZooKeeper is back)."""
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("background work of the cluster membership failed (%s)", _described(exc),
                      exc_info=not isinstance(exc, ZOOKEEPER_UNAVAILABLE))

    # ---- the session ------------------------------------------------------------------------
    def _session_state(self, state: str) -> None:
        if self._stopping:
            return
        if state == "suspended":
            log.warning("lost the connection to ZooKeeper; retrying (the session expires after %d ms)",
                        self.config["zookeeper.session.timeout.ms"])
        elif state == "lost":
            self._session_lost = True
            resigned = self.replica_manager.resign_leaderships()
            log.error("ZooKeeper session expired: this broker's registration is gone and other brokers take over; "
                      "it stopped leading %d partition(s) it cannot confirm, and registers again when ZooKeeper "
                      "is back", len(resigned))
            self.controller.post(SessionExpired())
        elif state == "connected":
            if self._session_lost:
                self._session_lost = False
                self._spawn(self._register_again)
            else:
                log.info("reconnected to ZooKeeper within the session")

    async def _register_again(self) -> None:
        for attempt in range(100):
            try:
                self.broker_epoch = await self.zk.register_broker(self.registration)
                break
            except Exception as exc:  # ZooKeeper flapping: try again shortly
                log.warning("registering again failed (%s); retrying", _described(exc))
                await asyncio.sleep(min(0.2 * (attempt + 1), 2.0))
        else:
            return
        log.info("registered broker %d again in a new ZooKeeper session (broker epoch %d)", self.broker_id,
                 self.broker_epoch)
        self.controller.post(ControllerMoved())
        # Topics may have been deleted, or re-created with other configs, while it was cut off;
        # configs changed meanwhile were announced to a session that was gone: read them now.
        self._topic_configs.clear()
        try:
            await self._read_config_changes()
            await self._apply_broker_configs()
            if self.on_new_session is not None:
                await self.on_new_session()
        except ZOOKEEPER_UNAVAILABLE as exc:  # gone again: the next session starts over
            log.warning("ZooKeeper went away again while re-reading configs after the new session (%s)",
                        _described(exc))
            return
        await self._find_deleted_topics()

    async def _find_deleted_topics(self) -> None:
        """Which replicas here belong to topics deleted while this broker was away (no StopReplica
        reached it): their topic is gone from ZooKeeper, or has another topic id. The replicas are
        listed before ZooKeeper is read, so a topic created meanwhile is never taken for deleted."""
        if self.on_deleted_topics is None:
            return
        checked = self.replica_manager.replica_topic_ids()
        existing: dict[str, uuid.UUID | None] = {}
        try:
            for topic in sorted({topic for topic, _ in checked}):
                assignment = await self.zk.topic_assignment(topic)
                existing[topic] = assignment.topic_id if assignment is not None else None
        except Exception as exc:  # ZooKeeper gone again: the next registration looks again
            log.warning("could not check for topics deleted while this broker was away: %s", _described(exc))
            return
        self.on_deleted_topics(checked, existing)

    async def update_log_dirs(self, log_dirs: tuple[LogDirState, ...]) -> None:
        """Rewrite the registration with the log dirs' states (one failed); a later
        re-registration carries them too."""
        self.registration = dataclasses.replace(self.registration, log_dirs=log_dirs)
        await self.zk.update_broker_registration(self.registration)

    # ---- ISR changes as leader -------------------------------------------------------------------
    def propose_isr(self, partition: Partition, proposal: IsrProposal) -> None:
        # From 2.7-IV2 the controller records ISR changes (KIP-497), so the leader asks it; before,
        # the leader writes the state znode itself, as Kafka's leaders did.
        if not self.config["inter.broker.protocol.version"].alter_partition:
            self._spawn(lambda: self._write_isr(partition, proposal))
            return
        self._isr_proposals[(partition.topic, partition.index)] = (partition, proposal)
        if not self._sending_isr_proposals:
            self._sending_isr_proposals = True
            self._spawn(self._send_isr_proposals)

    async def _send_isr_proposals(self) -> None:
        """Send the waiting ISR proposals to the controller, all of them in one AlterPartition, one
        request at a time, as Kafka's leaders do (a broker back from a restart rejoins hundreds of
        ISRs at once)."""
        try:
            while self._isr_proposals and not self._stopping:
                batch, self._isr_proposals = self._isr_proposals, {}
                await self._alter_partitions(list(batch.values()))
        finally:
            self._sending_isr_proposals = False

    async def _alter_partitions(self, batch: list[tuple[Partition, IsrProposal]]) -> None:
        """Propose the leader's new ISRs to the controller and take what it recorded; a partition
        it refuses waits for the controller's news (LeaderAndIsr), or takes the state znode's ISR
        when that is still this leadership's."""
        try:
            answers = await self._ask_alter_partition(batch)
        except Exception as exc:
            # The controller may have recorded them before the answer was lost: they stay
            # pending (a proposed member counts toward the high watermark) and go again.
            log.warning("could not propose %d ISR change(s) to the controller (%s); proposing them again",
                        len(batch), _described(exc))
            await asyncio.sleep(CONTROLLER_RETRY_BACKOFF_S)
            self._propose_again(batch)
            return
        unresolved = [(partition, proposal) for (partition, proposal), answer in zip(batch, answers, strict=True)
                      if not await self._isr_answered(partition, proposal, answer)]
        if unresolved:
            await asyncio.sleep(CONTROLLER_RETRY_BACKOFF_S)
            self._propose_again(unresolved)

    def _propose_again(self, batch: list[tuple[Partition, IsrProposal]]) -> None:
        """Send again each proposal of ``batch`` still pending: its partition still hosted here
        and leading in the proposal's epoch (a LeaderAndIsr since then settled the rest)."""
        for partition, proposal in batch:
            if partition.pending_isr is proposal and partition.is_leader and \
                    self.replica_manager.get_partition(partition.topic, partition.index) is partition:
                self.propose_isr(partition, proposal)

    async def _isr_answered(self, partition: Partition, proposal: IsrProposal, answer: _IsrAnswer) -> bool:
        """Take the controller's answer to one proposal; False when it leaves unknown whether the
        proposal was recorded (the proposal then stays pending, to be sent again)."""
        topic, index = partition.topic, partition.index
        ours = answer.leader == self.broker_id and answer.leader_epoch == proposal.leader_epoch
        if answer.error == ErrorCode.NONE and ours and answer.isr == proposal.isr:
            old = partition.isr
            self.replica_manager.isr_committed(partition, proposal, answer.partition_epoch)
            # The ISR change line ends with the new ISR, as the ZooKeeper path's does.
            log.info("recorded by the controller: %s-%d: in-sync replicas %s -> %s", topic, index, list(old),
                     list(proposal.isr))
            return True
        if answer.error in NOT_RECORDED:
            recorded = None  # the state is the one the proposal was decided from
        elif answer.error == ErrorCode.NONE:
            recorded = (answer.isr, answer.partition_epoch) if ours else None
        else:
            # Refused (most often INVALID_UPDATE_VERSION: the state changed meanwhile, perhaps only
            # to record a replica's log dir, which no LeaderAndIsr announces): the state znode
            # tells whether it is still this leadership's.
            recorded = await self._recorded_isr(topic, index, proposal.leader_epoch)
            if recorded is None:
                # Another leadership's state, or ZooKeeper unreachable: an earlier send of this
                # proposal may be what the controller recorded, so its members keep counting
                # toward the high watermark until the controller's LeaderAndIsr settles it.
                isr_retries.log(logging.INFO, (topic, index, answer.error), "%s-%d: the controller did not change "
                                "the ISR to %s (%s); the state it holds is not this leadership's (or ZooKeeper is "
                                "unreachable): proposing it again until the controller's news comes", topic, index,
                                list(proposal.isr), answer.error.name)
                return False
        log.info("%s-%d: the controller did not change the ISR to %s (%s)%s", topic, index, list(proposal.isr),
                 answer.error.name, f"; in-sync replicas now {list(recorded[0])}" if recorded else "")
        self.replica_manager.isr_refused(partition, proposal, recorded)
        return True

    async def _recorded_isr(self, topic: str, index: int, leader_epoch: int) -> tuple[tuple[int, ...], int] | None:
        try:
            found = await self.zk.partition_state(topic, index)
        except ZOOKEEPER_UNAVAILABLE:
            return None
        if found is None or found[0].leader != self.broker_id or found[0].leader_epoch != leader_epoch:
            return None
        return found[0].isr, found[1]

    async def _ask_alter_partition(self, batch: list[tuple[Partition, IsrProposal]]) -> list[_IsrAnswer]:
        """The controller's answer for each partition of ``batch``, in its order."""
        # Topic ids from 2.8-IV0 (v2 on; v3 adds each member's broker epoch, KIP-903), names before,
        # or while some partition's topic id is not known here, as Kafka's leaders choose.
        by_id = self.config["inter.broker.protocol.version"].topic_ids \
            and all(partition.topic_id != ZERO_UUID for partition, _ in batch)
        keys = [(partition.topic_id if by_id else partition.topic, partition.index) for partition, _ in batch]
        epochs = [{member: self.broker_epoch if member == self.broker_id else UNKNOWN_BROKER_EPOCH
                   for member in proposal.isr} for _, proposal in batch]
        if self.controller.active:
            error, results = await self.controller.alter_partition(self.broker_id, self.broker_epoch, {
                key: ControllerIsrProposal(proposal.leader_epoch, proposal.isr, members, 0,
                                           proposal.base_partition_epoch)
                for key, (_, proposal), members in zip(keys, batch, epochs, strict=True)})
            if error != ErrorCode.NONE:
                raise ControllerRequestFailed(f"refused: {error.name}")
            recorded = [results.get(key, (ErrorCode.UNKNOWN_SERVER_ERROR, None)) for key in keys]
            return [_IsrAnswer(partition_error) if record is None else
                    _IsrAnswer(partition_error, record.state.leader, record.state.leader_epoch,
                               tuple(record.state.isr), record.zk_version) for partition_error, record in recorded]
        topics: dict[str | uuid.UUID, list[dict[str, Any]]] = {}
        for (topic, index), (_, proposal), members in zip(keys, batch, epochs, strict=True):
            topics.setdefault(topic, []).append({
                "partition_index": index, "leader_epoch": proposal.leader_epoch, "new_isr": list(proposal.isr),
                "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": e} for b, e in members.items()],
                "leader_recovery_state": 0, "partition_epoch": proposal.base_partition_epoch})
        response = await self._ask_controller(ALTER_PARTITION, 3 if by_id else 1, {
            "broker_id": self.broker_id, "broker_epoch": self.broker_epoch,
            "topics": [{"topic_id" if by_id else "topic_name": topic, "partitions": ps} for topic, ps in topics.items()]})
        found: dict[tuple[str | uuid.UUID, int], _IsrAnswer] = {}
        for topic_answer in response.topics:
            topic_key = topic_answer.topic_id if by_id else topic_answer.topic_name
            for answer in topic_answer.partitions:
                found[(topic_key, answer.partition_index)] = _IsrAnswer(
                    ErrorCode(answer.error_code), answer.leader_id, answer.leader_epoch, tuple(answer.isr),
                    answer.partition_epoch)
        return [found.get(key, _IsrAnswer(ErrorCode.UNKNOWN_SERVER_ERROR)) for key in keys]

    async def _ask_controller(self, api_key: int, version: int, body: Mapping[str, Any]) -> Any:
        """One request to the controller on the inter-broker listener; its answer when its
        top-level error is NONE, else ControllerRequestFailed."""
        address = self.controller_endpoint()
        if address is None:
            raise ControllerRequestFailed("no controller is known")
        client = BrokerClient(*address, client_id=f"broker-{self.broker_id}", security=self.security)
        request = asyncio.ensure_future(client.request(api_key, version, body, CONTROLLER_REQUEST_TIMEOUT_S))
        try:
            # A controller that stopped answering (paused, or cut off) is given up on as soon as
            # another one is elected, as Kafka's brokers disconnect from it, not after the timeout.
            while not (await asyncio.wait({request}, timeout=CONTROLLER_WATCH_S))[0]:
                if self.controller.active or self.controller_endpoint() != address:
                    raise ControllerRequestFailed("the controller changed while the request was out")
            response = request.result()
        except BrokerUnreachable as exc:
            raise ControllerRequestFailed(str(exc)) from None
        finally:
            request.cancel()
            await asyncio.gather(request, return_exceptions=True)
            client.close()
        if response.error_code != ErrorCode.NONE:
            raise ControllerRequestFailed(f"refused: {ErrorCode(response.error_code).name}")
        return response

    # ---- producer ids (3.0-IV0 on) -----------------------------------------------------------------
    async def allocate_producer_ids(self) -> range:
        """A block of producer ids from the controller (AllocateProducerIds, KIP-730), asking
        again while no controller answers (one being elected), a bounded number of times."""
        for attempt in range(PRODUCER_ID_BLOCK_ATTEMPTS):
            try:
                if self.controller.active:
                    error, block = await self.controller.allocate_producer_ids(self.broker_id, self.broker_epoch)
                    if error != ErrorCode.NONE:
                        raise ControllerRequestFailed(f"refused: {error.name}")
                else:
                    response = await self._ask_controller(ALLOCATE_PRODUCER_IDS, ALLOCATE_PRODUCER_IDS_VERSION, {
                        "broker_id": self.broker_id, "broker_epoch": self.broker_epoch})
                    block = range(response.producer_id_start, response.producer_id_start + response.producer_id_len)
            except ControllerRequestFailed as exc:
                if attempt == 0 or attempt == PRODUCER_ID_BLOCK_ATTEMPTS - 1:
                    log.warning("could not get a block of producer ids from the controller (%s)%s", exc,
                                "; asking again" if attempt == 0 else "; giving up for now")
                await asyncio.sleep(CONTROLLER_RETRY_BACKOFF_S)
                continue
            if block:
                log.info("the controller gave this broker producer ids %d to %d", block.start, block.stop - 1)
                return block
        raise ControllerRequestFailed("no block of producer ids from the controller")

    async def _write_isr(self, partition: Partition, proposal: IsrProposal) -> None:
        """Record the leader's new ISR in the partition's state znode, conditional on the state
        the proposal was decided from, with the isr_change_notification that tells the controller."""
        topic, index = partition.topic, partition.index
        try:
            found = await self.zk.partition_state(topic, index)
            # A newer version that only records replicas' log dirs (KIP-858) changed nothing this
            # leader decides on; anything else the controller changed makes the proposal stale.
            if found is not None and found[0].leader == self.broker_id \
                    and found[0].leader_epoch == proposal.leader_epoch and found[0].isr == proposal.base_isr:
                try:
                    version = await self.zk.update_isr(topic, index, dataclasses.replace(found[0], isr=proposal.isr),
                                                       found[1])
                except StaleState:  # changed between the read and the write: see what won
                    found = await self.zk.partition_state(topic, index)
                else:
                    old = partition.isr
                    self.replica_manager.isr_committed(partition, proposal, version)
                    log.info("%s-%d: in-sync replicas %s -> %s", topic, index, list(old), list(proposal.isr))
                    return
        except Exception as exc:
            # The write may have landed unanswered: the proposal stays pending and goes again.
            log.warning("%s-%d: could not record the ISR %s in ZooKeeper (%s); will try again", topic, index,
                        list(proposal.isr), _described(exc))
            await asyncio.sleep(CONTROLLER_RETRY_BACKOFF_S)
            self._propose_again([(partition, proposal)])
            return
        # Still this leadership's state (same leader and epoch) with another ISR: the controller
        # dropped a replica, or an earlier write of ours landed unanswered. Take it as ours.
        recorded = (found[0].isr, found[1]) if found is not None and found[0].leader == self.broker_id \
            and found[0].leader_epoch == proposal.leader_epoch else None
        if recorded is None and found is not None:
            # Another leadership's state: an earlier write of this proposal may be in it, so its
            # members keep counting toward the high watermark until the controller's news comes.
            isr_retries.log(logging.INFO, (topic, index), "%s-%d: not changing the ISR to %s: another leadership "
                            "holds the partition; proposing it again until the controller's news comes", topic,
                            index, list(proposal.isr))
            await asyncio.sleep(CONTROLLER_RETRY_BACKOFF_S)
            self._propose_again([(partition, proposal)])
            return
        log.info("%s-%d: not changing the ISR to %s: the partition changed meanwhile%s", topic, index,
                 list(proposal.isr), f" (in-sync replicas now {list(recorded[0])})" if recorded else "")
        self.replica_manager.isr_refused(partition, proposal, recorded)

    # ---- topic and broker configs ---------------------------------------------------------------
    async def topic_configs(self, topic: str) -> dict[str, str]:
        configs = self._topic_configs.get(topic)
        if configs is None:
            configs = self._topic_configs[topic] = await self.zk.entity_configs("topics", topic) or {}
        return configs

    def forget_topic_configs(self, topic: str) -> None:
        """The topic is deleted: a topic later created with its name starts from its own configs."""
        self._topic_configs.pop(topic, None)

    def _config_changed(self) -> None:
        self._spawn(self._read_config_changes)

    async def _read_config_changes(self) -> None:
        """Apply the config change notifications not yet applied, and watch for more. A change is
        taken as applied once it is, so one cut short by ZooKeeper's going away is read again
        when it is back (the watch set by ``config_changes`` fires then)."""
        try:
            await self._apply_config_changes()
        except ZOOKEEPER_UNAVAILABLE as exc:
            log.warning("could not read config changes from ZooKeeper (%s); reading them when it is back",
                        _described(exc))
            self.zk.after_reconnect(self._config_changed)

    async def _apply_config_changes(self, watch: bool = True) -> None:
        async with self._config_changes_lock:
            changes = await self.zk.config_changes(self._config_changed if watch else None, self._seen_config_changes)
            for name, entity in changes:
                await self._apply_config_change(entity)
                self._seen_config_changes.add(name)

    async def catch_up_configs(self) -> None:
        """Apply the config changes written so far, not waiting for their notification's watch.
        The controller calls for a new replica after the configs that throttle its copy (the
        reassignment tools write them first): read before the copy starts, a busy broker whose
        watch is late does not copy unthrottled meanwhile. Bounded, and skipped without
        ZooKeeper: a LeaderAndIsr is never held up by it."""
        if not self.zk.connected:
            return
        try:
            await asyncio.wait_for(self._apply_config_changes(watch=False), CONFIG_CATCH_UP_S)
        except (TimeoutError, *ZOOKEEPER_UNAVAILABLE) as exc:
            log.warning("could not read the latest config changes before following new replicas (%s); "
                        "their throttles apply once the changes arrive", _described(exc))

    async def _apply_config_change(self, entity: str) -> None:
        kind, _, entity_name = entity.partition("/")
        if kind == "topics":
            configs = await self.zk.entity_configs("topics", entity_name) or {}
            self._topic_configs[entity_name] = configs
            self.replica_manager.update_config(entity_name, log_config_for(configs, self.config, entity_name))
            self.replica_manager.replication_throttles.update_topic(entity_name, configs)
            log.info("configs of topic %s are now %s", entity_name, configs)
            self.controller.configs_changed(entity_name)
        elif kind == "brokers":
            await self._apply_broker_configs()
            self.controller.configs_changed(None)
        else:
            if kind == "users" and "/" not in entity_name and self.on_user_changed is not None:
                await self.on_user_changed(entity_name)
            if kind in ("users", "clients") and self.on_quota_changed is not None:
                await self.on_quota_changed(entity)

    async def _apply_broker_configs(self) -> None:
        own = await self.zk.entity_configs("brokers", str(self.broker_id)) or {}
        default = await self.zk.entity_configs("brokers", "<default>") or {}
        try:
            self.config.apply_dynamic(own, default)
        except ConfigError as exc:
            log.error("dynamic broker configs in ZooKeeper not applied: %s", exc)

    async def _refresh_log_configs(self) -> None:
        for topic in sorted({name for name, _ in self.replica_manager.partitions}):
            configs = await self.topic_configs(topic)
            self.replica_manager.update_config(topic, log_config_for(configs, self.config, topic))

    def apply_broker_configs_soon(self) -> None:
        self._spawn(self._apply_broker_configs)

    # ---- clean shutdown ---------------------------------------------------------------------------
    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move this broker's leaderships elsewhere before it stops; True
        once it did (and took this broker out of the ISRs of the partitions it follows). Tried
        controlled.shutdown.max.retries times, each attempt bounded, then the broker stops anyway,
        as Kafka's does: a cluster stopped all at once must not keep its last broker waiting."""
        if not self.config["controlled.shutdown.enable"]:
            return False
        retries = self.config["controlled.shutdown.max.retries"]
        for attempt in range(1, retries + 1):
            if not self.zk.connected:
                log.warning("ZooKeeper is unreachable: no controller can move this broker's leaderships; "
                            "stopping without a controlled shutdown")
                return False
            try:
                remaining = await self._ask_controller_to_shut_down()
            except ControllerRequestFailed as exc:
                log.warning("controlled shutdown request failed (attempt %d of %d): %s", attempt, retries, exc)
            else:
                if remaining == 0:
                    log.info("controlled shutdown done: this broker leads no replicated partition any more")
                else:
                    log.info("controlled shutdown: %d partition(s) still led here (no other in-sync replica)",
                             remaining)
                return True
            if attempt < retries:
                await asyncio.sleep(self.config["controlled.shutdown.retry.backoff.ms"] / 1000)
        log.warning("controlled shutdown did not succeed after %d attempt(s); stopping anyway: the other brokers "
                    "elect new leaders for its partitions once its ZooKeeper session ends", retries)
        return False

    async def _ask_controller_to_shut_down(self) -> int:
        """How many partitions this broker still leads once the controller moved what it could;
        ControllerRequestFailed if it could not be asked, refused, or changed meanwhile."""
        if self.controller.active:
            return await self._ask_own_controller_to_shut_down()
        response = await self._ask_controller(CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN_VERSION,
                                              {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch})
        return len(response.remaining_partitions)

    async def _ask_own_controller_to_shut_down(self) -> int:
        """This broker is the controller: its controller moves the leaderships, in turn with its
        other events. Bounded as a request to another controller is: an event waiting on a
        ZooKeeper that stopped answering (its ensemble stopping too) holds every later one, so
        the wait ends when this broker stops being the controller, or after the request timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONTROLLER_REQUEST_TIMEOUT_S
        asking = asyncio.ensure_future(self.controller.controlled_shutdown(self.broker_id, self.broker_epoch))
        try:
            while not (await asyncio.wait({asking}, timeout=CONTROLLER_WATCH_S))[0]:
                if not self.controller.active:
                    raise ControllerRequestFailed("this broker stopped being the controller while it waited")
                if loop.time() >= deadline:
                    raise ControllerRequestFailed(f"the controller (this broker) did not get to it within "
                                                  f"{CONTROLLER_REQUEST_TIMEOUT_S:.0f} s")
            remaining = asking.result()
        except ControllerRequestFailed:
            raise
        except Exception as exc:  # its ZooKeeper write failed (ConnectionLoss, a lost session)
            raise ControllerRequestFailed(_described(exc)) from None
        finally:
            asking.cancel()
            await asyncio.gather(asking, return_exceptions=True)
        if remaining is None:
            raise ControllerRequestFailed("refused: this broker's registration is not the one the controller knows")
        return len(remaining)

    async def stop(self) -> None:
        """Stop controlling and every task; the registration stays until ``leave``."""
        self._stopping = True
        await self.controller.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def leave(self) -> None:
        """End the ZooKeeper session, and with it the registration: a stopping broker's last
        step, as in Kafka. Clients moving their partitions away still find it in Metadata,
        leading nothing, while it closes its logs; dropped from Metadata while they move, it made
        librdkafka park a partition on its internal broker until its next one-second scan."""
        await self.zk.close()


def _described(exc: BaseException) -> str:
    """The exception's name and message: kazoo's (ConnectionLoss, SessionExpiredError) have no message."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
