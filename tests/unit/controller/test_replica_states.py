"""The replica states' transition table (Kafka's ReplicaStateMachine) and the controller state
that follows it through a topic's life: illegal changes are logged and leave the state as it was."""

from __future__ import annotations

import logging
import uuid

import pytest

from minikafka.controller.replica_states import (
    DELETION_INELIGIBLE,
    DELETION_STARTED,
    DELETION_SUCCESSFUL,
    NEW,
    NON_EXISTENT,
    OFFLINE,
    ONLINE,
    ReplicaState,
    checked,
    legal,
)
from minikafka.controller.state import ControllerState, PartitionRecord
from minikafka.zk.kafka_zk import BrokerRegistration, LeaderIsr, TopicAssignment

LEGAL = {(NON_EXISTENT, NEW),
         *((before, after) for after in (ONLINE, OFFLINE) for before in (NEW, ONLINE, OFFLINE, DELETION_INELIGIBLE)),
         (OFFLINE, DELETION_STARTED), (DELETION_STARTED, DELETION_SUCCESSFUL),
         (OFFLINE, DELETION_INELIGIBLE), (DELETION_STARTED, DELETION_INELIGIBLE),
         (DELETION_SUCCESSFUL, NON_EXISTENT)}


@pytest.mark.parametrize("before", list(ReplicaState), ids=lambda s: s.value)
@pytest.mark.parametrize("after", list(ReplicaState), ids=lambda s: s.value)
def test_the_transition_table_is_kafkas(before: ReplicaState, after: ReplicaState,
                                        caplog: pytest.LogCaptureFixture) -> None:
    assert legal(before, after) == ((before, after) in LEGAL)
    with caplog.at_level(logging.ERROR, "minikafka.controller.replica_states"):
        assert checked(2, "orders", 3, before, after) == (after if (before, after) in LEGAL else before)
    if (before, after) in LEGAL:
        assert not caplog.records
    else:
        [record] = caplog.records
        assert f"orders-3 on broker 2 from {before.value} to {after.value}" in record.getMessage()


def _registration(broker: int) -> BrokerRegistration:
    return BrokerRegistration(broker, {"INTERNAL": ("127.0.0.1", 9093, "PLAINTEXT")}, epoch=3)


def _state() -> ControllerState:
    """Brokers 1 and 2 live, topic t with one partition on both."""
    state = ControllerState(epoch=2, brokers={1: _registration(1), 2: _registration(2)})
    state.topics["t"] = TopicAssignment(uuid.uuid4(), {0: (1, 2)})
    return state


TP = ("t", 0)


def _created(state: ControllerState) -> None:
    state.new_partition(TP)
    assert [state.replica_state(b, TP) for b in (1, 2)] == [NEW, NEW]
    state.record(TP, PartitionRecord(LeaderIsr(1, 0, (1, 2), 2), 0))
    for broker in (1, 2):  # told their LeaderAndIsr
        state.move_replica(broker, TP, state.serving_state(broker, TP))


def test_a_replica_follows_its_broker_and_log_dir(caplog: pytest.LogCaptureFixture) -> None:
    state = _state()
    with caplog.at_level(logging.ERROR):
        _created(state)
        assert [state.replica_state(b, TP) for b in (1, 2)] == [ONLINE, ONLINE]
        del state.brokers[2]
        state.move_replica(2, TP, OFFLINE)
        assert state.serving_state(2, TP) is OFFLINE
        state.brokers[2] = _registration(2)
        state.move_replica(2, TP, state.serving_state(2, TP))
        assert state.replica_state(2, TP) is ONLINE
        state.offline_replicas[1] = {TP}  # its log dir failed
        assert state.serving_state(1, TP) is OFFLINE
        state.move_replica(1, TP, OFFLINE)
    assert not caplog.records
    with caplog.at_level(logging.ERROR):
        state.move_replica(1, TP, NON_EXISTENT)  # a replica is deleted before it goes
    assert state.replica_state(1, TP) is OFFLINE
    assert "t-0 on broker 1 from OfflineReplica to NonExistentReplica" in caplog.text


def test_a_topic_deletion_waits_for_a_broker_that_is_down(caplog: pytest.LogCaptureFixture) -> None:
    state = _state()
    with caplog.at_level(logging.ERROR):
        _created(state)
        del state.brokers[2]
        state.move_replica(2, TP, OFFLINE)
        state.deletions.begin("t", [(1, TP), (2, TP)])
        assert state.deletions.to_send("t", {1}) == {1: [TP]}
        state.follow_deletion("t")
        assert [state.replica_state(b, TP) for b in (1, 2)] == [DELETION_STARTED, DELETION_INELIGIBLE]
        state.deletions.answered("t", 1, TP, None)
        state.follow_deletion("t")
        assert state.replica_state(1, TP) is DELETION_SUCCESSFUL
        # Broker 2 is back: its deletion starts over from Offline.
        state.brokers[2] = _registration(2)
        assert state.deletions.to_send("t", {1, 2}) == {2: [TP]}
        state.follow_deletion("t")
        assert state.replica_state(2, TP) is DELETION_STARTED
        state.deletions.answered("t", 2, TP, "KAFKA_STORAGE_ERROR")
        state.follow_deletion("t")
        assert state.replica_state(2, TP) is DELETION_INELIGIBLE
        state.deletions.broker_back(2)
        state.deletions.to_send("t", {1, 2})
        state.follow_deletion("t")  # as the controller does after each send
        assert state.replica_state(2, TP) is DELETION_STARTED
        state.deletions.answered("t", 2, TP, None)
        state.follow_deletion("t")
        assert state.deletions.complete("t")
        for broker in (1, 2):
            state.move_replica(broker, TP, NON_EXISTENT)
    assert not caplog.records
    assert not state.replica_states


def test_a_replica_dropped_by_a_reassignment_is_deleted(caplog: pytest.LogCaptureFixture) -> None:
    state = _state()
    state.brokers[3] = _registration(3)
    with caplog.at_level(logging.ERROR):
        _created(state)
        state.move_replica(3, TP, NEW)  # added by a reassignment
        state.topics["t"] = TopicAssignment(state.topics["t"].topic_id, {0: (3, 2, 1)})
        state.move_replica(3, TP, state.serving_state(3, TP))
        for step in (OFFLINE, DELETION_STARTED, DELETION_SUCCESSFUL, NON_EXISTENT):
            state.move_replica(1, TP, step)
    assert not caplog.records
    assert {b: state.replica_state(b, TP) for b in (1, 2, 3)} == {1: NON_EXISTENT, 2: ONLINE, 3: ONLINE}
    with caplog.at_level(logging.ERROR):
        state.move_replica(2, TP, NEW)  # an existing replica is never new again
    assert state.replica_state(2, TP) is ONLINE
    assert "t-0 on broker 2 from OnlineReplica to NewReplica" in caplog.text
