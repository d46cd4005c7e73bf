"""The states a replica goes through in the controller's eyes, and which changes are legal
(Kafka's ZooKeeper-mode ReplicaStateMachine).

NonExistent -> New (created with its partition, or added by a reassignment) -> Online (told
its LeaderAndIsr, its broker live) <-> Offline (its broker gone or its log dir failed). A
replica that goes away is taken Offline, then its deletion is Started (StopReplica with
deletion sent) and Successful (answered), and it is NonExistent. A deletion that cannot go on
(its broker is down, or could not delete it) makes it Ineligible until it is tried again
(through Offline) or its broker is back (Online).

A change from a state not listed as a legal previous state is a controller bug: it is logged
as an error naming the replica and both states, and the replica keeps its state (as Kafka's
controller does), without failing the event that asked for it.
"""

from __future__ import annotations

import enum
import logging

log = logging.getLogger(__name__)


class ReplicaState(enum.Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


NEW, ONLINE, OFFLINE = ReplicaState.NEW, ReplicaState.ONLINE, ReplicaState.OFFLINE
DELETION_STARTED, DELETION_SUCCESSFUL, DELETION_INELIGIBLE = (
    ReplicaState.DELETION_STARTED, ReplicaState.DELETION_SUCCESSFUL, ReplicaState.DELETION_INELIGIBLE)
NON_EXISTENT = ReplicaState.NON_EXISTENT

# For each state, the states a replica may enter it from.
LEGAL_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    NEW: frozenset({NON_EXISTENT}),
    ONLINE: frozenset({NEW, ONLINE, OFFLINE, DELETION_INELIGIBLE}),
    OFFLINE: frozenset({NEW, ONLINE, OFFLINE, DELETION_INELIGIBLE}),
    DELETION_STARTED: frozenset({OFFLINE}),
    DELETION_SUCCESSFUL: frozenset({DELETION_STARTED}),
    DELETION_INELIGIBLE: frozenset({OFFLINE, DELETION_STARTED}),
    NON_EXISTENT: frozenset({DELETION_SUCCESSFUL}),
}


def legal(before: ReplicaState, after: ReplicaState) -> bool:
    return before in LEGAL_PREVIOUS[after]


def checked(broker: int, topic: str, partition: int, before: ReplicaState, after: ReplicaState) -> ReplicaState:
    """The replica's state after asking to change it from ``before`` to ``after``: ``after`` if
    that is legal, else ``before``, with the illegal change logged."""
    if legal(before, after):
        return after
    log.error("illegal state change of the replica of %s-%d on broker %d from %s to %s (legal only from %s); "
              "it stays %s", topic, partition, broker, before.value, after.value,
              ", ".join(sorted(s.value for s in LEGAL_PREVIOUS[after])), before.value)
    return before
