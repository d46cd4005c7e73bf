"""What the ZooKeeper-mode controller handles, one at a time, in order (Kafka's ControllerEvent).

Each event is a named, immutable record of what happened or what was asked: a ZooKeeper watch
that fired, a broker's answer to a request, a timer, or a request of a broker or an admin
client. ``ZkController.HANDLERS`` maps each event type to the method that handles it, which
takes the event's fields as its keyword arguments; the logs name an event by its type.

The requests (the last group) are answered: whoever posts one awaits the handler's result.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from minikafka.controller.isr_proposals import IsrProposal
from minikafka.controller.state import TopicPartition


class ControllerEvent:
    """The base of every event the controller's queue holds."""

    __slots__ = ()

    def arguments(self) -> dict[str, object]:
        """The event's fields by name: its handler's keyword arguments."""
        names: tuple[str, ...] = self.__slots__
        return {name: getattr(self, name) for name in names}


# ---- this broker's controllership --------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ControllerElection(ControllerEvent):
    """Stand for controller: at startup, when /controller vanished, after a failed event."""


@dataclass(frozen=True, slots=True)
class ControllerMoved(ControllerEvent):
    """/controller changed, or this broker registered again in a new ZooKeeper session."""


@dataclass(frozen=True, slots=True)
class SessionExpired(ControllerEvent):
    """This broker's ZooKeeper session expired (and /controller with it, if it was ours)."""


# ---- watches on ZooKeeper -----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BrokersChanged(ControllerEvent):
    """/brokers/ids changed: brokers registered, re-registered or vanished."""


@dataclass(frozen=True, slots=True)
class TopicsChanged(ControllerEvent):
    """/brokers/topics changed: topics created or deleted."""


@dataclass(frozen=True, slots=True)
class TopicChanged(ControllerEvent):
    """A topic's assignment changed (CreatePartitions)."""

    topic: str


@dataclass(frozen=True, slots=True)
class TopicDeletionsRequested(ControllerEvent):
    """/admin/delete_topics changed."""


@dataclass(frozen=True, slots=True)
class IsrChangeNotification(ControllerEvent):
    """/isr_change_notification changed: leaders changed ISRs (before AlterPartition)."""


@dataclass(frozen=True, slots=True)
class LogDirEventNotification(ControllerEvent):
    """/log_dir_event_notification changed: a broker's log dir failed (KIP-112)."""


@dataclass(frozen=True, slots=True)
class ReassignmentRequested(ControllerEvent):
    """/admin/reassign_partitions changed."""


# ---- answers from brokers, retries and timers ---------------------------------------------
@dataclass(frozen=True, slots=True)
class LeaderAndIsrAnswered(ControllerEvent):
    """A broker (of registration ``broker_epoch``) answered a LeaderAndIsr: which of its
    replicas serve and which are on a failed log dir."""

    broker: int
    broker_epoch: int
    offline: frozenset[TopicPartition]
    online: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class TopicDeletionAnswered(ControllerEvent):
    """A broker answered a StopReplica with deletion: per partition, None or the error."""

    broker: int
    errors: tuple[tuple[TopicPartition, str | None], ...]


@dataclass(frozen=True, slots=True)
class FinishReassignment(ControllerEvent):
    """Try again to finish a reassignment whose last write lost a race."""

    tp: TopicPartition


@dataclass(frozen=True, slots=True)
class ElectAgain(ControllerEvent):
    """A partition's write lost a race: elect its leader again if it still needs one."""

    tp: TopicPartition


@dataclass(frozen=True, slots=True)
class UncleanElectionRetry(ControllerEvent):
    """Retry an unclean election that waited for a replica's answer (attempt ``attempt``)."""

    partitions: tuple[TopicPartition, ...]
    attempt: int


@dataclass(frozen=True, slots=True)
class UncleanConfigChanged(ControllerEvent):
    """A topic's configs (``topic``), or the broker configs (None), changed."""

    topic: str | None


@dataclass(frozen=True, slots=True)
class AutoLeaderRebalance(ControllerEvent):
    """leader.imbalance.check.interval.seconds passed: give leadership back to preferred replicas."""


# ---- requests, answered to whoever posted them ----------------------------------------------
@dataclass(frozen=True, slots=True)
class AlterPartition(ControllerEvent):
    broker: int
    broker_epoch: int
    proposals: Mapping[tuple[str | uuid.UUID, int], IsrProposal]


@dataclass(frozen=True, slots=True)
class AssignReplicasToDirs(ControllerEvent):
    broker: int
    broker_epoch: int
    assignments: Sequence[tuple[uuid.UUID, int, uuid.UUID]]


@dataclass(frozen=True, slots=True)
class AllocateProducerIds(ControllerEvent):
    broker: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class ControlledShutdown(ControllerEvent):
    broker: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class PreferredLeaderElection(ControllerEvent):
    """ElectLeaders of type preferred (None: every partition)."""

    partitions: Iterable[TopicPartition] | None


@dataclass(frozen=True, slots=True)
class UncleanLeaderElection(ControllerEvent):
    """ElectLeaders of type unclean (None: every offline partition)."""

    partitions: Iterable[TopicPartition] | None


@dataclass(frozen=True, slots=True)
class AlterReassignments(ControllerEvent):
    wanted: Mapping[TopicPartition, Sequence[int] | None]
    allow_replication_factor_change: bool


@dataclass(frozen=True, slots=True)
class ListReassignments(ControllerEvent):
    wanted: Iterable[TopicPartition] | None
