"""The controller's requests to brokers, built from its state alone (requests.py): the bodies
as dicts, and the bytes the protocol's own schemas make of them at each version a controller
sends from inter.broker.protocol.version 2.6 on, decoded back."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from minikafka.controller import requests
from minikafka.controller.state import ControllerState, PartitionRecord
from minikafka.zk.kafka_zk import BrokerRegistration, LeaderIsr, TopicAssignment
from protocol import decode_body, encode_body

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6
ORDERS_ID, OLD_ID = uuid.UUID(int=1), uuid.UUID(int=2)


def _registration(broker: int, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(broker, {"INTERNAL": (f"b{broker}", 9093, "PLAINTEXT"),
                                       "EXTERNAL": (f"b{broker}", 9092, "SASL_SSL")}, rack=rack, epoch=100 + broker)


@pytest.fixture
def state() -> ControllerState:
    """Brokers 1 and 2 alive, 3 gone. orders-0 on (1, 2) led by 1; orders-1 moving from
    (2, 1) to (2, 3), leaderless; topic old (on 1) being deleted."""
    state = ControllerState(epoch=7, brokers={1: _registration(1, "r1"), 2: _registration(2)})
    state.topics["orders"] = TopicAssignment(ORDERS_ID, {0: (1, 2), 1: (2, 1, 3)}, adding_replicas={1: (3,)},
                                             removing_replicas={1: (1,)})
    state.topics["old"] = TopicAssignment(OLD_ID, {0: (1,)})
    state.partitions[("orders", 0)] = PartitionRecord(LeaderIsr(1, 4, (1, 2), 6), 12)
    state.partitions[("orders", 1)] = PartitionRecord(LeaderIsr(-1, 9, (2,), 5), 30)
    state.partitions[("old", 0)] = PartitionRecord(LeaderIsr(1, 2, (1,), 6), 3)
    state.deleting.add("old")
    state.offline_replicas[2] = {("orders", 1)}
    return state


def _round_trip(api_key: int, version: int, body: Mapping[str, Any]) -> Any:
    """``body`` as the channel sends it (with the broker's epoch), encoded and decoded back."""
    return decode_body(api_key, version, True, encode_body(api_key, version, True, {**body, "broker_epoch": 102}))


def test_leader_and_isr_tells_the_existing_partitions_and_their_live_leaders(state: ControllerState) -> None:
    body = requests.leader_and_isr(state, 5, 3, [("orders", 0), ("orders", 1), ("old", 0), ("gone", 0)],
                                   "INTERNAL")
    assert body == {
        "controller_id": 5, "controller_epoch": 7, "type": 0,
        "topic_states": [{"topic_name": "orders", "topic_id": ORDERS_ID, "partition_states": [
            {"partition_index": 0, "controller_epoch": 6, "leader": 1, "leader_epoch": 4, "isr": [1, 2],
             "partition_epoch": 12, "replicas": [1, 2], "adding_replicas": [], "removing_replicas": [],
             "is_new": False, "leader_recovery_state": 0},
            # Broker 3 is the replica this reassignment adds: it creates the partition.
            {"partition_index": 1, "controller_epoch": 5, "leader": -1, "leader_epoch": 9, "isr": [2],
             "partition_epoch": 30, "replicas": [2, 1, 3], "adding_replicas": [3], "removing_replicas": [1],
             "is_new": True, "leader_recovery_state": 0}]}],
        # No address for "no leader" (-1); a leader's address is on the listener asked for.
        "live_leaders": [{"broker_id": 1, "host_name": "b1", "port": 9093}]}
    new = requests.leader_and_isr(state, 5, 2, [("orders", 0)], "EXTERNAL", new=True)
    assert new is not None
    assert new["topic_states"][0]["partition_states"][0].get("is_new") is True
    assert new["live_leaders"] == [{"broker_id": 1, "host_name": "b1", "port": 9092}]


def test_leader_and_isr_of_nothing_left_to_tell_is_none(state: ControllerState) -> None:
    assert requests.leader_and_isr(state, 5, 1, [("old", 0), ("gone", 0)], "INTERNAL") is None
    assert requests.leader_and_isr(state, 5, 1, [], "INTERNAL") is None


@pytest.mark.parametrize("version", [4, 5, 6, 7])
def test_leader_and_isr_encodes_at_each_version(state: ControllerState, version: int) -> None:
    body = requests.leader_and_isr(state, 5, 2, [("orders", 0), ("orders", 1)], "INTERNAL")
    assert body is not None
    decoded = _round_trip(LEADER_AND_ISR, version, body)
    assert (decoded.controller_id, decoded.controller_epoch, decoded.broker_epoch) == (5, 7, 102)
    [topic] = decoded.topic_states
    assert topic.topic_name == "orders"
    assert topic.topic_id == (ORDERS_ID if version >= 5 else uuid.UUID(int=0))
    assert [(p.partition_index, p.leader, p.leader_epoch, p.isr, p.partition_epoch, p.replicas, p.adding_replicas)
            for p in topic.partition_states] == [(0, 1, 4, [1, 2], 12, [1, 2], []), (1, -1, 9, [2], 30, [2, 1, 3], [3])]
    assert [(b.broker_id, b.host_name, b.port) for b in decoded.live_leaders] == [(1, "b1", 9093)]


def test_update_metadata_marks_deleted_topics_and_lists_offline_replicas(state: ControllerState) -> None:
    body = requests.update_metadata(state, 5, {**state.partitions, ("gone", 0): state.partitions[("old", 0)]})
    def endpoints(host: str) -> list[dict[str, Any]]:
        return [{"port": 9093, "host": host, "listener": "INTERNAL", "security_protocol": 0},
                {"port": 9092, "host": host, "listener": "EXTERNAL", "security_protocol": 3}]
    assert body == {
        "controller_id": 5, "controller_epoch": 7,
        "topic_states": [
            {"topic_name": "orders", "topic_id": ORDERS_ID, "partition_states": [
                {"partition_index": 0, "controller_epoch": 6, "leader": 1, "leader_epoch": 4, "isr": [1, 2],
                 "zk_version": 12, "replicas": [1, 2], "offline_replicas": []},
                # 3 is dead, and 2's replica is on a failed log dir.
                {"partition_index": 1, "controller_epoch": 5, "leader": -1, "leader_epoch": 9, "isr": [2],
                 "zk_version": 30, "replicas": [2, 1, 3], "offline_replicas": [2, 3]}]},
            # A topic being deleted: its leader is the deletion mark. An unknown topic is left out.
            {"topic_name": "old", "topic_id": OLD_ID, "partition_states": [
                {"partition_index": 0, "controller_epoch": 6, "leader": requests.LEADER_DURING_DELETE,
                 "leader_epoch": 2, "isr": [1], "zk_version": 3, "replicas": [1], "offline_replicas": []}]}],
        "live_brokers": [
            {"id": 1, "rack": "r1", "endpoints": endpoints("b1")},
            {"id": 2, "rack": None, "endpoints": endpoints("b2")}]}


@pytest.mark.parametrize("version", [6, 7, 8])
def test_update_metadata_encodes_at_each_version(state: ControllerState, version: int) -> None:
    decoded = _round_trip(UPDATE_METADATA, version, requests.update_metadata(state, 5, state.partitions))
    assert (decoded.controller_id, decoded.controller_epoch, decoded.broker_epoch) == (5, 7, 102)
    assert [(t.topic_name, [(p.partition_index, p.leader, p.offline_replicas) for p in t.partition_states])
            for t in decoded.topic_states] == [("orders", [(0, 1, []), (1, -1, [2, 3])]), ("old", [(0, -2, [])])]
    assert [(b.id, b.rack, [(e.listener, e.host, e.port, e.security_protocol) for e in b.endpoints])
            for b in decoded.live_brokers] == [
        (1, "r1", [("INTERNAL", "b1", 9093, 0), ("EXTERNAL", "b1", 9092, 3)]),
        (2, None, [("INTERNAL", "b2", 9093, 0), ("EXTERNAL", "b2", 9092, 3)])]


def test_stop_replica_carries_each_partitions_leader_epoch_or_the_deletion_mark(state: ControllerState) -> None:
    body = requests.stop_replica(state, 5, [("orders", 0), ("old", 0), ("gone", 0)], delete=True)
    assert body == {"controller_id": 5, "controller_epoch": 7, "topic_states": [
        {"topic_name": "orders", "partition_states": [
            {"partition_index": 0, "delete_partition": True, "leader_epoch": 4}]},
        {"topic_name": "old", "partition_states": [
            {"partition_index": 0, "delete_partition": True, "leader_epoch": requests.LEADER_DURING_DELETE}]},
        # A partition the controller no longer knows: no epoch to fence with.
        {"topic_name": "gone", "partition_states": [
            {"partition_index": 0, "delete_partition": True, "leader_epoch": -1}]}]}
    assert requests.stop_replica(state, 5, [], delete=False) is None


@pytest.mark.parametrize("version", [3, 4])
def test_stop_replica_encodes_at_each_version(state: ControllerState, version: int) -> None:
    body = requests.stop_replica(state, 5, [("orders", 0), ("orders", 1)], delete=False)
    assert body is not None
    decoded = _round_trip(STOP_REPLICA, version, body)
    assert (decoded.controller_id, decoded.controller_epoch, decoded.broker_epoch) == (5, 7, 102)
    assert [(t.topic_name, [(p.partition_index, p.leader_epoch, p.delete_partition) for p in t.partition_states])
            for t in decoded.topic_states] == [("orders", [(0, 4, False), (1, 9, False)])]
