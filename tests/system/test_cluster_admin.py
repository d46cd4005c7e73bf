"""Operating a cluster through any broker: a clean stop (SIGTERM) moves leadership first,
preferred leaders come back on request (ElectLeaders, from kafka-python and confluent-kafka),
a deleted topic leaves every broker's metadata and disks, topic configs, cluster-wide broker
defaults and new partitions reach every broker.

The tests share one cluster (each its own topics, and it reads only what the brokers logged
during it)."""

from __future__ import annotations

import ast
import concurrent.futures

import pytest
from confluent_kafka import ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from confluent_kafka.admin import ConfigResource as Resource
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from tests.integration.broker_process import KafkaWire, wait_until
from tests.system.cluster import Cluster

pytestmark = pytest.mark.shared_cluster
PARTITIONS = 3


@pytest.fixture
def logged(cluster: Cluster) -> dict[int, int]:
    """Where each broker's log ended when the test began."""
    return {b: broker.stderr_size() for b, broker in cluster.brokers.items()}


def _admin(cluster: Cluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap)


def test_sigterm_moves_leadership_before_the_broker_stops(cluster: Cluster, logged: dict[int, int]) -> None:
    topic = "stopping"
    cluster.create_topic(topic, PARTITIONS, 3)
    # The controller, stopping itself: it was the one found back in an ISR after its stop.
    victim = cluster.controller_id()
    led = [p for p in range(PARTITIONS) if cluster.leader(topic, p) == victim]
    assert led, "each broker leads one of the partitions"
    assert cluster.brokers[victim].stop() == 0
    survivor = next(b for b in cluster.brokers.values() if b.is_running())
    # No wait for a session to expire: the controller moved the leaderships during the stop.
    after = cluster.partitions(topic, survivor)
    assert all(after[p].leader_id not in (victim, -1) for p in led), after
    wait_until(lambda: all(victim not in p.isr_nodes for p in cluster.partitions(topic, survivor).values()), 10,
               interval=0.1, what="the stopped broker out of every ISR")
    # Said by the controller of that moment (the victim itself, when it was the controller).
    said = f"broker {victim} is shutting down: moved {len(led)} leadership(s)"
    assert any(said in b.stderr_since(logged[i]) for i, b in cluster.brokers.items())
    assert "controlled shutdown done" in cluster.brokers[victim].stderr_since(logged[victim])
    # Taken out of every ISR, the stopping broker must not fetch its way back into one (as a
    # follower of what it led): gone, it would hold up every acks=all produce there until
    # replica.lag.time.max.ms dropped it again.
    for broker in cluster.running():
        rejoined = [line for line in broker.stderr_since(logged[broker.broker_id]).splitlines()
                    if f"{topic}-" in line and "in-sync replicas" in line and "->" in line
                    and victim in ast.literal_eval(line.rsplit("->", 1)[1].strip())]
        assert not rejoined, f"broker {broker.broker_id} took the stopping broker back into an ISR: {rejoined}"


def test_preferred_leaders_come_back_on_request(cluster: Cluster) -> None:
    topic, partitions = "preferred", 2 * PARTITIONS
    cluster.create_topic(topic, partitions, 3)
    preferred = {p: cluster.partitions(topic)[p].replica_nodes[0] for p in range(partitions)}
    victim = preferred[0]
    first, second = [p for p in range(partitions) if preferred[p] == victim]
    assert cluster.brokers[victim].stop() == 0
    cluster.brokers[victim].start()
    cluster.wait_for_leaders(topic, partitions, isr_size=3)
    assert cluster.leader(topic, first) != victim, "leadership stays where it moved until an election"

    admin = _admin(cluster)
    try:
        admin.elect_leaders(0, {topic: [first]})
    finally:
        admin.close()
    # As Kafka's, the broker asked (the controller, for kafka-python) answers once its own
    # metadata shows the new leader: asked next, it already does.
    controller = cluster.controller_id()
    assert cluster.partitions(topic, via=cluster.brokers[controller])[first].leader_id == victim

    # A broker that is not the controller forwards the election, and answers once it has heard
    # of the new leader too.
    (asked,) = [b for b in cluster.running() if b.broker_id not in (controller, victim)]
    election = ElectLeadersRequest(election_type=0, timeout_ms=30_000, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic=topic, partitions=[second])])
    with KafkaWire(asked.address) as wire:
        answer = wire.request(election, 1, ElectLeadersResponse)
        assert [p.error_code for r in answer.replica_election_results for p in r.partition_result] == [0]
        assert wire.metadata([topic], version=8).topics[0].partitions[second].leader_id == victim

    confluent = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = confluent.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, p) for p in range(partitions)])
    results = futures.result(timeout=30)
    for tp, error in results.items():
        # Partitions already led by their preferred replica answer ELECTION_NOT_NEEDED.
        assert error is None or error.name() == "ELECTION_NOT_NEEDED", (tp, error)
    wait_until(lambda: all(cluster.leader(topic, p) == preferred[p] for p in range(partitions)), 15, interval=0.1,
               what="every preferred leader back")


