"""Racks (issue 33): three brokers with ``broker.rack`` on one ZooKeeper, two in rack "west" and
one in rack "east". Their racks are in their registrations and in Metadata and DescribeCluster;
new replicas are spread over both racks; and a confluent-kafka consumer with ``client.rack=east``
reads from the east follower (KIP-392, the leader names it as preferred read replica), which its
bytes-out counter shows, then goes back to the leader when that follower dies.

The same brokers have a control-plane listener (control.plane.listener.name, KIP-291, issue 32):
the controller's requests go there, and nothing else does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kazoo.client import KazooClient

from minikafka.config.broker import RACK_AWARE_REPLICA_SELECTOR
from protocol.errors import ErrorCode
from tests.integration.broker_process import HOST, KafkaWire, free_port, wait_until
from tests.system.cluster import CLUSTER_SETTINGS, Cluster, inter_broker_request
from tests.system.observe import metric_sample
from tests.system.zookeeper import ZooKeeperProcess

CHROOT = "/racks"
RACKS = {1: "west", 2: "west", 3: "east"}
BYTES_OUT = "kafka_server_BrokerTopicMetrics_BytesOut_total"
CONTROL_PORTS: dict[int, int] = {}  # each broker's control-plane listener
STOP_REPLICA = 5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("racks")
    zookeeper = ZooKeeperProcess(root / "zookeeper").start()
    made: Cluster | None = None
    try:
        made = Cluster(root, zookeeper, chroot=CHROOT, metrics=True, overrides={
            "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR, "control.plane.listener.name": "CONTROL",
            "listener.security.protocol.map": CLUSTER_SETTINGS["listener.security.protocol.map"] + ",CONTROL:PLAINTEXT"})
        for broker_id, rack in RACKS.items():
            made.brokers[broker_id].overrides["broker.rack"] = rack
            CONTROL_PORTS[broker_id] = free_port()
            made.brokers[broker_id].overrides["listeners"] += f",CONTROL://{HOST}:{CONTROL_PORTS[broker_id]}"
        yield made.start()
    finally:
        if made is not None:
            made.close()
        zookeeper.close()


def _admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def test_racks_are_registered_as_kafka_writes_them_and_shown_to_clients(cluster: Cluster) -> None:
    zk = KazooClient(hosts=cluster.zookeeper.connect + CHROOT)
    zk.start(timeout=10)
    try:
        registered = {b: json.loads(zk.get(f"/brokers/ids/{b}")[0])["rack"] for b in RACKS}
    finally:
        zk.stop()
        zk.close()
    assert registered == RACKS
    # Metadata (v8) and DescribeCluster, each from a broker that learnt the others' racks through
    # the controller's UpdateMetadata.
    for broker in cluster.brokers.values():
        assert {b.node_id: b.rack for b in cluster.metadata(via=broker).brokers} == RACKS
    admin = _admin(cluster)  # held: a collected client fails its futures
    described = admin.describe_cluster(include_authorized_operations=False).result(30)
    assert {node.id: node.rack for node in described.nodes} == RACKS


def _established_to(port: int) -> int:
    """How many TCP connections to 127.0.0.1:``port`` are established (the kernel's table)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, _, state = line.split()[1:4]
        if state == "01" and local == f"0100007F:{port:04X}":
            count += 1
    return count


def test_the_controller_uses_the_control_plane_listener_and_nothing_else_does(cluster: Cluster) -> None:
    zk = KazooClient(hosts=cluster.zookeeper.connect + CHROOT)
    zk.start(timeout=10)
    try:
        registered = {b: json.loads(zk.get(f"/brokers/ids/{b}")[0]) for b in RACKS}
    finally:
        zk.stop()
        zk.close()
    for broker_id, port in CONTROL_PORTS.items():
        assert f"CONTROL://{HOST}:{port}" in registered[broker_id]["endpoints"]
        assert registered[broker_id]["listener_security_protocol_map"]["CONTROL"] == "PLAINTEXT"
    # The controller's channel to every broker, its own included, is on that broker's control-plane
    # listener; and every broker took its UpdateMetadata (they accept it nowhere else): each knows all.
    wait_until(lambda: all(_established_to(port) for port in CONTROL_PORTS.values()), 30, interval=0.1,
               what="the controller connected to every control-plane listener")
    for broker in cluster.brokers.values():
        assert len(cluster.metadata(via=broker).brokers) == len(RACKS)
    some = cluster.brokers[1]
    # The controller's requests are refused on the inter-broker listener now...
    refused = inter_broker_request(cluster.internal_ports[1], STOP_REPLICA, 3, {
        "controller_id": 1, "controller_epoch": 1, "broker_epoch": 0, "topic_states": []})
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # ... and a client's request is not served on the control-plane listener.
    with KafkaWire((HOST, CONTROL_PORTS[1]), timeout=5.0) as wire, pytest.raises((OSError, EOFError)):
        wire.metadata(None, version=8)
    assert "not served on the control-plane listener CONTROL" in some.stderr_text()


def test_new_replicas_are_spread_over_both_racks(cluster: Cluster) -> None:
    admin = _admin(cluster)
    admin.create_topics([NewTopic("spread", 6, 2)])["spread"].result(30)
    cluster.wait_for_leaders("spread", 6)
    admin.create_partitions([NewPartitions("spread", 9)])["spread"].result(30)
    cluster.wait_for_leaders("spread", 9)
    placed = {p: tuple(state.replica_nodes) for p, state in cluster.partitions("spread").items()}
    # The one broker of rack east holds a replica of every partition; leaders go round the brokers.
    assert all(3 in replicas and {RACKS[b] for b in replicas} == {"west", "east"} for replicas in placed.values()), placed
    leaders = [replicas[0] for replicas in placed.values()]
    assert {leaders.count(b) for b in RACKS} == {3}, placed


def _consume(consumer: Consumer, topic: str, upto: int, seen: list[int], timeout: float) -> None:
    def more() -> bool:
        message = consumer.poll(0.2)
        if message is not None:
            error = message.error()
            assert error is None or error.code() == KafkaError._PARTITION_EOF, error
            if error is None:
                seen.append(message.offset())
        return len(seen) >= upto
    wait_until(more, timeout, interval=0, what=f"{upto} records of {topic}")


def _produce(cluster: Cluster, topic: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(first, first + count):
        producer.produce(topic, key=b"%d" % i, value=bytes(1000), partition=0)
    assert producer.flush(30) == 0


def test_a_consumer_reads_from_the_follower_in_its_rack_and_falls_back_to_the_leader(cluster: Cluster) -> None:
    topic = "nearby"
    # Led by a west broker, with the east broker as a follower: an east consumer is sent to it.
    admin = _admin(cluster)
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[2, 3, 1]])])[topic].result(30)
    cluster.wait_for_leaders(topic, 1, isr_size=3)
    leader, follower = cluster.brokers[2], cluster.brokers[3]
    _produce(cluster, topic, 0, 500)
    wait_until(lambda: 3 in cluster.partitions(topic)[0].isr_nodes, 30, interval=0.1, what="the follower in sync")
    before = {b: metric_sample(broker, BYTES_OUT) for b, broker in cluster.brokers.items()}
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "east", "client.rack": "east",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 1000, "fetch.wait.max.ms": 100})
    seen: list[int] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        _consume(consumer, topic, 500, seen, 30)
        from_follower = metric_sample(follower, BYTES_OUT) - before[3]
        from_leader = metric_sample(leader, BYTES_OUT) - before[2]
        assert from_follower >= 500 * 1000 and from_leader < 1000, (from_follower, from_leader)

        # Sampled before the records exist: the consumer's fetcher, back at the leader, may read
        # them in the background as soon as they are acknowledged.
        at_leader = metric_sample(leader, BYTES_OUT)
        follower.kill9()
        _produce(cluster, topic, 500, 200)
        _consume(consumer, topic, 700, seen, 60)
        assert metric_sample(leader, BYTES_OUT) - at_leader >= 200 * 1000, "the rest came from the leader"
        assert seen == list(range(700)), "every record once, in order"
    finally:
        consumer.close()
