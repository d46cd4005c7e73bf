"""What the active controller knows of the cluster: brokers, topics, partition and replica states.

``ControllerState`` is owned by the controller's event task (zk_controller.py): read and
changed by one event at a time, never from another task. The request builders
(requests.py) read it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from minikafka.controller import replica_states
from minikafka.controller.partition_states import NEW, NON_EXISTENT, OFFLINE, ONLINE, PartitionState, checked
from minikafka.controller.reassignment import ReplicaAssignment
from minikafka.controller.replica_states import ReplicaState
from minikafka.controller.topic_deletion import ReplicaDeletion, TopicDeletions
from minikafka.zk.kafka_zk import BrokerRegistration, LeaderIsr, TopicAssignment

TopicPartition = tuple[str, int]


@dataclass
class PartitionRecord:
    """What the controller knows of one partition: its state znode and that znode's version."""

    state: LeaderIsr
    zk_version: int
    # The version of the last write that changed more than the replicas' log dirs (-1: zk_version).
    # No broker is told of a dir assignment (KIP-858; a ZooKeeper-mode Kafka broker knows nothing
    # of them), so its leader goes on proposing ISR changes at the version before it.
    decided_version: int = -1

    @property
    def proposal_version(self) -> int:
        """The oldest partition epoch a leader's ISR proposal may be made at: a proposal at an
        older one was decided on a state that has changed since."""
        return self.zk_version if self.decided_version < 0 else self.decided_version

    def with_dirs(self, state: LeaderIsr, version: int) -> PartitionRecord:
        """The record once ``state``, which changes only the replicas' log dirs, is written at
        ``version``."""
        return PartitionRecord(state, version, self.proposal_version)


