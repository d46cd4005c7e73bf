"""The rules of a reassignment (minikafka.controller.reassignment), without ZooKeeper."""

from __future__ import annotations

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


def test_a_move_keeps_the_leaving_replicas_until_the_target_is_in_sync() -> None:
    moving = reassign(ReplicaAssignment((1, 2, 3)), [4, 2, 3])
    assert moving == ReplicaAssignment((4, 2, 3, 1), adding=(4,), removing=(1,))
    assert moving.original == (2, 3, 1) and moving.target == (4, 2, 3)
    assert not complete(moving, [1, 2, 3])
    assert complete(moving, [1, 2, 3, 4])
    assert finished(moving) == ReplicaAssignment((4, 2, 3))
    assert dropped(moving, finished(moving)) == (1,)


def test_a_move_to_the_same_replicas_or_a_reorder_needs_no_copy() -> None:
    assert reassign(ReplicaAssignment((1, 2, 3)), [1, 2, 3]) == ReplicaAssignment((1, 2, 3))
    reordered = reassign(ReplicaAssignment((1, 2, 3)), [3, 1, 2])
    assert reordered.adding == () and reordered.removing == () and reordered.replicas == (3, 1, 2)


def test_a_new_target_replaces_the_one_under_way_and_drops_what_it_was_adding() -> None:
    first = reassign(ReplicaAssignment((1, 2)), [3, 4])
    assert first == ReplicaAssignment((3, 4, 1, 2), adding=(3, 4), removing=(1, 2))
    second = reassign(first, [5, 1])
    assert second == ReplicaAssignment((5, 1, 2), adding=(5,), removing=(2,))
    assert dropped(first, second) == (3, 4)


def test_a_cancellation_goes_back_to_the_original_replicas() -> None:
    moving = reassign(ReplicaAssignment((1, 2, 3)), [4, 5, 3])
    back = cancel(moving)
    # As in Kafka, the original replicas come back in the order the move listed them.
    assert back == ReplicaAssignment((3, 1, 2)) and not back.moving
    assert dropped(moving, back) == (4, 5)
    assert reassign(moving, [3, 1, 2]) == back


def test_invalid_targets_say_why() -> None:
    assert invalid_target([], {1, 2}) == "the replica list is empty"
    assert "twice" in (invalid_target([1, 1], {1, 2}) or "")
    assert "[7]" in (invalid_target([1, 7], {1, 2}) or "")
    assert invalid_target([2, 1], {1, 2}) is None


def test_the_leader_stays_if_it_can_else_the_first_in_sync_target_replica_leads() -> None:
    moving = reassign(ReplicaAssignment((1, 2, 3)), [4, 2, 3])
    assert leader_after(moving, 2, [1, 2, 3, 4], {1, 2, 3, 4}) == 2
    assert leader_after(moving, 1, [1, 2, 3, 4], {1, 2, 3, 4}) == 4
    assert leader_after(moving, 1, [1, 2, 3, 4], {1, 2, 3}) == 2
    assert leader_after(moving, 1, [1], {1}) is None
