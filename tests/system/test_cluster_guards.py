"""What a cluster refuses: controller requests from clients or from an old controller, a second
broker with a registered broker.id, and a ZooKeeper that cannot be reached at startup."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from protocol.errors import ErrorCode
from tests.integration.broker_process import HOST, BrokerNotReady, BrokerProcess, free_port
from tests.integration.disk_faults import records_blob
from tests.system.cluster import CLUSTER_SETTINGS, Cluster, inter_broker_request

# No test changes what the next one sees (each refused request is checked to change nothing).
pytestmark = pytest.mark.shared_cluster
LEADER_AND_ISR = 4
TOPIC = "guarded"


def _leader_and_isr(controller_id: int, controller_epoch: int, broker_epoch: int, topic_id: uuid.UUID,
                    replicas: list[int], leader: int) -> dict[str, Any]:
    return {"controller_id": controller_id, "controller_epoch": controller_epoch, "broker_epoch": broker_epoch,
            "type": 0, "live_leaders": [],
            "topic_states": [{"topic_name": TOPIC, "topic_id": topic_id, "partition_states": [{
                "partition_index": 0, "controller_epoch": controller_epoch, "leader": leader, "leader_epoch": 999,
                "isr": [leader], "partition_epoch": 99, "replicas": replicas, "adding_replicas": [],
                "removing_replicas": [], "is_new": False, "leader_recovery_state": 0}]}]}


def test_controller_requests_from_clients_or_old_controllers_change_nothing(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, 1, 3)
    before = cluster.partitions(TOPIC)[0]
    topic_id = next(t.topic_id for t in cluster.metadata([TOPIC]).topics if t.name == TOPIC)
    victim = next(b for b in cluster.brokers if b != before.leader_id)
    said_before = cluster.brokers[victim].stderr_size()
    zk = KazooClient(hosts=cluster.zookeeper.connect + cluster.chroot)
    zk.start(10)
    try:
        broker_epoch = zk.exists(f"/brokers/ids/{victim}").czxid
        controller_epoch = int(zk.get("/controller_epoch")[0])
    finally:
        zk.stop()
        zk.close()
    # Tell the follower it leads, with what a client could know or guess.
    forged = _leader_and_isr(cluster.controller_id(), controller_epoch + 1, broker_epoch, topic_id, [1, 2, 3], victim)
    on_client_listener = inter_broker_request(cluster.brokers[victim].port, LEADER_AND_ISR, 6, forged)
    assert on_client_listener.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    internal = cluster.internal_ports[victim]
    older_broker_epoch = inter_broker_request(internal, LEADER_AND_ISR, 6, {**forged, "broker_epoch": broker_epoch - 1})
    assert older_broker_epoch.error_code == ErrorCode.STALE_BROKER_EPOCH
    # A newer broker epoch is this broker's next registration, which the controller can read
    # before the broker's own write returns: accepted, as Kafka's brokers do (an empty request
    # from the current controller, so nothing changes).
    newer_broker_epoch = inter_broker_request(internal, LEADER_AND_ISR, 6, {
        **_leader_and_isr(cluster.controller_id(), controller_epoch, broker_epoch + 1, topic_id, [1, 2, 3], victim),
        "topic_states": []})
    assert newer_broker_epoch.error_code == ErrorCode.NONE
    stale = inter_broker_request(internal, LEADER_AND_ISR, 6, {**forged, "controller_epoch": controller_epoch - 1})
    assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    old_version = inter_broker_request(internal, LEADER_AND_ISR, 1, {
        "controller_id": 1, "controller_epoch": controller_epoch + 5, "live_leaders": [],
        "ungrouped_partition_states": [{"topic_name": TOPIC, "partition_index": 0, "controller_epoch": 9,
                                        "leader": victim, "leader_epoch": 999, "isr": [victim],
                                        "partition_epoch": 9, "replicas": [1, 2, 3], "is_new": False}]})
    assert old_version.error_code == ErrorCode.STALE_BROKER_EPOCH, "a request without a broker epoch is refused"
    for broker in cluster.brokers.values():
        after = cluster.partitions(TOPIC, broker)[0]
        assert (after.leader_id, after.leader_epoch) == (before.leader_id, before.leader_epoch)
    text = cluster.brokers[victim].stderr_since(said_before)
    assert "refused LeaderAndIsr" in text and "on listener PLAINTEXT" in text
    assert f"it was meant for broker epoch {broker_epoch - 1}, an earlier registration" in text


def test_a_second_broker_with_a_registered_id_refuses_to_start(cluster: Cluster, tmp_path: Path) -> None:
    twin = BrokerProcess(tmp_path / "twin", broker_id=2, ready_timeout=30, overrides={
        "zookeeper.connect": cluster.zookeeper.connect + cluster.chroot, **CLUSTER_SETTINGS})
    twin.overrides["listeners"] = f"PLAINTEXT://{HOST}:{twin.port},INTERNAL://{HOST}:{free_port()}"
    try:
        try:
            twin.start()
            raise AssertionError("a second broker 2 started")
        except BrokerNotReady:
            pass
        assert "broker.id 2 is already registered in ZooKeeper" in twin.stderr_text()
        assert cluster.brokers[2].is_running()
        assert len(cluster.metadata().brokers) == 3
    finally:
        twin.close()


def test_unreachable_zookeeper_at_startup_is_a_clear_error(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    lonely = BrokerProcess(tmp_path / "lonely", ready_timeout=30, overrides={
        "zookeeper.connect": f"{HOST}:{port}", "zookeeper.connection.timeout.ms": "1500"})
    try:
        try:
            lonely.start()
            raise AssertionError("a broker without ZooKeeper started")
        except BrokerNotReady:
            pass
        text = lonely.stderr_text()
        assert f"cannot connect to ZooKeeper at {HOST}:{port} within zookeeper.connection.timeout.ms=1500" in text
    finally:
        lonely.close()


def test_a_follower_answers_produce_with_the_current_leader(cluster: Cluster) -> None:
    topic = "produced-to-a-follower"
    cluster.create_topic(topic, 1, 3)
    state = cluster.partitions(topic)[0]
    follower = next(b for b in cluster.brokers if b != state.leader_id)
    answer = inter_broker_request(cluster.brokers[follower].port, 0, 10, {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records_blob(b"x")}]}]})
    (partition,) = answer.responses[0].partition_responses
    assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (
        state.leader_id, state.leader_epoch)
    (endpoint,) = answer.node_endpoints
    assert (endpoint.node_id, endpoint.port) == (state.leader_id, cluster.brokers[state.leader_id].port)