@dataclass
class ControllerState:
    epoch: int = -1
    epoch_zk_version: int = -1
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    partitions: dict[TopicPartition, PartitionRecord] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    deleting: set[str] = field(default_factory=set)
    # Of each topic being deleted, which replicas are deleted, asked, or waited for (a broker down).
    deletions: TopicDeletions = field(default_factory=TopicDeletions)
    # Replicas on live brokers that cannot serve because their log dir failed (KIP-112): from
    # the dirs a broker registers as offline, and from LeaderAndIsr answers of KAFKA_STORAGE_ERROR.
    offline_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)
    # Each partition's state (partition_states.py); a partition not listed does not exist.
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    # Each replica's state (replica_states.py), by (broker, partition); one not listed does not exist.
    replica_states: dict[tuple[int, TopicPartition], ReplicaState] = field(default_factory=dict)

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states.get(tp, NON_EXISTENT)

    def move_partition(self, tp: TopicPartition, to: PartitionState) -> None:
        """Change ``tp``'s state to ``to`` if that is a legal change (else it is logged)."""
        after = checked(tp[0], tp[1], self.partition_state(tp), to)
        if after is NON_EXISTENT:
            self.partition_states.pop(tp, None)
        else:
            self.partition_states[tp] = after

    def replica_state(self, broker: int, tp: TopicPartition) -> ReplicaState:
        return self.replica_states.get((broker, tp), replica_states.NON_EXISTENT)

    def move_replica(self, broker: int, tp: TopicPartition, to: ReplicaState) -> None:
        """Change the state of ``broker``'s replica of ``tp`` to ``to`` if that is a legal change
        (else it is logged)."""
        after = replica_states.checked(broker, tp[0], tp[1], self.replica_state(broker, tp), to)
        if after is replica_states.NON_EXISTENT:
            self.replica_states.pop((broker, tp), None)
        else:
            self.replica_states[(broker, tp)] = after

    def serving_state(self, broker: int, tp: TopicPartition) -> ReplicaState:
        """Online if ``broker``'s replica of ``tp`` can serve (its broker live, its dir online), else Offline."""
        return replica_states.ONLINE if broker in self.eligible(tp) else replica_states.OFFLINE

    def new_partition(self, tp: TopicPartition) -> None:
        """``tp`` was created (its topic or partition): it and its replicas are New."""
        self.move_partition(tp, NEW)
        for broker in self.replicas(tp):
            self.move_replica(broker, tp, replica_states.NEW)

    def follow_deletion(self, topic: str) -> None:
        """The replica states of a topic being deleted, after where its deletion stands: Started
        once asked, Successful once deleted, Ineligible while it waits (its broker down or
        failing). A deletion (re)starts from Offline, as Kafka's controller starts one."""
        for (broker, tp), progress in self.deletions.progress(topic).items():
            before = self.replica_state(broker, tp)
            after = _DELETION_STATES[progress]
            if before is after:
                continue
            if after is not replica_states.DELETION_SUCCESSFUL and before is not replica_states.DELETION_STARTED:
                self.move_replica(broker, tp, replica_states.OFFLINE)
            self.move_replica(broker, tp, after)

    def leadership_state(self, tp: TopicPartition) -> PartitionState:
        """Online if ``tp``'s recorded leader can serve (live, its dir online), else Offline."""
        return ONLINE if self.partitions[tp].state.leader in self.eligible(tp) else OFFLINE

    def record(self, tp: TopicPartition, record: PartitionRecord) -> PartitionRecord:
        """Keep ``record`` as ``tp``'s state as written or read, its partition state following
        its leader."""
        self.partitions[tp] = record
        self.move_partition(tp, self.leadership_state(tp))
        return record

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return tuple(self.topics[tp[0]].partitions[tp[1]])

    def assignment_of(self, tp: TopicPartition) -> ReplicaAssignment:
        topic = self.topics[tp[0]]
        return ReplicaAssignment(tuple(topic.partitions[tp[1]]), tuple(topic.adding_replicas.get(tp[1], ())),
                                 tuple(topic.removing_replicas.get(tp[1], ())))

    def partitions_of(self, broker: int) -> list[TopicPartition]:
        return [tp for tp in self.partitions if broker in self.replicas(tp)]

    @property
    def live(self) -> set[int]:
        return set(self.brokers) - self.shutting_down

    def eligible(self, tp: TopicPartition) -> set[int]:
        """The brokers whose replica of ``tp`` may lead or stay in sync: live, its dir online."""
        return {b for b in self.live if tp not in self.offline_replicas.get(b, ())}

    def offline_replicas_of(self, tp: TopicPartition) -> list[int]:
        """Metadata's offline replicas: on a dead broker or on a failed log dir."""
        return [b for b in self.replicas(tp) if b not in self.brokers or tp in self.offline_replicas.get(b, ())]

    def offline_by_dirs(self, broker: int) -> set[TopicPartition]:
        """The broker's replicas recorded in a log dir it does not list online, when it lists a dir
        offline: their data is on the failed disk (see ``lost_by_dirs`` for a dir it does not
        list at all)."""
        registration = self.brokers.get(broker)
        if registration is None or not registration.offline_dirs:
            return set()
        online = registration.online_dir_ids
        return {tp for tp in self.partitions_of(broker)
                if (recorded := self.partitions[tp].state.directories.get(broker)) is not None
                and recorded not in online}

    def lost_by_dirs(self, broker: int) -> set[TopicPartition]:
        """The broker's replicas recorded in a log dir it no longer has, when every dir it lists
        is online: that disk was replaced (or dropped from log.dirs), so whatever replica the
        broker holds now was re-created empty (KIP-858: its directory id is unknown to it)."""
        registration = self.brokers.get(broker)
        if registration is None or not registration.log_dirs or registration.offline_dirs:
            return set()
        return {tp for tp in self.partitions_of(broker)
                if lost_replica(self.partitions[tp].state.directories.get(broker), registration)}


_DELETION_STATES = {ReplicaDeletion.WAITING: replica_states.DELETION_INELIGIBLE,
                    ReplicaDeletion.FAILED: replica_states.DELETION_INELIGIBLE,
                    ReplicaDeletion.STARTED: replica_states.DELETION_STARTED,
                    ReplicaDeletion.DONE: replica_states.DELETION_SUCCESSFUL}


def lost_replica(recorded: uuid.UUID | None, registration: BrokerRegistration) -> bool:
    """Whether a replica recorded in dir ``recorded`` lost its data: the dir is not one its broker
    registers online. Unknown (never reported) is not lost: there is no evidence either way."""
    return recorded is not None and bool(registration.log_dirs) and recorded not in registration.online_dir_ids