def test_a_deleted_topic_leaves_every_broker(cluster: Cluster) -> None:
    cluster.create_topic("doomed", PARTITIONS, 3)
    dirs = [d for b in cluster.brokers.values() for d in b.partition_dirs() if d.startswith("doomed-")]
    assert len(dirs) == PARTITIONS * 3
    admin = _admin(cluster)
    try:
        admin.delete_topics(["doomed"])
    finally:
        admin.close()

    def gone_everywhere() -> bool:
        return all("doomed" not in {t.name for t in cluster.metadata(via=b).topics} for b in cluster.brokers.values())

    wait_until(gone_everywhere, 30, interval=0.1, what="the topic gone from every broker's metadata")
    wait_until(lambda: not any(d.startswith("doomed-") for b in cluster.brokers.values() for d in b.partition_dirs()),
               30, interval=0.1, what="every replica's directory renamed for deletion")
    with concurrent.futures.ThreadPoolExecutor() as pool:
        assert all(pool.map(lambda b: b.is_running(), cluster.brokers.values()))
    cluster.create_topic("doomed", PARTITIONS, 3)  # the name is free again


def test_a_topic_config_changed_through_one_broker_reaches_every_broker(cluster: Cluster,
                                                                       logged: dict[int, int]) -> None:
    topic = "managed"
    cluster.create_topic(topic, PARTITIONS, 3)
    admin = _admin(cluster)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "123456"})])
    finally:
        admin.close()
    for broker in cluster.brokers.values():
        confluent = AdminClient({"bootstrap.servers": broker.bootstrap})
        (future,) = confluent.describe_configs([Resource("topic", topic)]).values()
        assert future.result(timeout=20)["retention.ms"].value == "123456"
    # Each broker's replicas follow (a config change notification, read by every broker).
    for broker in cluster.brokers.values():
        wait_until(lambda broker=broker: "configs of topic managed are now {'retention.ms': '123456'}"
                   in broker.stderr_since(logged[broker.broker_id]), 15, what=f"broker {broker.broker_id} applying the change")


def test_a_cluster_default_set_through_one_broker_reaches_every_broker(cluster: Cluster) -> None:
    # transaction.partition.verification.enable is cluster-wide and dynamic in Kafka.
    key = "transaction.partition.verification.enable"
    first = next(iter(cluster.brokers.values()))

    def alter(operation: int, value: str | None) -> None:
        request = IncrementalAlterConfigsRequest(resources=[(4, "", [(key, operation, value)])], validate_only=False)
        with first.wire() as wire:
            (answer,) = wire.request(request, 1, IncrementalAlterConfigsResponse).responses
        assert answer.error_code == 0, answer

    def seen_by(broker_id: int) -> tuple[str, int]:
        admin = AdminClient({"bootstrap.servers": cluster.brokers[broker_id].bootstrap})
        (future,) = admin.describe_configs([Resource("broker", str(broker_id))]).values()
        entry = future.result(timeout=20)[key]
        return entry.value, entry.source

    alter(0, "false")  # SET
    for broker_id in cluster.brokers:
        wait_until(lambda broker_id=broker_id: seen_by(broker_id) == ("false", 3), 15,  # DYNAMIC_DEFAULT_BROKER_CONFIG
                   what=f"broker {broker_id} taking the cluster default")
    alter(1, None)  # DELETE
    for broker_id in cluster.brokers:
        wait_until(lambda broker_id=broker_id: seen_by(broker_id) == ("true", 5), 15,  # DEFAULT_CONFIG
                   what=f"broker {broker_id} dropping the cluster default")


def test_partitions_added_through_any_broker_get_replicated_leaders(cluster: Cluster) -> None:
    topic = "growing"
    cluster.create_topic(topic, 1, 3)
    confluent = AdminClient({"bootstrap.servers": cluster.brokers[2].bootstrap})
    futures = confluent.create_partitions([NewPartitions(topic, 4)])
    futures[topic].result(timeout=30)
    cluster.wait_for_leaders(topic, 4, isr_size=3)
    partitions = cluster.partitions(topic)
    assert all(sorted(p.replica_nodes) == [1, 2, 3] for p in partitions.values())
    assert {p.leader_id for p in partitions.values()} == {1, 2, 3}, "new leaders spread over the brokers"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for partition in range(4):
        producer.produce(topic, b"to %d" % partition, partition=partition)
    assert producer.flush(30) == 0


def test_the_topics_of_one_create_topics_request_are_created_together(cluster: Cluster,
                                                                     logged: dict[int, int]) -> None:
    """The controller creates the partitions of every topic of one request in one go (one
    LeaderAndIsr per broker for them all), and the answer comes once they all have leaders; a
    topic that collides with one before it in the same request is refused."""
    admin = _admin(cluster)
    try:
        result = admin.create_topics({"batch.one": {"num_partitions": 4, "replication_factor": 3},
                                      "batch-two": {"num_partitions": 3, "replication_factor": 3},
                                      "batch_one": {"num_partitions": 1, "replication_factor": 3},
                                      "batch-three": {"num_partitions": 2, "replication_factor": 3}},
                                     timeout_ms=30_000, raise_errors=False)
    finally:
        admin.close()
    errors = {t["name"]: t["error_code"] for t in result["topics"]}
    assert errors == {"batch.one": 0, "batch-two": 0, "batch_one": 17, "batch-three": 0}  # 17: INVALID_TOPIC
    controller = cluster.brokers[cluster.controller_id()]
    # kafka-python asks the controller, whose metadata had every leader before it answered.
    for topic, count in (("batch.one", 4), ("batch-two", 3), ("batch-three", 2)):
        partitions = cluster.partitions(topic, via=controller)
        assert len(partitions) == count and all(p.leader_id >= 0 for p in partitions.values())
    created = [line for line in controller.stderr_since(logged[controller.broker_id]).splitlines() if "created 9 partition(s) of" in line]
    assert len(created) == 1 and created[0].endswith("of batch-three, batch-two, batch.one"), created
    for topic, count in (("batch.one", 4), ("batch-two", 3), ("batch-three", 2)):
        cluster.wait_for_leaders(topic, count, isr_size=3)
