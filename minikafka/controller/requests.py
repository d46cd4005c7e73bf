"""The bodies of the controller's requests to brokers: LeaderAndIsr, UpdateMetadata, StopReplica.

Pure functions of the controller's state (state.py), as Kafka's
ControllerBrokerRequestBatch builds them: no I/O, no channel. The controller sends what
they build through its channels (channel.py), which add the receiving broker's epoch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from minikafka.controller.state import ControllerState, PartitionRecord, TopicPartition
from protocol.typed.leader_and_isr import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
)
from protocol.typed.stop_replica import StopReplicaPartitionState, StopReplicaRequest
from protocol.typed.update_metadata import UpdateMetadataPartitionState, UpdateMetadataRequest

LEADER_DURING_DELETE = -2  # UpdateMetadata's mark of a topic being deleted (brokers drop it)
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def leader_and_isr(state: ControllerState, controller_id: int, broker: int, partitions: Iterable[TopicPartition],
                   listener: str, new: bool = False) -> LeaderAndIsrRequest | None:
    """The LeaderAndIsr telling ``broker`` the state of ``partitions`` (those that exist and are
    not being deleted), with the address on ``listener`` of each of their live leaders; None
    when no partition is left to tell. ``new``: the partitions were just created."""
    wanted = [tp for tp in partitions if tp in state.partitions and tp[0] not in state.deleting]
    if not wanted:
        return None
    by_topic: dict[str, list[LeaderAndIsrPartitionState]] = {}
    leaders: set[int] = set()
    for tp in wanted:
        record = state.partitions[tp]
        assignment = state.assignment_of(tp)
        leaders.add(record.state.leader)
        by_topic.setdefault(tp[0], []).append({
            "partition_index": tp[1], "controller_epoch": record.state.controller_epoch,
            "leader": record.state.leader, "leader_epoch": record.state.leader_epoch,
            "isr": list(record.state.isr), "partition_epoch": record.zk_version,
            "replicas": list(assignment.replicas), "adding_replicas": list(assignment.adding),
            "removing_replicas": list(assignment.removing),
            # A replica a reassignment adds is created here for the first time (KIP-112).
            "is_new": new or broker in assignment.adding, "leader_recovery_state": 0})
    live_leaders: list[LeaderAndIsrLiveLeader] = []
    for leader in sorted(leaders):
        registration = state.brokers.get(leader)
        address = registration.endpoint(listener) if registration is not None else None
        if address is not None:
            live_leaders.append({"broker_id": leader, "host_name": address[0], "port": address[1]})
    return {
        "controller_id": controller_id, "controller_epoch": state.epoch, "type": 0,
        "topic_states": [{"topic_name": name, "topic_id": state.topics[name].topic_id, "partition_states": ps}
                         for name, ps in by_topic.items()],
        "live_leaders": live_leaders}


def update_metadata(state: ControllerState, controller_id: int,
                    partitions: Mapping[TopicPartition, PartitionRecord]) -> UpdateMetadataRequest:
    """The UpdateMetadata telling a broker ``partitions`` (those whose topic is known) and
    every live broker's endpoints."""
    by_topic: dict[str, list[UpdateMetadataPartitionState]] = {}
    for tp, record in partitions.items():
        if tp[0] not in state.topics:
            continue
        # A topic being deleted is marked so in every UpdateMetadata, as Kafka's controller
        # does: a broker told of it (one that just registered) drops it rather than serve it.
        leader = LEADER_DURING_DELETE if tp[0] in state.deleting else record.state.leader
        by_topic.setdefault(tp[0], []).append({
            "partition_index": tp[1], "controller_epoch": record.state.controller_epoch,
            "leader": leader, "leader_epoch": record.state.leader_epoch,
            "isr": list(record.state.isr), "zk_version": record.zk_version, "replicas": list(state.replicas(tp)),
            "offline_replicas": state.offline_replicas_of(tp)})
    return {
        "controller_id": controller_id, "controller_epoch": state.epoch,
        "topic_states": [{"topic_name": name, "topic_id": state.topics[name].topic_id, "partition_states": ps}
                         for name, ps in by_topic.items()],
        "live_brokers": [{"id": b, "rack": r.rack, "endpoints": [
            {"port": port, "host": host, "listener": listener,
             "security_protocol": SECURITY_PROTOCOL_IDS.get(protocol, 0)}
            for listener, (host, port, protocol) in r.endpoints.items()]}
            for b, r in sorted(state.brokers.items())]}


def stop_replica(state: ControllerState, controller_id: int, partitions: Iterable[TopicPartition],
                 delete: bool) -> StopReplicaRequest | None:
    """The StopReplica of ``partitions`` (with their deletion if ``delete``); None when there
    are none. A topic being deleted carries the deletion mark as its leader epoch, so the broker
    deletes whatever epoch it holds."""
    by_topic: dict[str, list[StopReplicaPartitionState]] = {}
    for tp in partitions:
        record = state.partitions.get(tp)
        by_topic.setdefault(tp[0], []).append({
            "partition_index": tp[1], "delete_partition": delete,
            "leader_epoch": LEADER_DURING_DELETE if tp[0] in state.deleting
            else (record.state.leader_epoch if record else -1)})
    if not by_topic:
        return None
    return {
        "controller_id": controller_id, "controller_epoch": state.epoch,
        "topic_states": [{"topic_name": name, "partition_states": ps} for name, ps in by_topic.items()]}
