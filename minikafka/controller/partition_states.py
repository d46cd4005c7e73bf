"""The states a partition goes through in the controller's eyes, and which changes are legal
(Kafka's PartitionStateMachine).

NonExistent -> New (its topic or partition was created) -> Online (a leader was elected)
<-> Offline (its leader is gone or cannot serve) -> NonExistent (its topic was deleted).
A change from a state not listed as a legal previous state is a controller bug: it is logged
as an error naming the partition and both states, and the partition keeps its state (as
Kafka's controller does), without failing the event that asked for it.
"""

from __future__ import annotations

import enum
import logging

log = logging.getLogger(__name__)


class PartitionState(enum.Enum):
    NON_EXISTENT = "NonExistent"
    NEW = "New"
    ONLINE = "Online"
    OFFLINE = "Offline"


NON_EXISTENT, NEW, ONLINE, OFFLINE = (PartitionState.NON_EXISTENT, PartitionState.NEW, PartitionState.ONLINE,
                                      PartitionState.OFFLINE)

# For each state, the states a partition may enter it from.
LEGAL_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    NEW: frozenset({NON_EXISTENT}),
    ONLINE: frozenset({NEW, ONLINE, OFFLINE}),
    OFFLINE: frozenset({NEW, ONLINE, OFFLINE}),
    NON_EXISTENT: frozenset({OFFLINE}),
}


def legal(before: PartitionState, after: PartitionState) -> bool:
    return before in LEGAL_PREVIOUS[after]


def checked(topic: str, partition: int, before: PartitionState, after: PartitionState) -> PartitionState:
    """The partition's state after asking to change it from ``before`` to ``after``: ``after``
    if that is legal, else ``before``, with the illegal change logged."""
    if legal(before, after):
        return after
    log.error("illegal state change of partition %s-%d from %s to %s (legal only from %s); it stays %s",
              topic, partition, before.value, after.value,
              ", ".join(sorted(s.value for s in LEGAL_PREVIOUS[after])), before.value)
    return before
