"""The rules of moving a partition's replicas between brokers (KIP-455), without I/O.

A partition being reassigned keeps, in its topic znode, every replica it has during the move
(``replicas``: the target first, then the original replicas leaving) and which of them are
being added and removed. The controller (``ZkController``) applies these functions to that
record and does what they decide: start the adding replicas, wait until the whole target is in
sync, then give the partition its target and stop the replicas that are leaving.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ReplicaAssignment:
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def moving(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        """The replicas before the move (what a cancellation goes back to)."""
        return tuple(b for b in self.replicas if b not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.removing)


def invalid_target(target: Sequence[int], live_brokers: set[int]) -> str | None:
    """Why ``target`` cannot be a partition's replicas, or None."""
    if not target:
        return "the replica list is empty"
    if len(set(target)) != len(target):
        return f"the replica list {list(target)} names a broker twice"
    unknown = sorted(set(target) - live_brokers)
    if unknown:
        return f"brokers {unknown} are not live brokers of the cluster (live: {sorted(live_brokers)})"
    return None


def reassign(current: ReplicaAssignment, target: Sequence[int]) -> ReplicaAssignment:
    """Start moving to ``target``, or, when a move is under way, move to ``target`` instead: the
    original replicas stay until the new target is in sync; replicas the earlier target was
    adding and the new one does not want are dropped at once (see ``dropped``)."""
    original = current.original
    target = tuple(target)
    if target == original:
        return ReplicaAssignment(original)  # nothing to move (or the move is undone)
    replicas = target + tuple(b for b in original if b not in target)
    return ReplicaAssignment(replicas, tuple(b for b in target if b not in original),
                             tuple(b for b in original if b not in target))


def cancel(current: ReplicaAssignment) -> ReplicaAssignment:
    """Go back to the original replicas: the ones being added are dropped."""
    return ReplicaAssignment(current.original)


def dropped(before: ReplicaAssignment, after: ReplicaAssignment) -> tuple[int, ...]:
    """Replicas the partition had and does not have any more: they are stopped and deleted."""
    return tuple(b for b in before.replicas if b not in after.replicas)


def complete(assignment: ReplicaAssignment, isr: Sequence[int]) -> bool:
    """The move can finish: every replica of the target is in sync."""
    return assignment.moving and all(b in isr for b in assignment.target)


def finished(assignment: ReplicaAssignment) -> ReplicaAssignment:
    return ReplicaAssignment(assignment.target)


def leader_after(assignment: ReplicaAssignment, leader: int, isr: Sequence[int], eligible: set[int]) -> int | None:
    """Who leads once the partition has only its target: the current leader if it stays and
    can serve, else the first in-sync, eligible replica of the target (None: nobody can)."""
    target = assignment.target
    if leader in target and leader in eligible:
        return leader
    return next((b for b in target if b in isr and b in eligible), None)
