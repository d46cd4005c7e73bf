"""The partition states' transition table (Kafka's PartitionStateMachine) and the controller
state that follows it: illegal changes are logged and leave the state as it was."""

from __future__ import annotations

import logging
import uuid

import pytest

from minikafka.controller.partition_states import (
    NEW,
    NON_EXISTENT,
    OFFLINE,
    ONLINE,
    PartitionState,
    checked,
    legal,
)
from minikafka.controller.replica_states import ReplicaState
from minikafka.controller.state import ControllerState, PartitionRecord
from minikafka.zk.kafka_zk import BrokerRegistration, LeaderIsr, TopicAssignment

LEGAL = {(NON_EXISTENT, NEW), (NEW, ONLINE), (NEW, OFFLINE), (ONLINE, ONLINE), (ONLINE, OFFLINE),
         (OFFLINE, ONLINE), (OFFLINE, OFFLINE), (OFFLINE, NON_EXISTENT)}


@pytest.mark.parametrize("before", list(PartitionState), ids=lambda s: s.value)
@pytest.mark.parametrize("after", list(PartitionState), ids=lambda s: s.value)
def test_the_transition_table_is_kafkas(before: PartitionState, after: PartitionState,
                                        caplog: pytest.LogCaptureFixture) -> None:
    assert legal(before, after) == ((before, after) in LEGAL)
    with caplog.at_level(logging.ERROR, "minikafka.controller.partition_states"):
        assert checked("orders", 3, before, after) == (after if (before, after) in LEGAL else before)
    if (before, after) in LEGAL:
        assert not caplog.records
    else:
        [record] = caplog.records
        assert f"orders-3 from {before.value} to {after.value}" in record.getMessage()


def _state() -> ControllerState:
    registration = BrokerRegistration(1, {"INTERNAL": ("127.0.0.1", 9093, "PLAINTEXT")}, epoch=3)
    state = ControllerState(epoch=2, brokers={1: registration})
    state.topics["t"] = TopicAssignment(uuid.uuid4(), {0: (1, 2)})
    return state


def test_a_partition_is_new_then_follows_its_leader_then_is_deleted(caplog: pytest.LogCaptureFixture) -> None:
    state = _state()
    tp = ("t", 0)
    assert state.partition_state(tp) is NON_EXISTENT
    state.new_partition(tp)
    assert state.partition_state(tp) is NEW
    assert [state.replica_state(b, tp) for b in (1, 2)] == [ReplicaState.NEW, ReplicaState.NEW]
    state.record(tp, PartitionRecord(LeaderIsr(1, 0, (1, 2), 2), 0))
    assert state.partition_state(tp) is ONLINE
    state.record(tp, PartitionRecord(LeaderIsr(2, 1, (2,), 2), 1))  # broker 2 is not alive
    assert state.partition_state(tp) is OFFLINE
    state.record(tp, PartitionRecord(LeaderIsr(1, 2, (1,), 2), 2))
    assert state.partition_state(tp) is ONLINE
    with caplog.at_level(logging.ERROR):
        state.move_partition(tp, NON_EXISTENT)  # an online partition is taken offline first
        assert state.partition_state(tp) is ONLINE
        assert "t-0 from Online to NonExistent" in caplog.text
        state.move_partition(tp, OFFLINE)
        state.move_partition(tp, NON_EXISTENT)
    assert state.partition_state(tp) is NON_EXISTENT and tp not in state.partition_states
    assert len(caplog.records) == 1


def test_a_new_partition_cannot_be_new_again(caplog: pytest.LogCaptureFixture) -> None:
    state = _state()
    state.move_partition(("t", 0), NEW)
    state.move_partition(("t", 0), ONLINE)
    with caplog.at_level(logging.ERROR):
        state.move_partition(("t", 0), NEW)
    assert state.partition_state(("t", 0)) is ONLINE
    assert "t-0 from Online to New" in caplog.text
