"""Every client sees the cluster: three brokers, the controller, and each partition's leader,
replicas and ISR; the ISR shrinks when a follower is paused (SIGSTOP) and grows back after it
continues, each change proposed by the leader to the controller with AlterPartition (the default
inter.broker.protocol.version, 3.9-IV0), and producer ids come from the controller
(AllocateProducerIds)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from protocol import ApiKey
from protocol.errors import ErrorCode
from tests.integration.broker_process import wait_until
from tests.system.cluster import Cluster, inter_broker_request

# The follower paused is running again at the end (or the next test's restore resumes it), and
# each test has its topic and reads only what the brokers wrote during it.
pytestmark = pytest.mark.shared_cluster
TOPIC = "replicated"


def test_every_client_sees_three_brokers_leaders_and_isr(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, 3, 3)
    expected = {b.broker_id for b in cluster.brokers.values()}
    controller = cluster.controller_id()
    assert controller in expected

    kcat = subprocess.run(["kcat", "-b", cluster.bootstrap, "-L", "-J"], capture_output=True, text=True, timeout=30,
                          check=True)
    doc = json.loads(kcat.stdout)
    assert {b["id"] for b in doc["brokers"]} == expected
    (topic,) = [t for t in doc["topics"] if t["topic"] == TOPIC]
    for p in topic["partitions"]:
        assert sorted(r["id"] for r in p["replicas"]) == sorted(expected)
        assert sorted(r["id"] for r in p["isrs"]) == sorted(expected)
        assert p["leader"] == p["replicas"][0]["id"], "a new partition is led by its first replica"
    leaders = {p["leader"] for p in topic["partitions"]}
    assert leaders == expected, "Kafka's placement spreads the leaders of 3 partitions over 3 brokers"

    confluent = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=20)
    assert set(confluent.brokers) == expected
    assert confluent.controller_id == controller
    for index, p in confluent.topics[TOPIC].partitions.items():
        assert sorted(p.isrs) == sorted(expected) and p.leader == cluster.leader(TOPIC, index)

    kafka_python = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        described = {b["broker_id"] for b in kafka_python.describe_cluster()["brokers"]}
        assert described == expected
        (t,) = kafka_python.describe_topics([TOPIC])
        assert {p["partition_index"]: p["leader_id"] for p in t["partitions"]} == {
            i: cluster.leader(TOPIC, i) for i in range(3)}
    finally:
        kafka_python.close()

    async def aiokafka_view() -> set[int]:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        await admin.start()
        try:
            described = await admin.describe_cluster()
            return {b["node_id"] for b in described["brokers"]}
        finally:
            await admin.close()

    assert asyncio.run(aiokafka_view()) == expected


def test_isr_shrinks_when_a_follower_pauses_and_grows_back(cluster: Cluster) -> None:
    topic = "shrinks-and-grows"
    said_before = {b: broker.stderr_size() for b, broker in cluster.brokers.items()}

    def said(broker: int) -> str:
        return cluster.brokers[broker].stderr_since(said_before[broker])

    cluster.create_topic(topic, 1, 3)
    leader = cluster.leader(topic, 0)
    follower = next(b for b in cluster.brokers if b != leader)
    via = cluster.brokers[leader]
    cluster.pause(follower)
    paused_at = time.monotonic()
    try:
        # replica.lag.time.max.ms is 3 s and the ZooKeeper session 4 s: the follower leaves the
        # ISR while it is still registered.
        wait_until(lambda: follower not in cluster.partitions(topic, via)[0].isr_nodes, 15, interval=0.1,
                   what="the paused follower out of the ISR")
        shrunk_after = time.monotonic() - paused_at
    finally:
        cluster.resume(follower)
    state = cluster.partitions(topic, via)[0]
    assert state.leader_id == leader and len(state.isr_nodes) == 2, state
    wait_until(lambda: sorted(cluster.partitions(topic)[0].isr_nodes) == sorted(cluster.brokers), 30, interval=0.1,
               what="the follower back in the ISR")
    assert shrunk_after > 0
    # The leader proposed the follower's return to the controller, which wrote it (whichever
    # broker it is). The shrink may be the controller's own, when the pause outlasted the session.
    # (A just resumed broker may answer Metadata from before its pause: the log is the witness.)
    def written() -> list[set[int]]:
        controller_log = "".join(said(b) for b in cluster.brokers)
        return [set(json.loads(isr)) for isr in re.findall(
            rf"ISR of {topic}-0 is now (\[[0-9, ]+\]) \(proposed by its leader, broker {leader}\)", controller_log)]
    wait_until(lambda: set(cluster.brokers) in written(), 30, interval=0.2,
               what="the controller writing the ISR the leader proposed")
    assert f"{topic}-0: in-sync replicas" in said(leader)
    assert "recorded by the controller: " in said(leader)

    # An idempotent producer's id comes from a block the controller handed out.
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    producer.produce(topic, b"v")
    assert producer.flush(30) == 0
    assert any("the controller gave this broker producer ids" in said(b) for b in cluster.brokers)


def test_a_broker_that_does_not_host_a_partition_names_its_leader_to_producers_and_consumers(
        cluster: Cluster) -> None:
    """KIP-951: Produce v10+ and Fetch v16+ refused NOT_LEADER_OR_FOLLOWER carry the leader and
    its address, so the client need not ask Metadata first."""
    cluster.create_topic("hinted", 1, 1)
    leader = cluster.leader("hinted", 0)
    other = next(b for b in cluster.brokers.values() if b.broker_id != leader)
    described = inter_broker_request(other.port, ApiKey.METADATA, 12, {
        "topics": [{"name": "hinted"}], "allow_auto_topic_creation": False})
    (topic_id,) = [t.topic_id for t in described.topics]
    produced = inter_broker_request(other.port, ApiKey.PRODUCE, 10, {
        "acks": 1, "timeout_ms": 5000, "transactional_id": None, "topic_data": [
            {"name": "hinted", "partition_data": [{"index": 0, "records": None}]}]})
    (answer,) = produced.responses[0].partition_responses
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (leader, 0)
    assert [(e.node_id, e.port) for e in produced.node_endpoints] == [(leader, cluster.brokers[leader].port)]
    fetched = inter_broker_request(other.port, ApiKey.FETCH, 16, {
        "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
        "session_epoch": -1, "topics": [{"topic_id": topic_id, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    (partition,) = fetched.responses[0].partitions
    assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (leader, 0)
    assert [(e.node_id, e.port) for e in fetched.node_endpoints] == [(leader, cluster.brokers[leader].port)]
