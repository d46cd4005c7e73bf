"""The cluster's controller, elected through ZooKeeper's /controller znode.

Every cluster broker runs a ``ZkController``; the one whose ephemeral /controller znode stands
is active. On election it bumps /controller_epoch, reads the whole cluster state from
ZooKeeper (Kafka's znode layout) and from then on owns it: it creates the partitions of new
topics, elects leaders from the ISR when a broker's registration vanishes or a broker shuts
down cleanly, gives leadership back to preferred replicas, moves replicas between brokers
(reassignments, KIP-455), deletes topics, and tells every
broker what it decided with LeaderAndIsr, UpdateMetadata and StopReplica. Each of its writes to
a partition's state is conditional on the state's zk version and on the controller epoch
znode's version, so a deposed controller cannot overwrite its successor's decisions.

Events (events.py: watches firing, brokers' answers, timers, requests from brokers) are
handled one at a time, in order, by one task, each by the method ``HANDLERS`` names for its
type; nothing here is touched from another thread. A request (``_ask``) is an event whose
asker awaits its handler's result. The bodies of the requests to brokers are built by
requests.py, and the partitions' state changes are checked by partition_states.py. A
ZooKeeper error during an event makes the controller resign and stand again for election,
which re-reads everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from prometheus_client import Gauge

from minikafka.config.broker import BrokerConfig
from minikafka.controller import elections, replica_log_ends, replica_states, requests
from minikafka.controller.channel import (
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    ControllerChannels,
    nothing_to_wait_for,
)
from minikafka.controller.events import (
    AllocateProducerIds,
    AlterPartition,
    AlterReassignments,
    AssignReplicasToDirs,
    AutoLeaderRebalance,
    BrokersChanged,
    ControlledShutdown,
    ControllerElection,
    ControllerEvent,
    ControllerMoved,
    ElectAgain,
    FinishReassignment,
    IsrChangeNotification,
    LeaderAndIsrAnswered,
    ListReassignments,
    LogDirEventNotification,
    PreferredLeaderElection,
    ReassignmentRequested,
    SessionExpired,
    TopicChanged,
    TopicDeletionAnswered,
    TopicDeletionsRequested,
    TopicsChanged,
    UncleanConfigChanged,
    UncleanElectionRetry,
    UncleanLeaderElection,
)
from minikafka.controller.isr_proposals import IsrProposal, Unchanged, judge
from minikafka.controller.partition_states import NON_EXISTENT, OFFLINE
from minikafka.controller.reassignment import (
    ReplicaAssignment,
    cancel,
    complete,
    dropped,
    finished,
    invalid_target,
    leader_after,
    reassign,
)
from minikafka.controller.state import ControllerState, PartitionRecord, TopicPartition, lost_replica
from minikafka.security.client import PLAINTEXT_CLIENT, ClientSecurity
from minikafka.zk.kafka_zk import (
    ZOOKEEPER_UNAVAILABLE,
    BrokerRegistration,
    KafkaZk,
    LeaderIsr,
    StaleState,
    TopicAssignment,
)
from protocol import Message
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

Outcome = tuple[ErrorCode, str | None]
WRITE_ATTEMPTS = 5  # a reassignment's first write, each on the state the last lost to
UNCLEAN_CONFIG = "unclean.leader.election.enable"
# An unclean election waiting for a replica's answer tries again this often, this many times.
UNCLEAN_RETRY_S, UNCLEAN_ATTEMPTS = 2.0, 15
# How long a stopping controller waits for its last requests to reach the brokers.
CHANNEL_DRAIN_S = 2.0
# How long a stopping controller tries to give up /controller: kazoo holds a request while
# ZooKeeper is away, and a broker stopping because it cannot reach ZooKeeper must not wait for it.
RESIGN_WAIT_S = 2.0
# An event that takes this long (every other waits meanwhile) is logged with its name.
SLOW_EVENT_S = 5.0
# AlterPartition's answer for one partition: an error, or the partition's state as recorded.
AlterPartitionResult = tuple[ErrorCode, "PartitionRecord | None"]
_CHANGED_MEANWHILE: tuple[ErrorCode, str | None] = (ErrorCode.NOT_CONTROLLER, "the partition changed meanwhile; try again")

ACTIVE_CONTROLLER = Gauge("kafka_controller_KafkaController_ActiveControllerCount",
                          "1 on the broker that is the active controller, else 0")
OFFLINE_PARTITIONS = Gauge("kafka_controller_KafkaController_OfflinePartitionsCount",
                           "Partitions with no leader (their in-sync replicas are dead or on failed dirs); "
                           "counted by the active controller, 0 elsewhere")


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def _names(partitions: Iterable[TopicPartition]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(partitions)) or "none"


def _lost_from_isr(state: LeaderIsr, broker: int) -> LeaderIsr:
    """``state`` once ``broker``'s replica lost its data (KIP-858): out of the ISR even as its last
    member, no longer leading, in a new leader epoch (as every ISR change the controller makes)."""
    return replace(state, isr=tuple(b for b in state.isr if b != broker), leader_epoch=state.leader_epoch + 1,
                   leader=elections.NO_LEADER if state.leader == broker else state.leader)


class ZkController:
    def __init__(self, config: BrokerConfig, zk: KafkaZk, inter_broker_listener: str,
                 security: ClientSecurity = PLAINTEXT_CLIENT, control_plane_security: ClientSecurity | None = None
                 ) -> None:
        self.config = config
        self.security = security  # how the controller connects to the brokers' inter-broker listener
        # The brokers' listener named control.plane.listener.name (KIP-291), where each broker has
        # one, carries the controller's requests, connected to with ``control_plane_security``.
        self.control_plane = config.control_plane_listener_name
        self.control_plane_security = control_plane_security or security
        self.broker_id = config.broker_id
        self.zk = zk
        self.listener = inter_broker_listener
        self.state = ControllerState()
        self.active = False
        self._events: asyncio.Queue[_Queued] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._rebalance_task: asyncio.Task[None] | None = None
        self.channels = ControllerChannels(self.broker_id, self.security,
                                           self.config["inter.broker.protocol.version"])

    # ---- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller")
        if not self.config["minikafka.controller.eligible"]:
            log.info("broker %d never stands for controller (minikafka.controller.eligible=false)", self.broker_id)
        self.post(ControllerElection())

    def post(self, event: ControllerEvent | Callable[[], Awaitable[None]]) -> None:
        """Queue ``event`` to be handled in turn. A bare coroutine function is awaited as it is:
        tests hold the queue with one, as a slow event would."""
        self._events.put_nowait(_Queued(event))

    async def stop(self) -> None:
        if self.active:
            # What this controller decided last (the handover of its own broker's leaderships, when
            # it stops cleanly) reaches the other brokers before its channels close: a new leader
            # whose metadata still named this broker sent producers back here, until the next
            # controller told it otherwise.
            # Its own broker is stopping (its listener is closed by now), as are those shutting down.
            late = await self.channels.drain(CHANNEL_DRAIN_S, skip={self.broker_id, *self.state.shutting_down})
            if late:
                log.warning("stopping with requests to brokers %s undelivered after %.0f s; the next controller "
                            "sends them what they miss", late, CHANNEL_DRAIN_S)
        was_active = self.active
        for task in (self._task, self._rebalance_task):
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in (self._task, self._rebalance_task) if t is not None),
                             return_exceptions=True)
        if was_active:
            # Its broker stays registered until it has closed its logs: the next controller is
            # elected now rather than once that registration's session ends (and not this one
            # again: its events are no longer handled).
            try:
                await asyncio.wait_for(self.zk.resign_controller(self.broker_id), RESIGN_WAIT_S)
            except Exception as exc:  # ZooKeeper unreachable: the session's end frees /controller
                reason = f"no answer within {RESIGN_WAIT_S:.0f} s" if isinstance(exc, TimeoutError) else str(exc)
                log.info("could not give up the controller's place in ZooKeeper (%s); the next controller is "
                         "elected once this broker's session ends", reason)
        await self.channels.close()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            queued = await self._events.get()
            started = loop.time()
            try:
                await self._handle(queued)
                self._export_counts()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # ZooKeeper gone, a lost race: start over from ZooKeeper
                log.error("controller event failed while handling %s (%s: %s); resigning and standing for "
                          "election again", queued.name, type(exc).__name__, exc,
                          exc_info=not isinstance(exc, (OSError, StaleState, *ZOOKEEPER_UNAVAILABLE)))
                await self._resign()
                # Give up /controller too, as Kafka's controller does, so that an election runs.
                with contextlib.suppress(Exception):
                    await self.zk.resign_controller(self.broker_id)
                await asyncio.sleep(0.5)
                self.post(ControllerElection())
                continue
            took = loop.time() - started
            if took >= SLOW_EVENT_S:
                log.warning("the controller took %.1f s to handle %s; every other event waited meanwhile",
                            took, queued.name)

    async def _handle(self, queued: _Queued) -> None:
        event = queued.event
        if queued.epoch is not None and not (self.active and self.state.epoch == queued.epoch):
            return
        if not isinstance(event, ControllerEvent):
            await event()
            return
        handler = self.HANDLERS[type(event)]
        try:
            result = await handler(self, **event.arguments())
        except Exception as exc:
            if queued.answer is not None and not queued.answer.done():
                queued.answer.set_exception(exc)
            raise
        if queued.answer is not None and not queued.answer.done():  # the asker may have gone
            queued.answer.set_result(result)

    async def _ask(self, request: ControllerEvent) -> Any:
        """Handle ``request`` as an event (in turn with every other) and wait for its answer."""
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._events.put_nowait(_Queued(request, answer=answer))
        return await answer

    def _watch(self, event: ControllerEvent) -> Callable[[], None]:
        """A ZooKeeper watch callback that queues ``event`` while this broker is controller."""
        def fired() -> None:
            if self.active:
                self._post_while_controller(event)
        return fired

    def _post_while_controller(self, event: ControllerEvent) -> None:
        """Queue ``event`` for this controllership only: by the time it runs this broker may have
        resigned (its session expired with events still queued), and a former controller acting
        on what it learnt took notifications away from its successor."""
        self._events.put_nowait(_Queued(event, epoch=self.state.epoch))

    async def _elect(self) -> None:
        if self.active or not self.config["minikafka.controller.eligible"]:
            return
        current = await self.zk.controller_id(watch=lambda: self.post(ControllerElection()))
        if current is not None:
            return
        won = await self.zk.try_become_controller(self.broker_id)
        if won is None:
            await self.zk.controller_id(watch=lambda: self.post(ControllerElection()))
            return
        self.state = ControllerState(epoch=won[0], epoch_zk_version=won[1])
        self.active = True
        log.info("broker %d is now the controller (epoch %d)", self.broker_id, self.state.epoch)
        await self._take_over()

    def _export_counts(self) -> None:
        state = self.state
        ACTIVE_CONTROLLER.set(1 if self.active else 0)
        OFFLINE_PARTITIONS.set(0 if not self.active else sum(
            1 for tp, record in state.partitions.items()
            if record.state.leader < 0 and tp[0] not in state.deleting))

    async def _resign(self) -> None:
        if not self.active:
            return
        self.active = False
        self._export_counts()
        log.info("broker %d is no longer the controller", self.broker_id)
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
        await self.channels.close()
        self.channels = ControllerChannels(self.broker_id, self.security,
                                           self.config["inter.broker.protocol.version"])

    async def session_expired(self) -> None:
        """This broker's ZooKeeper session expired, and /controller with it if it was ours: stop
        acting as controller, reading nothing (there is no session to read in). The broker stands
        again once it has registered in a new session (``controller_moved``)."""
        await self._resign()

    async def controller_moved(self) -> None:
        """The /controller znode changed: resign if it is not ours any more, else stand."""
        current = await self.zk.controller_id(watch=lambda: self.post(ControllerMoved()))
        if current != self.broker_id:
            await self._resign()
        if current is None:
            await self._elect()

    # ---- taking over ---------------------------------------------------------------------
    async def _take_over(self) -> None:
        """Read everything, fix what no controller looked after, and tell every broker."""
        await self.zk.controller_id(watch=lambda: self.post(ControllerMoved()))
        # As Kafka's controller does at inter.broker.protocol.version 2.7 or later (KIP-584).
        await self.zk.enable_feature_versioning()
        state = self.state
        state.brokers = await self.zk.live_brokers(watch=self._watch(BrokersChanged()))
        for broker, registration in state.brokers.items():
            self._open_channel(broker, registration)
        # Every topic asked at once (kazoo pipelines the reads): one after the other, a controller
        # taking over 3,000 partitions spent seconds in round trips before it elected a leader.
        await asyncio.gather(*(self._load_topic(name)
                               for name in await self.zk.topic_names(watch=self._watch(TopicsChanged()))))
        state.deleting = set(await self.zk.topics_to_delete(watch=self._watch(TopicDeletionsRequested())))
        await self.zk.isr_change_notifications(watch=self._watch(IsrChangeNotification()))
        state.offline_replicas = {b: state.offline_by_dirs(b) for b in state.brokers}
        for broker, offline in state.offline_replicas.items():
            for tp in offline:
                state.move_replica(broker, tp, replica_states.OFFLINE)
        for broker in sorted(state.brokers):
            await self._replicas_lost(broker, state.lost_by_dirs(broker))
        await self._create_missing_partitions()
        await self._elect_offline(self._leaderless())
        self._send_update_metadata(state.brokers, state.partitions)
        for broker in state.brokers:
            self._send_leader_and_isr(broker, state.partitions_of(broker))
        await self._delete_topics()
        await self._isr_changed()
        await self._log_dir_events()
        for tp in [tp for tp in state.partitions if tp[0] in state.topics and state.assignment_of(tp).moving]:
            await self._finish_reassignment(tp)
        await self._requested_in_zookeeper()
        if self.config["auto.leader.rebalance.enable"]:
            self._rebalance_task = asyncio.get_running_loop().create_task(self._rebalance_periodically())

    async def _load_topic(self, name: str) -> None:
        assignment = await self.zk.topic_assignment(name, watch=self._watch(TopicChanged(name)))
        if assignment is None:
            return
        self.state.topics[name] = assignment
        indexes = sorted(assignment.partitions)
        states = await self.zk.partition_states(name, indexes)
        for index, found in zip(indexes, states, strict=True):
            tp = (name, index)
            if found is not None:
                # As found, not changed: Online or Offline as its leader is, whatever it was.
                self.state.partitions[tp] = PartitionRecord(*found)
                self.state.partition_states[tp] = self.state.leadership_state(tp)
                for broker in self.state.replicas(tp):
                    self.state.replica_states[(broker, tp)] = self.state.serving_state(broker, tp)
            else:
                self.state.new_partition(tp)  # its state is written once a leader is elected

    def _open_channel(self, broker: int, registration: BrokerRegistration) -> None:
        """The channel of the controller's requests to ``broker``: to its control-plane listener
        if it registered one (Kafka's controller looks it up by its own control.plane.listener.name,
        which every broker of a cluster shares), else to its inter-broker listener."""
        listener, address, security = self.listener, registration.endpoint(self.listener), self.security
        if self.control_plane is not None:
            control = registration.endpoint(self.control_plane)
            if control is not None:
                listener, address, security = self.control_plane, control, self.control_plane_security
            else:
                log.warning("broker %d registered no %s listener (control.plane.listener.name); the controller "
                            "sends it its requests on its %s listener", broker, self.control_plane, self.listener)
        if address is None:
            log.error("broker %d registered no %s listener; the controller cannot reach it", broker, listener)
            return
        self.channels.add(broker, registration.epoch, address, security)

    # ---- brokers come and go -------------------------------------------------------------
    async def _brokers_changed(self) -> None:
        state = self.state
        now = await self.zk.live_brokers(watch=self._watch(BrokersChanged()))
        gone = sorted(set(state.brokers) - set(now))
        # A broker that re-registered (a new session, a restart) has a new epoch: treat it as new.
        came = sorted(b for b in now if b not in state.brokers or now[b].epoch != state.brokers[b].epoch)
        state.brokers = now
        for broker in gone:
            state.shutting_down.discard(broker)
            state.offline_replicas.pop(broker, None)
            for tp in state.partitions_of(broker):
                if tp[0] not in state.deleting:  # the deletion's own states say where these stand
                    state.move_replica(broker, tp, replica_states.OFFLINE)
            state.deletions.broker_gone(broker)
            await self.channels.remove(broker)
        if gone:
            log.info("brokers %s are gone; electing new leaders for their partitions", gone)
            await self._brokers_failed(gone)
            await self._delete_topics()  # says which deletions now wait for them
        for broker in came:
            state.shutting_down.discard(broker)
            # A new registration: requests to the old one died with its connection, and what it
            # failed to delete is asked again.
            state.deletions.broker_gone(broker)
            state.deletions.broker_back(broker)
            state.offline_replicas[broker] = state.offline_by_dirs(broker)
            if state.offline_replicas[broker]:
                log.warning("broker %d registered with log dir(s) %s offline; its replicas there are offline: %s",
                            broker, ", ".join(d.path for d in now[broker].offline_dirs),
                            _names(state.offline_replicas[broker]))
            for tp in state.partitions_of(broker):
                if tp[0] not in state.deleting:
                    state.move_replica(broker, tp, state.serving_state(broker, tp))
            self._open_channel(broker, now[broker])
            await self._replicas_lost(broker, state.lost_by_dirs(broker))
        if came:
            log.info("brokers %s registered", came)
            await self._brokers_started(came)
        if gone or came:
            # Every broker learns that the replicas of these brokers went offline or came back
            # (those on a newcomer's failed dirs stay offline), also where no leader or ISR changed.
            touched = {tp for broker in (*gone, *came) for tp in state.partitions_of(broker)}
            self._send_update_metadata(state.brokers, {tp: state.partitions[tp] for tp in touched})

    async def _brokers_failed(self, gone: list[int]) -> None:
        state = self.state
        led = [tp for tp, record in state.partitions.items() if record.state.leader in gone]
        for tp in led:  # until a leader is elected, if one can be
            state.move_partition(tp, OFFLINE)
        await self._elect_offline(led)
        # Followers on the dead brokers leave the ISR of the partitions that still have a leader,
        # in a new leader epoch as every ISR change the controller makes (a Kafka broker ignores
        # a LeaderAndIsr of the epoch it has: it would keep the old ISR and never add the
        # follower back). Written together, as the elections are.
        def without_gone(tp: TopicPartition) -> LeaderIsr | None:
            led = state.partitions[tp].state
            if led.leader < 0 or led.leader in gone or not any(b in led.isr for b in gone):
                return None
            return replace(led, isr=tuple(b for b in led.isr if b not in gone) or led.isr,
                           leader_epoch=led.leader_epoch + 1)
        self._tell_replicas(await self._decide_and_write(list(state.partitions), without_gone))

    async def _brokers_started(self, came: list[int]) -> None:
        state = self.state
        # Every replica the broker holds, as it is now (a restarted broker knows nothing).
        self._send_update_metadata([*came], state.partitions)
        for broker in came:
            self._send_leader_and_isr(broker, state.partitions_of(broker))
        await self._elect_offline([tp for tp in self._leaderless() if any(b in came for b in state.replicas(tp))])
        await self._delete_topics()

    def _leaderless(self) -> list[TopicPartition]:
        state = self.state
        return [tp for tp, record in state.partitions.items()
                if tp[0] not in state.deleting and record.state.leader not in state.eligible(tp)]

    async def _elect_offline(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionRecord]:
        """Elect a leader for partitions whose leader is gone or cannot serve; the changed ones."""
        changed, _ = await self._elect_leaderless(partitions)
        return changed

    async def _elect_leaderless(self, partitions: Iterable[TopicPartition], unclean_requested: bool = False
                                ) -> tuple[dict[TopicPartition, PartitionRecord], dict[TopicPartition, Outcome]]:
        """A live in-sync replica leads each partition if there is one; with none, an unclean
        election (``_elect_unclean``) where the topic's unclean.leader.election.enable allows it,
        or ``unclean_requested`` (an unclean ElectLeaders); else the partition stays offline. The
        changed partitions (their replicas are told), and per partition NONE or why not."""
        state = self.state
        changed: dict[TopicPartition, PartitionRecord] = {}
        outcomes: dict[TopicPartition, Outcome] = {}
        unclean_by_topic: dict[str, bool] = {}
        unclean: list[TopicPartition] = []
        elected: dict[TopicPartition, LeaderIsr] = {}
        for tp in partitions:
            record = state.partitions.get(tp)
            if record is None or tp[0] in state.deleting:
                outcomes[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition")
                continue
            chosen = elections.offline_partition(state.replicas(tp), record.state.isr, state.eligible(tp))
            if chosen is None:
                if tp[0] not in unclean_by_topic:
                    unclean_by_topic[tp[0]] = unclean_requested or await self._unclean_allowed(tp[0])
                if unclean_by_topic[tp[0]]:
                    unclean.append(tp)
                    continue
                outcomes[tp] = (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no in-sync replica is alive")
                if record.state.leader == elections.NO_LEADER:
                    continue
                log.error("%s-%d has no live in-sync replica (in-sync: %s); it stays offline until one returns, or "
                          "until unclean.leader.election.enable=true or an unclean leader election lets an "
                          "out-of-sync replica lead", tp[0], tp[1], list(record.state.isr))
            if (new_state := self._elected(tp, chosen)) is not None:
                elected[tp] = new_state

        def decide(tp: TopicPartition) -> LeaderIsr | None:
            if tp in elected:
                return elected.pop(tp)
            # A race lost (its leader changed the ISR meanwhile): decided again on the fresh
            # state, if its leader still cannot serve.
            record = state.partitions[tp]
            if record.state.leader in state.eligible(tp):
                return None
            return self._elected(tp, elections.offline_partition(state.replicas(tp), record.state.isr,
                                                                 state.eligible(tp)))
        # Written together, in as few ZooKeeper transactions as hold them: one at a time, a
        # controller taking over 1,000 leaderless partitions spent 2 s writing before it told anyone.
        electing = list(elected)
        written = await self._decide_and_write(electing, decide)
        for tp in electing:
            if (updated := written.get(tp)) is not None:
                changed[tp] = updated
            outcomes.setdefault(tp, (ErrorCode.NONE, None) if updated is not None else _CHANGED_MEANWHILE)
        if unclean:
            unclean_changed, unclean_outcomes = await self._elect_unclean(unclean, retry=not unclean_requested)
            changed.update(unclean_changed)
            outcomes.update(unclean_outcomes)
        if changed:
            moved = ", ".join(f"{t}-{p}->{r.state.leader}" for (t, p), r in sorted(changed.items()))
            log.info("new leaders: %s", moved)
        self._tell_replicas(changed)
        return changed, outcomes

    async def _elect_unclean(self, partitions: Sequence[TopicPartition], retry: bool, attempt: int = 1
                             ) -> tuple[dict[TopicPartition, PartitionRecord], dict[TopicPartition, Outcome]]:
        """Unclean leader election: no in-sync replica of these partitions is alive, and an
        out-of-sync one may lead (acknowledged records it lacks are lost). Every live replica is
        asked where its log ends (replica_log_ends.py) and the one holding the most leads, alone
        in the ISR (elections.unclean_leader: never an empty replica while another holds data).
        When a live replica did not answer, the partition stays offline; with ``retry`` (the
        config allowed it, nobody waits on an answer) it is tried again shortly. The changed
        partitions (not yet told to the replicas) and per partition NONE or why not."""
        state = self.state
        wanted: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            for broker in state.replicas(tp):
                if broker in state.eligible(tp):
                    wanted.setdefault(broker, []).append(tp)
        addresses = {b: a for b in wanted if (r := state.brokers.get(b)) is not None
                     and (a := r.endpoint(self.listener)) is not None}
        log_ends = await replica_log_ends.ask(wanted, addresses, f"controller-{self.broker_id}", self.security)
        # Events wait meanwhile (one at a time), so the partitions are as they were when asked.
        results: tuple[dict[TopicPartition, PartitionRecord], dict[TopicPartition, Outcome]] = ({}, {})
        changed, outcomes = results
        waiting: list[TopicPartition] = []
        for tp in partitions:
            last_isr = state.partitions[tp].state.isr
            live = [b for b in state.replicas(tp) if b in state.eligible(tp)]
            ends = log_ends.get(tp, {})
            choice = elections.unclean_leader(state.replicas(tp), live, ends)
            if choice is None:
                if live:
                    why = f"replicas {[b for b in live if b not in ends]} did not say where their logs end"
                    waiting.append(tp)
                else:
                    why = f"none of its replicas {list(state.replicas(tp))} is alive"
                outcomes[tp] = (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, why)
                log.log(logging.WARNING if live else logging.ERROR, "%s-%d: no unclean leader election yet: %s; it "
                        "stays offline%s", tp[0], tp[1], why, " for now" if live and retry else "")
            updated = await self._write_leader(tp, choice)
            if updated is not None:
                changed[tp] = updated
            if choice is not None:
                outcomes[tp] = (ErrorCode.NONE, None) if updated is not None else _CHANGED_MEANWHILE
                if updated is not None:
                    self._log_unclean_election(tp, last_isr, choice, ends)
        if waiting and retry:
            self._retry_unclean(waiting, attempt)
        return results

    async def _write_leader(self, tp: TopicPartition, chosen: elections.Election | elections.UncleanElection | None
                            ) -> PartitionRecord | None:
        """Record the election's leader and ISR in a new leader epoch, or with None no leader (if it
        had one); the new record, or None if nothing was written."""
        new_state = self._elected(tp, chosen)
        return None if new_state is None else await self._write(tp, new_state)

    def _elected(self, tp: TopicPartition, chosen: elections.Election | elections.UncleanElection | None
                 ) -> LeaderIsr | None:
        """The partition's state after the election, in a new leader epoch: ``chosen``'s leader and
        ISR, or with None no leader (None: nothing changes, it had none)."""
        record = self.state.partitions[tp]
        if chosen is None:
            if record.state.leader == elections.NO_LEADER:
                return None
            return replace(record.state, leader=elections.NO_LEADER, leader_epoch=record.state.leader_epoch + 1)
        return replace(record.state, leader=chosen.leader, isr=chosen.isr, leader_epoch=record.state.leader_epoch + 1)

    def _log_unclean_election(self, tp: TopicPartition, isr: Sequence[int], choice: elections.UncleanElection,
                              ends: Mapping[int, elections.ReplicaLogEnd]) -> None:
        def described(end: elections.ReplicaLogEnd) -> str:
            return "empty" if end.empty else f"log end offset {end.log_end_offset}, leader epoch {end.latest_epoch}"
        replicas = "; ".join(f"broker {b}: {described(e)}" for b, e in sorted(ends.items()))
        gone = [b for b in self.state.replicas(tp) if b not in ends]
        log.warning("%s-%d: UNCLEAN leader election: no in-sync replica is alive (last in-sync: %s); broker %d "
                    "leads, the live replica holding the most (%s). Records may be lost: the %d offset(s) other "
                    "live replicas hold past offset %d, which they truncate, and any record that only %s held",
                    tp[0], tp[1], list(isr) or "none left", choice.leader, replicas, choice.offsets_behind,
                    choice.log_end.log_end_offset,
                    f"the replicas on brokers {gone} or a replaced disk" if gone else "a replaced disk")

    def _retry_unclean(self, partitions: Sequence[TopicPartition], attempt: int) -> None:
        if attempt >= UNCLEAN_ATTEMPTS:
            log.error("gave up the unclean leader election of %s after %d attempts; it runs again when a replica's "
                      "broker registers, on an unclean leader election request, or when the config is set again",
                      _names(partitions), attempt)
            return

        asyncio.get_running_loop().call_later(UNCLEAN_RETRY_S, self._post_while_controller,
                                              UncleanElectionRetry(tuple(partitions), attempt))

    async def _retry_unclean_election(self, partitions: Sequence[TopicPartition], attempt: int) -> None:
        state = self.state
        still = [tp for tp in partitions if tp in state.partitions and tp[0] not in state.deleting
                 and state.partitions[tp].state.leader not in state.eligible(tp)
                 and elections.offline_partition(state.replicas(tp), state.partitions[tp].state.isr,
                                                 state.eligible(tp)) is None
                 and await self._unclean_allowed(tp[0])]
        if still:
            changed, _ = await self._elect_unclean(still, retry=True, attempt=attempt + 1)
            self._tell_replicas(changed)

    async def _unclean_allowed(self, topic: str) -> bool:
        """The topic's unclean.leader.election.enable, else this broker's (its own dynamic
        config, else the cluster default, else server.properties)."""
        configs = await self.zk.entity_configs("topics", topic) or {}
        if UNCLEAN_CONFIG in configs:
            return configs[UNCLEAN_CONFIG].strip().lower() == "true"
        return bool(self.config[UNCLEAN_CONFIG])

    def configs_changed(self, topic: str | None) -> None:
        """A topic's configs (``topic``) or the broker configs changed: if that allows unclean
        elections now, offline partitions get one at once, as Kafka's controller does."""
        if self.active:
            self._post_while_controller(UncleanConfigChanged(topic))

    async def _unclean_config_changed(self, topic: str | None) -> None:
        offline = [tp for tp in self._leaderless() if topic is None or tp[0] == topic]
        allowed = [tp for tp in offline if await self._unclean_allowed(tp[0])]
        if not allowed:
            return
        log.warning("unclean.leader.election.enable is now true for %s: electing leaders for %d offline "
                    "partition(s): %s", f"topic {topic}" if topic else "the cluster's default", len(allowed),
                    _names(allowed))
        await self._elect_offline(allowed)

    # ---- failed log dirs (KIP-112) ---------------------------------------------------------
    async def _log_dir_events(self) -> None:
        """A broker wrote /log_dir_event_notification: a log dir of it failed. Its registration
        says which dir; the replicas recorded there go offline at once, and a LeaderAndIsr for
        all its partitions makes it report any other (its answers come to
        ``_leader_and_isr_answered``). The notification is deleted once handled: the broker
        takes that as the controller's acknowledgement."""
        notifications = await self.zk.log_dir_failure_notifications(watch=self._watch(LogDirEventNotification()))
        if not notifications:
            return
        state = self.state
        reported = sorted({broker for _, broker in notifications if broker is not None})
        registered = await self.zk.live_brokers()
        for broker in reported:
            current = state.brokers.get(broker)
            fresh = registered.get(broker)
            if current is None or fresh is None or fresh.epoch != current.epoch:
                continue  # gone or re-registered meanwhile: the broker changes handle it
            known_failed = {d.path for d in current.offline_dirs}
            failed = ", ".join(d.path for d in fresh.offline_dirs if d.path not in known_failed) or "(unknown)"
            state.brokers[broker] = fresh
            newly = state.offline_by_dirs(broker) - state.offline_replicas.setdefault(broker, set())
            if newly:
                await self._replicas_offline(broker, newly, f"log dir {failed} failed")
            else:
                # Its replicas there were already reported offline (a LeaderAndIsr answer came
                # first), or none is recorded there yet: the LeaderAndIsr below asks the broker.
                log.warning("broker %d: log dir %s failed; no replica recorded there is still online, asking "
                            "the broker which of its replicas are offline", broker, failed)
            self._send_leader_and_isr(broker, state.partitions_of(broker))
        for path, _ in notifications:
            await self.zk.delete_notification(path, state.epoch_zk_version)

    async def _replicas_offline(self, broker: int, replicas: set[TopicPartition], cause: str) -> None:
        """``broker``'s replicas of these partitions cannot serve (their dir failed, which
        ``cause`` says for the log): the ones it led get a new leader from the ISR, it leaves the
        others' ISR, and every broker's metadata lists them offline."""
        state = self.state
        state.offline_replicas.setdefault(broker, set()).update(replicas)
        replicas = {tp for tp in replicas if tp[0] not in state.deleting}
        for tp in replicas:
            state.move_replica(broker, tp, replica_states.OFFLINE)
        led = sorted(tp for tp in replicas if state.partitions[tp].state.leader == broker)
        moved = await self._elect_offline(led)
        left_isr: dict[TopicPartition, PartitionRecord] = {}
        for tp in sorted(replicas - set(led)):
            record = state.partitions[tp]
            if broker in record.state.isr and len(record.state.isr) > 1:
                updated = await self._write(tp, replace(record.state, isr=elections.without_replica(
                    record.state.isr, broker)))
                if updated is not None:
                    left_isr[tp] = updated
        self._tell_replicas(left_isr)
        self._send_update_metadata(state.brokers, {tp: state.partitions[tp] for tp in replicas})
        leaders = ", ".join(f"{t}-{p} -> {r.state.leader if r.state.leader >= 0 else 'none'}"
                            for (t, p), r in sorted(moved.items()))
        log.warning("broker %d: %s, %d replica(s) there offline (%s); leadership moved: %s; "
                    "left the ISR: %s", broker, cause, len(replicas), _names(replicas),
                    leaders or "none", _names(left_isr))

    async def _replicas_lost(self, broker: int, replicas: set[TopicPartition]) -> None:
        """``broker``'s replicas of these partitions hold none of their data any more (the dir
        recorded for them is gone: a replaced disk). They leave the ISR at once, even as its last
        member, so that no clean election makes an empty log the leader; a partition they led
        gets a leader from the rest of the ISR, or none. They join the ISR again the usual way:
        a leader adds them once they have caught up by replication (KIP-858)."""
        state = self.state

        def lost(tp: TopicPartition) -> LeaderIsr | None:
            record = state.partitions.get(tp)
            if record is None or tp[0] in state.deleting or broker not in record.state.isr:
                return None
            return _lost_from_isr(record.state, broker)
        led = [tp for tp in replicas if (record := state.partitions.get(tp)) is not None
               and record.state.leader == broker]
        changed = await self._decide_and_write(sorted(replicas), lost)
        if not changed:
            return
        log.warning("broker %d no longer has the log dir recorded for its replicas of %s (a replaced disk?): they "
                    "left the ISR and must catch up by replication before they can lead", broker, _names(changed))
        self._tell_replicas(changed)
        await self._elect_offline([tp for tp in led if tp in changed])

    # ---- where replicas live (KIP-858) ------------------------------------------------------
    async def assign_replicas_to_dirs(self, broker: int, broker_epoch: int,
                                      assignments: list[tuple[uuid.UUID, int, uuid.UUID]]
                                      ) -> tuple[ErrorCode, dict[tuple[uuid.UUID, int], ErrorCode]]:
        """Record which log dir (directory id) holds each of ``broker``'s replicas, given as
        (topic id, partition, directory id); per partition NONE or why not."""
        return await self._ask(AssignReplicasToDirs(broker, broker_epoch, assignments))

    async def _assign_replicas_to_dirs(self, broker: int, broker_epoch: int,
                                       assignments: Sequence[tuple[uuid.UUID, int, uuid.UUID]]
                                       ) -> tuple[ErrorCode, dict[tuple[uuid.UUID, int], ErrorCode]]:
        state = self.state
        registration = state.brokers.get(broker)
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, {}
        if registration is None or registration.epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, {}
        names = {assignment.topic_id: name for name, assignment in state.topics.items()}
        results: dict[tuple[uuid.UUID, int], ErrorCode] = {}
        # Dirs alone change: written together, as few ZooKeeper transactions as hold them (one
        # at a time, a broker's report of 3,000 new replicas held the controller 8 s).
        moved: dict[TopicPartition, tuple[tuple[uuid.UUID, int], LeaderIsr]] = {}
        for topic_id, index, directory in assignments:
            name = names.get(topic_id)
            tp = (name, index) if name is not None else None
            if tp is None or tp not in state.partitions or name in state.deleting:
                results[(topic_id, index)] = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            if broker not in state.replicas(tp):
                results[(topic_id, index)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            results[(topic_id, index)] = ErrorCode.NONE
            record = state.partitions[tp]
            recorded = record.state.directories.get(broker)
            if recorded == directory:
                continue
            new_state = replace(record.state, directories={**record.state.directories, broker: directory})
            # Not a move between two of its dirs: the replica was re-created empty in a new one.
            if not (lost_replica(recorded, registration) and broker in record.state.isr):
                moved[tp] = ((topic_id, index), replace(new_state, controller_epoch=state.epoch))
                continue
            new_state = _lost_from_isr(new_state, broker)
            updated = await self._write(tp, new_state)
            if updated is None:  # the partition changed meanwhile: the broker sends it again
                results[(topic_id, index)] = ErrorCode.NOT_CONTROLLER
                continue
            log.warning("broker %d re-created its replica of %s-%d empty in a new log dir: it left the ISR and must "
                        "catch up by replication before it can lead", broker, *tp)
            self._tell_replicas({tp: updated})
            await self._elect_offline([tp] if updated.state.leader < 0 else [])
        if moved:
            versions, raced = await self.zk.update_partition_states(
                {tp: (new_state, state.partitions[tp].zk_version) for tp, (_, new_state) in moved.items()},
                state.epoch_zk_version)
            for tp, version in versions.items():
                state.record(tp, state.partitions[tp].with_dirs(moved[tp][1], version))
            if raced:  # a transaction lost a race (an ISR changed meanwhile): the broker sends those again
                fresh = await asyncio.gather(*(self.zk.partition_state(*tp) for tp in raced))
                for tp, found in zip(raced, fresh, strict=True):
                    if found is not None:
                        state.record(tp, PartitionRecord(*found))
                    results[moved[tp][0]] = ErrorCode.NOT_CONTROLLER
                log.info("%s changed while the controller recorded their dirs; asked again", _names(raced))
        return ErrorCode.NONE, results

    # ---- requests of Kafka brokers: ISR changes (2.7-IV2 on) and producer ids (3.0 on) --------
    async def alter_partition(self, broker: int, broker_epoch: int,
                              proposals: Mapping[tuple[str | uuid.UUID, int], IsrProposal]
                              ) -> tuple[ErrorCode, dict[tuple[str | uuid.UUID, int], AlterPartitionResult]]:
        """``broker``, leading the partitions (each keyed by topic name or id, and index),
        proposes their new ISRs; per partition the error, or the state now recorded."""
        return await self._ask(AlterPartition(broker, broker_epoch, proposals))

    async def _alter_partition(self, broker: int, broker_epoch: int,
                               proposals: Mapping[tuple[str | uuid.UUID, int], IsrProposal]
                               ) -> tuple[ErrorCode, dict[tuple[str | uuid.UUID, int], AlterPartitionResult]]:
        state = self.state
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, {}
        registration = state.brokers.get(broker)
        if registration is None or registration.epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, {}
        names = {assignment.topic_id: name for name, assignment in state.topics.items()}
        live_epochs = {b: r.epoch for b, r in state.brokers.items() if b not in state.shutting_down}
        results: dict[tuple[str | uuid.UUID, int], AlterPartitionResult] = {}
        changed: dict[TopicPartition, PartitionRecord] = {}
        for (topic, index), proposal in proposals.items():
            name = names.get(topic) if isinstance(topic, uuid.UUID) else topic
            tp = (name, index) if name is not None else ("", index)
            record = state.partitions.get(tp)
            if record is None or tp[0] in state.deleting:
                missing = ErrorCode.UNKNOWN_TOPIC_ID if isinstance(topic, uuid.UUID) else \
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                results[(topic, index)] = (missing, None)
                continue
            verdict = judge(broker, proposal, record.state, record.proposal_version, state.replicas(tp), live_epochs)
            if isinstance(verdict, ErrorCode):
                log.info("refused %s's ISR change of %s-%d to %s: %s (it proposed in leader epoch %d, partition "
                         "epoch %d; the controller has leader epoch %d, partition epoch %d)", f"broker {broker}",
                         tp[0], tp[1], list(proposal.isr), verdict.name, proposal.leader_epoch,
                         proposal.partition_epoch, record.state.leader_epoch, record.proposal_version)
                results[(topic, index)] = (verdict, None)
                continue
            if isinstance(verdict, Unchanged):
                results[(topic, index)] = (ErrorCode.NONE, record)
                continue
            updated = await self._write(tp, verdict)
            if updated is None:
                results[(topic, index)] = (ErrorCode.INVALID_UPDATE_VERSION, None)
                continue
            log.info("ISR of %s-%d is now %s (proposed by its leader, broker %d)", tp[0], tp[1],
                     list(verdict.isr), broker)
            results[(topic, index)] = (ErrorCode.NONE, updated)
            changed[tp] = updated
        if changed:
            self._send_update_metadata(state.brokers, changed)
        for tp in changed:
            if state.assignment_of(tp).moving:
                await self._finish_reassignment(tp)
        return ErrorCode.NONE, results

    async def allocate_producer_ids(self, broker: int, broker_epoch: int) -> tuple[ErrorCode, range]:
        """The next block of producer ids for ``broker``, claimed in /latest_producer_id_block."""
        return await self._ask(AllocateProducerIds(broker, broker_epoch))

    async def _allocate_producer_ids(self, broker: int, broker_epoch: int) -> tuple[ErrorCode, range]:
        registration = self.state.brokers.get(broker)
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, range(0)
        if registration is None or registration.epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH, range(0)
        return ErrorCode.NONE, await self.zk.allocate_producer_ids(broker)

    # ---- topics --------------------------------------------------------------------------
    async def _topics_changed(self) -> None:
        names = set(await self.zk.topic_names(watch=self._watch(TopicsChanged())))
        state = self.state
        await asyncio.gather(*(self._load_topic(name) for name in sorted(names - set(state.topics))))
        for name in set(state.topics) - names:
            self._forget_topic(name)
        await self._create_missing_partitions()

    async def _topic_changed(self, topic: str) -> None:
        """A topic's assignment changed (CreatePartitions)."""
        assignment = await self.zk.topic_assignment(topic, watch=self._watch(TopicChanged(topic)))
        if assignment is None:
            return
        self.state.topics[topic] = assignment
        await self._create_missing_partitions()

    async def _create_missing_partitions(self) -> None:
        state = self.state
        new_states: dict[TopicPartition, LeaderIsr] = {}
        for name, assignment in sorted(state.topics.items()):
            if name in state.deleting:
                continue
            for index, replicas in sorted(assignment.partitions.items()):
                tp = (name, index)
                if tp in state.partitions:
                    continue
                if state.partition_state(tp) is NON_EXISTENT:
                    state.new_partition(tp)
                chosen = elections.new_partition(replicas, state.live)
                if chosen is None:
                    log.error("%s-%d cannot start: none of its replicas %s is alive", name, index, list(replicas))
                    continue
                new_states[tp] = LeaderIsr(chosen.leader, 0, chosen.isr, state.epoch)
        if not new_states:
            return
        # All the new partitions' states in a few ZooKeeper transactions, then one LeaderAndIsr
        # and one UpdateMetadata per broker for them all, as Kafka's controller batches them.
        versions = await self.zk.create_partition_states(new_states, state.epoch_zk_version)
        created: dict[TopicPartition, PartitionRecord] = {}
        for tp, leader_isr in new_states.items():
            created[tp] = state.record(tp, PartitionRecord(leader_isr, versions[tp]))
        if created:
            topics = sorted({t for t, _ in created})
            log.info("created %d partition(s) of %s", len(created), ", ".join(topics))
            self._tell_replicas(created, new=True)
            for tp in created:
                self._replicas_told(tp)

    async def _deletions_requested(self) -> None:
        requested = set(await self.zk.topics_to_delete(watch=self._watch(TopicDeletionsRequested())))
        self.state.deleting |= requested
        await self._delete_topics()

    async def _delete_topics(self) -> None:
        """Carry each topic marked for deletion on, as Kafka's TopicDeletionManager does: every
        broker's metadata drops it (UpdateMetadata marks it), each replica on a live broker gets a
        StopReplica with deletion, and the topic's znodes go only once every replica has answered
        that it is deleted (``_deletion_answered``). A ZooKeeper-mode Kafka broker does not delete
        a topic's logs by itself, so while a replica's broker is down the topic stays marked
        (pending, its name taken); that broker is asked when it registers again."""
        state = self.state
        live = set(state.brokers)
        for name in sorted(state.deleting):
            assignment = state.topics.get(name)
            if assignment is None:  # marked, but there is no such topic (any more): nothing to wait for
                await self._topic_deleted(name)
                continue
            if name not in state.deletions:
                log.info("deleting topic %s", name)
                state.deletions.begin(name, [(b, (name, index)) for index, replicas in assignment.partitions.items()
                                             for b in replicas])
                self._send_update_metadata(live, {tp: r for tp, r in state.partitions.items() if tp[0] == name})
            for broker, tps in state.deletions.to_send(name, live).items():
                self._send_stop_replica(broker, tps, delete=True,
                                        on_response=functools.partial(self._deletion_answered, broker, tps))
            state.follow_deletion(name)
            for line in state.deletions.report(name, live):
                log.warning("%s", line)
            if state.deletions.complete(name):
                await self._topic_deleted(name)

    def _deletion_answered(self, broker: int, sent: list[TopicPartition], response: Message) -> None:
        """A broker's answer to a StopReplica with deletion of ``sent``: per partition, its error,
        else the request's; a partition it does not answer for is not deleted."""
        codes = {(p.topic_name, p.partition_index): p.error_code for p in response.get("partition_errors") or []}
        errors = []
        for tp in sent:
            code = response.error_code or codes.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
            errors.append((tp, None if code == ErrorCode.NONE else _error_name(code)))
        self._post_while_controller(TopicDeletionAnswered(broker, tuple(errors)))

    async def _deletion_recorded(self, broker: int, errors: Sequence[tuple[TopicPartition, str | None]]) -> None:
        state = self.state
        for tp, error in errors:
            state.deletions.answered(tp[0], broker, tp, error)
            if error is not None:
                log.warning("broker %d could not delete its replica of %s-%d: %s", broker, tp[0], tp[1], error)
        await self._delete_topics()

    async def _topic_deleted(self, name: str) -> None:
        """Every replica is deleted: the topic's znodes go, and its name is free."""
        state = self.state
        await self.zk.delete_topic_znodes(name, state.epoch_zk_version)
        self._forget_topic(name)
        state.deleting.discard(name)
        state.deletions.forget(name)
        log.info("deleted topic %s", name)

    def _forget_topic(self, name: str) -> None:
        state = self.state
        for broker, tp in [r for r in state.replica_states if r[1][0] == name]:
            if name in state.deletions:
                state.move_replica(broker, tp, replica_states.NON_EXISTENT)
            else:  # its znodes went without this controller deleting it: nothing to check against
                del state.replica_states[(broker, tp)]
        self.state.topics.pop(name, None)
        for tp in [tp for tp in self.state.partitions if tp[0] == name]:
            del self.state.partitions[tp]
        # As Kafka's controller deletes a topic's partitions: offline first, then gone.
        for tp in [tp for tp in self.state.partition_states if tp[0] == name]:
            self.state.move_partition(tp, OFFLINE)
            self.state.move_partition(tp, NON_EXISTENT)

    # ---- ISR changes made by leaders -----------------------------------------------------
    async def _isr_changed(self) -> None:
        notifications = await self.zk.isr_change_notifications(watch=self._watch(IsrChangeNotification()))
        changed: dict[TopicPartition, PartitionRecord] = {}
        for _, partitions in notifications:
            for tp in partitions:
                if tp in self.state.partitions and tp not in changed:
                    found = await self.zk.partition_state(*tp)
                    if found is not None:
                        changed[tp] = self.state.record(tp, PartitionRecord(*found))
        if changed:
            self._send_update_metadata(self.state.brokers, changed)
        for tp in changed:
            if self.state.assignment_of(tp).moving:
                await self._finish_reassignment(tp)
        # Deleted once handled, not before: a reassignment's end does not wait for these writes,
        # and a controller that fails before them reads the changes again on taking over.
        await self.zk.delete_notifications([name for name, _ in notifications], self.state.epoch_zk_version)

    # ---- clean shutdown and preferred leaders ----------------------------------------------
    async def controlled_shutdown(self, broker: int, broker_epoch: int) -> list[TopicPartition] | None:
        """Move leadership off ``broker`` before it stops; the partitions it still leads
        (no other in-sync replica), or None if it is not a live broker of that epoch."""
        return await self._ask(ControlledShutdown(broker, broker_epoch))

    async def _shut_down(self, broker: int, broker_epoch: int) -> list[TopicPartition] | None:
        state = self.state
        registration = state.brokers.get(broker)
        if not self.active or registration is None or registration.epoch != broker_epoch:
            return None
        state.shutting_down.add(broker)
        led = {tp for tp in state.partitions_of(broker) if state.partitions[tp].state.leader == broker}
        # Every partition's new state in one ZooKeeper transaction (a write per partition, one
        # after another, took half a second for a few partitions on a busy machine, while the
        # leaving broker waited).
        changed = await self._decide_and_write(state.partitions_of(broker), lambda tp: self._without_leaving(tp, broker))
        self._tell_replicas(changed)
        # The leaving broker stops following too, so it does not fetch its way back into an ISR.
        self._send_stop_replica(broker, [tp for tp in state.partitions_of(broker)
                                         if state.partitions[tp].state.leader != broker], delete=False)
        moved = sum(1 for tp in led if state.partitions[tp].state.leader != broker)
        remaining = sorted(tp for tp in state.partitions_of(broker) if state.partitions[tp].state.leader == broker)
        log.info("broker %d is shutting down: moved %d leadership(s); it still leads %d partition(s)", broker,
                 moved, len(remaining))
        return remaining

    def _without_leaving(self, tp: TopicPartition, broker: int) -> LeaderIsr | None:
        """``tp``'s state once ``broker`` (shutting down) leads it no more and has left its ISR, in
        a new leader epoch; None when nothing changes (not replicated, no other in-sync replica
        to lead, or the broker out of its ISR already)."""
        state = self.state
        record = state.partitions[tp]
        if len(state.replicas(tp)) < 2:
            return None
        if record.state.leader == broker:
            chosen = elections.controlled_shutdown(state.replicas(tp), record.state.isr, state.eligible(tp), {broker})
            if chosen is None:
                return None
            return replace(record.state, leader=chosen.leader, isr=chosen.isr,
                           leader_epoch=record.state.leader_epoch + 1)
        if broker in record.state.isr:
            return replace(record.state, isr=elections.without_replica(record.state.isr, broker),
                           leader_epoch=record.state.leader_epoch + 1)
        return None

    async def elect_preferred(self, partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, Outcome]:
        """Preferred-leader election (ElectLeaders); per partition NONE or why not."""
        return await self._ask(PreferredLeaderElection(partitions))

    async def _elect_preferred(self, partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, Outcome]:
        state = self.state
        wanted = list(state.partitions) if partitions is None else list(partitions)
        if not self.active:
            return dict.fromkeys(wanted, (ErrorCode.NOT_CONTROLLER, "this broker is no longer the controller"))
        results: dict[TopicPartition, Outcome] = {}

        def preferred(tp: TopicPartition) -> LeaderIsr | None:
            """The partition's state led by its preferred replica, or None with the reason in ``results``."""
            record = state.partitions.get(tp)
            if record is None or tp[0] in state.deleting:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition")
                return None
            replicas = state.replicas(tp)
            if record.state.leader == replicas[0]:
                results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, "already led by its preferred replica")
                return None
            chosen = elections.preferred_replica(replicas, record.state.isr, state.eligible(tp))
            if chosen is None:
                results[tp] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                               f"preferred replica {replicas[0]} is not alive and in sync")
                return None
            results[tp] = (ErrorCode.NOT_CONTROLLER, "the partition changed meanwhile; try again")
            return replace(record.state, leader=chosen.leader, leader_epoch=record.state.leader_epoch + 1)

        # One ZooKeeper transaction for them all: the periodic rebalance gives a restarted broker
        # back every partition it prefers at once, and each leader it moves stalls its producers
        # until the move is told.
        changed = await self._decide_and_write(wanted, preferred)
        results.update(dict.fromkeys(changed, (ErrorCode.NONE, None)))
        if changed:
            log.info("preferred leaders restored for %s", ", ".join(f"{t}-{p}" for t, p in sorted(changed)))
        self._tell_replicas(changed)
        return results

    async def elect_unclean(self, partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, Outcome]:
        """Unclean leader election (ElectLeaders of type unclean) of the offline partitions among
        ``partitions`` (None: every offline partition), whatever unclean.leader.election.enable
        says; per partition NONE or why not."""
        return await self._ask(UncleanLeaderElection(partitions))

    async def _elect_unclean_requested(self, partitions: Iterable[TopicPartition] | None
                                       ) -> dict[TopicPartition, Outcome]:
        state = self.state
        wanted = self._leaderless() if partitions is None else list(partitions)
        if not self.active:
            return dict.fromkeys(wanted, (ErrorCode.NOT_CONTROLLER, "this broker is no longer the controller"))
        led = {tp: record.state.leader for tp in wanted if (record := state.partitions.get(tp)) is not None
               and record.state.leader in state.eligible(tp)}
        results: dict[TopicPartition, Outcome] = {
            tp: (ErrorCode.ELECTION_NOT_NEEDED, f"broker {leader} leads it") for tp, leader in led.items()}
        offline = [tp for tp in wanted if tp not in led]
        if offline:
            log.warning("unclean leader election requested for %d offline partition(s): %s", len(offline),
                        _names(offline))
            _, outcomes = await self._elect_leaderless(offline, unclean_requested=True)
            results.update(outcomes)
        return results

    async def _rebalance_periodically(self) -> None:
        interval = self.config["leader.imbalance.check.interval.seconds"]
        while True:
            await asyncio.sleep(interval)
            self._post_while_controller(AutoLeaderRebalance())

    async def _rebalance(self) -> None:
        if not self.active:
            return
        state = self.state
        imbalanced = [tp for tp, record in state.partitions.items()
                      if state.replicas(tp) and record.state.leader != state.replicas(tp)[0]
                      and state.replicas(tp)[0] in state.eligible(tp) and state.replicas(tp)[0] in record.state.isr]
        if imbalanced:
            await self._elect_preferred(imbalanced)

    # ---- reassignments (KIP-455) ------------------------------------------------------------
    async def alter_reassignments(self, wanted: Mapping[TopicPartition, Sequence[int] | None],
                                  allow_replication_factor_change: bool = True) -> dict[TopicPartition, Outcome]:
        """Start, replace or (None) cancel the reassignment of each partition; NONE or why not."""
        return await self._ask(AlterReassignments(wanted, allow_replication_factor_change))

    async def _alter_reassignments(self, wanted: Mapping[TopicPartition, Sequence[int] | None],
                                   allow_replication_factor_change: bool) -> dict[TopicPartition, Outcome]:
        if not self.active:
            return dict.fromkeys(wanted, (ErrorCode.NOT_CONTROLLER, "this broker is no longer the controller"))
        return {tp: await self._reassign(tp, target, allow_replication_factor_change) for tp, target in wanted.items()}

    async def list_reassignments(self, wanted: Iterable[TopicPartition] | None
                                 ) -> dict[TopicPartition, ReplicaAssignment] | None:
        """The reassignments under way (of ``wanted`` only, if given); None if not the controller."""
        return await self._ask(ListReassignments(wanted))

    async def _list_reassignments(self, wanted: Iterable[TopicPartition] | None
                                  ) -> dict[TopicPartition, ReplicaAssignment] | None:
        if not self.active:
            return None
        state = self.state
        candidates = state.partitions if wanted is None else wanted
        return {tp: state.assignment_of(tp) for tp in candidates
                if tp in state.partitions and tp[0] in state.topics and state.assignment_of(tp).moving}

    async def _reassign(self, tp: TopicPartition, target: Sequence[int] | None,
                        allow_replication_factor_change: bool = True) -> Outcome:
        state = self.state
        if tp not in state.partitions or tp[0] in state.deleting or tp[0] not in state.topics:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp[0]}-{tp[1]} does not exist"
        current = state.assignment_of(tp)
        if target is None:
            if not current.moving:
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"{tp[0]}-{tp[1]} is not being reassigned"
            after = cancel(current)
        else:
            why = invalid_target(target, set(state.brokers))
            if why is not None:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, why
            if not allow_replication_factor_change and len(target) != len(current.original):
                return (ErrorCode.INVALID_REPLICATION_FACTOR,
                        f"{len(target)} replicas asked for, the partition has {len(current.original)}")
            after = reassign(current, target)
        gone = dropped(current, after)
        # The new replicas and a new leader epoch in one write: a replica takes a new replica set
        # only with a new epoch (the leader would not track a follower it does not know of, and
        # the move would never end). Replicas dropped (what an earlier target was adding) leave
        # the ISR, and the leader if it was one. A leader's ISR change landing between the read
        # and the write makes the decision again on the state that won, as Kafka's controller does.
        for _ in range(WRITE_ATTEMPTS):
            record = state.partitions[tp]
            isr = tuple(b for b in record.state.isr if b not in gone) or record.state.isr
            leader = record.state.leader
            if leader in gone or leader not in state.eligible(tp):
                leader = next((b for b in isr if b in state.eligible(tp) and b not in gone), elections.NO_LEADER)
            if await self._write(tp, replace(record.state, leader=leader, isr=isr,
                                             leader_epoch=record.state.leader_epoch + 1), after) is not None:
                break
        else:
            return (ErrorCode.REQUEST_TIMED_OUT, f"{tp[0]}-{tp[1]} changed under each of {WRITE_ATTEMPTS} writes (or "
                    "this broker is no longer the controller); nothing was changed")
        if target is None:
            log.info("reassignment of %s-%d cancelled: back to replicas %s; removing %s", tp[0], tp[1],
                     list(after.replicas), list(gone) or "none")
        else:
            log.info("reassigning %s-%d to %s: adding %s, removing %s once they are in sync", tp[0], tp[1],
                     list(after.target), list(after.adding) or "none", list(after.removing) or "none")
        for broker in after.replicas:
            if broker not in current.replicas:
                state.move_replica(broker, tp, replica_states.NEW)
        await self._tell_reassignment(tp, gone)
        return ErrorCode.NONE, None

    async def _tell_reassignment(self, tp: TopicPartition, gone: Sequence[int]) -> None:
        """LeaderAndIsr to the partition's replicas (the added ones create it), UpdateMetadata to
        every broker, StopReplica with deletion to the replicas it dropped; then finish if it can."""
        state = self.state
        if tp not in state.partitions:
            return
        self._tell_replicas({tp: state.partitions[tp]})
        self._replicas_told(tp)
        for broker in gone:
            state.offline_replicas.get(broker, set()).discard(tp)
            if broker in state.brokers:
                self._send_stop_replica(broker, [tp], delete=True)
            # As Kafka's controller does, without waiting for the broker's answer.
            for step in (replica_states.OFFLINE, replica_states.DELETION_STARTED, replica_states.DELETION_SUCCESSFUL,
                         replica_states.NON_EXISTENT):
                state.move_replica(broker, tp, step)
        await self._finish_reassignment(tp)

    async def _finish_reassignment(self, tp: TopicPartition) -> None:
        """Once the whole target is in sync: the partition gets its target replicas, a leader
        among them, and the replicas leaving are stopped and deleted."""
        state = self.state
        record = state.partitions.get(tp)
        if record is None or tp[0] in state.deleting:
            return
        moving = state.assignment_of(tp)
        if not complete(moving, record.state.isr):
            return
        leader = leader_after(moving, record.state.leader, record.state.isr, state.eligible(tp))
        if leader is None:
            log.warning("%s-%d: the replicas of its new assignment %s are in sync but none can lead yet", tp[0],
                        tp[1], list(moving.target))
            return
        final = finished(moving)
        # The new state and the final replicas in one write: never the one without the other.
        updated = await self._write(tp, replace(
            record.state, leader=leader, leader_epoch=record.state.leader_epoch + 1,
            isr=tuple(b for b in record.state.isr if b in final.replicas),
            directories={b: d for b, d in record.state.directories.items() if b in final.replicas}), final)
        if updated is None:
            self._post_while_controller(FinishReassignment(tp))
            return
        gone = dropped(moving, final)
        log.info("reassignment of %s-%d done: replicas %s, leader %d; deleting the replicas on %s", tp[0], tp[1],
                 list(final.replicas), leader, list(gone) or "none")
        await self._tell_reassignment(tp, gone)

    def _with_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> TopicAssignment:
        """The partition's topic with ``assignment`` as the partition's replicas."""
        topic = self.state.topics[tp[0]]

        def updated(current: Mapping[int, tuple[int, ...]], replicas: tuple[int, ...]) -> dict[int, tuple[int, ...]]:
            result = {index: r for index, r in current.items() if index != tp[1]}
            if replicas:
                result[tp[1]] = replicas
            return result
        return replace(topic, partitions={**topic.partitions, tp[1]: assignment.replicas},
                       adding_replicas=updated(topic.adding_replicas, assignment.adding),
                       removing_replicas=updated(topic.removing_replicas, assignment.removing))

    async def _requested_in_zookeeper(self) -> None:
        """Kafka's /admin/reassign_partitions: start what it asks, then delete it (progress is
        kept in the topics' znodes, as KIP-455 does)."""
        request = await self.zk.requested_reassignments(watch=self._watch(ReassignmentRequested()))
        if request is None:
            return
        if request.malformed is not None:
            log.error("ignoring /admin/reassign_partitions: %s", request.malformed)
        for tp, replicas in sorted(request.partitions.items()):
            error, why = await self._reassign(tp, replicas)
            if error != ErrorCode.NONE:
                log.error("ignoring the reassignment of %s-%d to %s in /admin/reassign_partitions: %s", tp[0], tp[1],
                          list(replicas), why)
        try:
            await self.zk.delete_requested_reassignments(request.version, self.state.epoch_zk_version)
        except StaleState:
            # Rewritten (or removed) since it was read: its watch has queued a new reading.
            log.info("/admin/reassign_partitions changed while the controller started what it asked; reading it "
                     "again")

    # ---- writing decisions and telling brokers ------------------------------------------
    async def _write(self, tp: TopicPartition, new_state: LeaderIsr,
                     assignment: ReplicaAssignment | None = None) -> PartitionRecord | None:
        """Record a partition's new state (and ``assignment`` as its replicas, in the same
        transaction), conditional on the version read; after a lost race (its leader changed the
        ISR meanwhile) neither is written, the fresh state is kept and None answered."""
        state = self.state
        record = state.partitions[tp]
        new_state = replace(new_state, controller_epoch=state.epoch)
        topic = None if assignment is None else self._with_assignment(tp, assignment)
        try:
            version = await self.zk.update_partition_state(tp[0], tp[1], new_state, record.zk_version,
                                                           state.epoch_zk_version, topic)
        except StaleState:
            found = await self.zk.partition_state(*tp)
            if found is not None:
                state.record(tp, PartitionRecord(*found))
            log.info("%s-%d changed while the controller decided; it will decide again", tp[0], tp[1])
            self._post_while_controller(ElectAgain(tp))
            return None
        if topic is not None:
            state.topics[tp[0]] = topic
        return state.record(tp, PartitionRecord(new_state, version))

    async def _decide_and_write(self, partitions: Iterable[TopicPartition],
                                decide: Callable[[TopicPartition], LeaderIsr | None]
                                ) -> dict[TopicPartition, PartitionRecord]:
        """Each partition's new state (``decide``: None when it keeps its state), written in as few
        ZooKeeper transactions as can hold them, each conditional on the versions read (the
        caller then tells the brokers: one LeaderAndIsr and UpdateMetadata per broker for them
        all). A transaction that lost a race (a leader changed an ISR meanwhile) writes none of
        its states: those partitions are read again and decided again, one by one. The records
        written."""
        state = self.state
        wanted = {tp: new_state for tp in partitions if (new_state := decide(tp)) is not None}
        if not wanted:
            return {}
        stamped = {tp: replace(new_state, controller_epoch=state.epoch) for tp, new_state in wanted.items()}
        versions, lost = await self.zk.update_partition_states(
            {tp: (new_state, state.partitions[tp].zk_version) for tp, new_state in stamped.items()},
            state.epoch_zk_version)
        written = {tp: PartitionRecord(stamped[tp], version) for tp, version in versions.items()}
        for tp, record in written.items():
            state.record(tp, record)
        if lost:
            fresh = await asyncio.gather(*(self.zk.partition_state(*tp) for tp in lost))
            for tp, found in zip(lost, fresh, strict=True):
                if found is not None:
                    state.record(tp, PartitionRecord(*found))
            log.info("%s changed while the controller decided; deciding again", _names(lost))
            for tp in lost:
                if tp in state.partitions and (new_state := decide(tp)) is not None \
                        and (updated := await self._write(tp, new_state)) is not None:
                    written[tp] = updated
        return written

    async def _elect_again(self, tp: TopicPartition) -> None:
        """After a lost race: elect only if the fresh state still has no leader that can serve."""
        record = self.state.partitions.get(tp)
        if record is not None and record.state.leader not in self.state.eligible(tp):
            await self._elect_offline([tp])

    def _tell_replicas(self, changed: dict[TopicPartition, PartitionRecord], new: bool = False) -> None:
        """LeaderAndIsr to the live replicas of each changed partition, UpdateMetadata to all.

        A partition that existed is told to its leader first, and to its followers and the
        metadata once the leader answered (channel.AFTER_WAIT_S at most): a broker that follows,
        or whose metadata changed, names the new leader to clients (Metadata, KIP-951's hints),
        and a client sent to a leader that does not know it leads yet gets NOT_LEADER for its
        first pipelined batches and OUT_OF_ORDER_SEQUENCE_NUMBER for the next ones, once it
        knows. librdkafka's idempotent producer answers that by bumping its epoch, and stores
        its records then unacknowledged on other partitions again (librdkafka issue 4953).
        Kafka's controller sends all at once and leaves that window open."""
        if not changed:
            return
        state = self.state
        leading: dict[int, list[TopicPartition]] = {}
        following: dict[int, list[TopicPartition]] = {}
        for tp, record in changed.items():
            for broker in state.replicas(tp):
                if broker in state.brokers:
                    told = leading if broker == record.state.leader and not new else following
                    told.setdefault(broker, []).append(tp)
        answers = [self._send_leader_and_isr(broker, tps) for broker, tps in leading.items()]
        # New partitions had no leader a client could have been sent to before: one request a broker.
        after = asyncio.gather(*answers) if answers else None
        for broker, tps in following.items():
            self._send_leader_and_isr(broker, tps, new=new, after=after)
        self._send_update_metadata(state.brokers, changed, after=after)

    def _replicas_told(self, tp: TopicPartition) -> None:
        """The new replicas of ``tp`` were told their LeaderAndIsr: each is Online, or Offline
        where it cannot serve."""
        for broker in self.state.replicas(tp):
            if self.state.replica_state(broker, tp) is replica_states.NEW:
                self.state.move_replica(broker, tp, self.state.serving_state(broker, tp))

    def _send_leader_and_isr(self, broker: int, partitions: list[TopicPartition], new: bool = False,
                             after: asyncio.Future[Any] | None = None) -> asyncio.Future[None]:
        """Queue ``broker``'s LeaderAndIsr for ``partitions``, sent once ``after`` is done; done when
        it was answered (or is not sent)."""
        body = requests.leader_and_isr(self.state, self.broker_id, broker, partitions, self.listener, new)
        if body is None:
            return nothing_to_wait_for()
        registration = self.state.brokers.get(broker)
        broker_epoch = registration.epoch if registration is not None else -1
        return self.channels.send(
            broker, LEADER_AND_ISR, body, after=after,
            on_response=lambda response: self._leader_and_isr_answered(broker, broker_epoch, response))

    def _leader_and_isr_answered(self, broker: int, broker_epoch: int, response: Message) -> None:
        """A broker's per-partition answers tell which of its replicas are offline (KIP-112)."""
        names = {assignment.topic_id: name for name, assignment in self.state.topics.items()}
        offline: set[TopicPartition] = set()
        online: set[TopicPartition] = set()
        # v5 on answers per topic id; before (inter.broker.protocol.version below 2.8-IV1), per topic name.
        answers = [(names.get(topic.topic_id), answer) for topic in response.get("topics") or []
                   for answer in topic.partition_errors]
        answers += [(answer.topic_name, answer) for answer in response.get("partition_errors") or []]
        for name, answer in answers:
            if name is None:
                continue
            if answer.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                offline.add((name, answer.partition_index))
            elif answer.error_code == ErrorCode.NONE:
                online.add((name, answer.partition_index))
        if offline or online:
            self._post_while_controller(LeaderAndIsrAnswered(broker, broker_epoch, frozenset(offline),
                                                             frozenset(online)))

    async def _replica_states_reported(self, broker: int, broker_epoch: int, offline: frozenset[TopicPartition],
                                       online: frozenset[TopicPartition]) -> None:
        state = self.state
        registration = state.brokers.get(broker)
        if not self.active or registration is None or registration.epoch != broker_epoch:
            return
        known = state.offline_replicas.setdefault(broker, set())
        for tp in sorted(known & online):
            if tp[0] not in state.deleting:
                state.move_replica(broker, tp, replica_states.ONLINE)
        known -= online
        newly = {tp for tp in offline - known if tp in state.partitions}
        if newly:
            await self._replicas_offline(broker, newly, "its LeaderAndIsr answer reports replicas on a failed "
                                                        "log dir")

    def _send_update_metadata(self, brokers: Iterable[int], partitions: dict[TopicPartition, PartitionRecord],
                              after: asyncio.Future[Any] | None = None) -> None:
        body = requests.update_metadata(self.state, self.broker_id, partitions)
        for broker in brokers:
            self.channels.send(broker, UPDATE_METADATA, body, after=after)

    def _send_stop_replica(self, broker: int, partitions: list[TopicPartition], delete: bool,
                           on_response: Callable[[Message], None] | None = None) -> None:
        body = requests.stop_replica(self.state, self.broker_id, partitions, delete)
        if body is not None:
            self.channels.send(broker, STOP_REPLICA, body, on_response=on_response)

    # Each event's handler, which takes the event's fields as its keyword arguments.
    HANDLERS: ClassVar[Mapping[type[ControllerEvent], Callable[..., Awaitable[Any]]]] = {
        ControllerElection: _elect,
        ControllerMoved: controller_moved,
        SessionExpired: session_expired,
        BrokersChanged: _brokers_changed,
        TopicsChanged: _topics_changed,
        TopicChanged: _topic_changed,
        TopicDeletionsRequested: _deletions_requested,
        IsrChangeNotification: _isr_changed,
        LogDirEventNotification: _log_dir_events,
        ReassignmentRequested: _requested_in_zookeeper,
        LeaderAndIsrAnswered: _replica_states_reported,
        TopicDeletionAnswered: _deletion_recorded,
        FinishReassignment: _finish_reassignment,
        ElectAgain: _elect_again,
        UncleanElectionRetry: _retry_unclean_election,
        UncleanConfigChanged: _unclean_config_changed,
        AutoLeaderRebalance: _rebalance,
        AlterPartition: _alter_partition,
        AssignReplicasToDirs: _assign_replicas_to_dirs,
        AllocateProducerIds: _allocate_producer_ids,
        ControlledShutdown: _shut_down,
        PreferredLeaderElection: _elect_preferred,
        UncleanLeaderElection: _elect_unclean_requested,
        AlterReassignments: _alter_reassignments,
        ListReassignments: _list_reassignments,
    }


@dataclass
class _Queued:
    """An event in the controller's queue. With ``epoch``, it is handled only while this broker
    is the controller of that epoch; with ``answer``, the handler's result goes there."""

    event: ControllerEvent | Callable[[], Awaitable[None]]
    epoch: int | None = None
    answer: asyncio.Future[Any] | None = None

    @property
    def name(self) -> str:
        return type(self.event).__name__ if isinstance(self.event, ControllerEvent) else \
            getattr(self.event, "__qualname__", repr(self.event))
