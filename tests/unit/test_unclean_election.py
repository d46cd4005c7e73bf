"""The unclean election's choice (controller/elections.py): among the live replicas, the one
whose log goes furthest; never an empty one (a replaced disk) while another holds data."""

from __future__ import annotations

from minikafka.controller.elections import ReplicaLogEnd, UncleanElection, unclean_leader

EMPTY = ReplicaLogEnd(-1, 0)


def test_the_replica_holding_the_most_leads_not_the_first_live_one() -> None:
    # Broker 1 (preferred, first) came back with its disk replaced; 2 and 3 kept their data.
    ends = {1: EMPTY, 2: ReplicaLogEnd(3, 80), 3: ReplicaLogEnd(3, 100)}
    assert unclean_leader((1, 2, 3), {1, 2, 3}, ends) == UncleanElection(3, (3,), ReplicaLogEnd(3, 100), 0)


def test_a_newer_leader_epoch_beats_a_longer_older_history() -> None:
    # Broker 2's offsets past 90 were written by a leader of epoch 2 that epoch 4 superseded.
    ends = {1: ReplicaLogEnd(4, 95), 2: ReplicaLogEnd(2, 140)}
    choice = unclean_leader((2, 1), {1, 2}, ends)
    assert choice is not None and choice.leader == 1
    assert choice.offsets_behind == 45, "broker 2 holds 45 offsets past the new leader's end"


def test_a_tie_goes_to_the_first_in_assignment_order() -> None:
    ends = {3: ReplicaLogEnd(5, 100), 2: ReplicaLogEnd(5, 100), 1: EMPTY}
    choice = unclean_leader((1, 3, 2), {1, 2, 3}, ends)
    assert choice is not None and (choice.leader, choice.isr) == (3, (3,))


def test_only_live_replicas_are_candidates() -> None:
    ends = {1: EMPTY, 2: ReplicaLogEnd(3, 100)}
    choice = unclean_leader((3, 1, 2), {1}, ends)
    assert choice is not None and choice.leader == 1, "broker 2 is not live; 3 (most data?) is gone"
    assert unclean_leader((1, 2), set(), ends) is None, "no live replica"


def test_every_empty_replica_may_still_lead_if_all_are_empty() -> None:
    choice = unclean_leader((2, 1), {1, 2}, {1: EMPTY, 2: EMPTY})
    assert choice is not None and choice.leader == 2 and choice.log_end.empty


def test_no_choice_while_a_live_replica_has_not_said_where_its_log_ends() -> None:
    # Broker 2 might hold more than broker 1; choosing 1 now could drop what only 2 has.
    assert unclean_leader((1, 2), {1, 2}, {1: EMPTY}) is None
    assert unclean_leader((1, 2), {1, 2}, {1: ReplicaLogEnd(3, 10)}) is None
