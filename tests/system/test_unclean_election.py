"""An offline partition brought back by an operator (issue 37, item 9).

RF 3, min.insync.replicas=2, records acknowledged with acks=all (so every replica holds them).
Both followers are killed with kill -9, leaving the leader the last in-sync replica; then the
leader is killed and comes back with the disk of those partitions replaced by an empty one; the
followers come back. The partitions rightly stay offline: the empty replica never leads
(KIP-858). Then the operator allows an unclean election: for one topic through its
unclean.leader.election.enable (IncrementalAlterConfigs), for another with an unclean
ElectLeaders, for the last through the brokers' own (dynamic) unclean.leader.election.enable,
all from confluent-kafka's admin client. Each gets a leader that holds the data, not the empty first
replica Apache Kafka would take, and every acknowledged record is read back.
"""

from __future__ import annotations

from confluent_kafka import ElectionType, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kafka.admin import KafkaAdminClient, NewTopic

from tests.integration.broker_process import wait_until
from tests.integration.disk_faults import replace_with_empty_dir
from tests.system.cluster import Cluster
from tests.system.load import read_all

BY_CONFIG, BY_REQUEST, BY_DEFAULT = "unclean-by-config", "unclean-by-request", "unclean-by-default"
TOPICS = (BY_CONFIG, BY_REQUEST, BY_DEFAULT)
RECORDS = 300
LEADER, FOLLOWERS = 1, (2, 3)


def _produce_acknowledged(cluster: Cluster, topic: str) -> list[bytes]:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    acked: list[bytes] = []

    def delivered(err: object, message: object) -> None:
        if err is None:
            acked.append(message.key())  # type: ignore[attr-defined]

    for seq in range(RECORDS):
        producer.produce(topic, key=b"%s-%05d" % (topic.encode(), seq), value=b"v" * 100, partition=0,
                         on_delivery=delivered)
    assert producer.flush(60) == 0
    assert len(acked) == RECORDS, f"only {len(acked)} of {RECORDS} records acknowledged"
    return acked


def _leader(cluster: Cluster, topic: str) -> int:
    return int(cluster.partitions(topic)[0].leader_id)


def test_an_operator_brings_back_an_offline_partition_without_losing_acknowledged_records(
        cluster: Cluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, replica_assignments={0: [LEADER, *FOLLOWERS]},
                                      topic_configs={"min.insync.replicas": "2"}) for topic in TOPICS])
    finally:
        admin.close()
    for topic in TOPICS:
        cluster.wait_for_leaders(topic, 1, isr_size=3)
    acked = {topic: _produce_acknowledged(cluster, topic) for topic in TOPICS}

    # The followers die: the leader is the last in-sync replica.
    for follower in FOLLOWERS:
        cluster.brokers[follower].kill9()
    wait_until(lambda: all(list(cluster.partitions(t)[0].isr_nodes) == [LEADER] for t in TOPICS),
               30, interval=0.2, what="the leader alone in the ISR")
    # The leader dies, and comes back with the disk of these partitions replaced.
    leader = cluster.brokers[LEADER]
    dirs = {leader.partition_dirs()[f"{topic}-0"] for topic in TOPICS}
    leader.kill9()
    for log_dir in dirs:
        replace_with_empty_dir(log_dir)
    leader.start()
    for follower in FOLLOWERS:
        cluster.brokers[follower].start()
    wait_until(lambda: len(cluster.metadata().brokers) == 3, 30, what="every broker back in Metadata")
    wait_until(lambda: all(f"{t}-0" in leader.partition_dirs() for t in TOPICS), 30,
               what="the leader's replicas re-created on the new disk")
    for topic in TOPICS:
        assert _leader(cluster, topic) == -1, f"{topic}-0 must stay offline: no in-sync replica is left"

    confluent = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # The operator allows unclean elections for one topic.
    resource = ConfigResource(ResourceType.TOPIC, BY_CONFIG, incremental_configs=[
        ConfigEntry("unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET)])
    for future in confluent.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    wait_until(lambda: _leader(cluster, BY_CONFIG) >= 0, 60, interval=0.2,
               what=f"a leader for {BY_CONFIG}-0 once unclean.leader.election.enable=true")
    assert _leader(cluster, BY_CONFIG) in FOLLOWERS, "the replica holding the data leads, not the empty one"
    assert _leader(cluster, BY_REQUEST) == -1, "the config of one topic leaves the other offline"

    # And asks for an unclean election of the other's partition.
    elected = confluent.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(BY_REQUEST, 0)]).result(timeout=60)
    assert elected == {TopicPartition(BY_REQUEST, 0): None}, elected
    wait_until(lambda: _leader(cluster, BY_REQUEST) >= 0, 30, interval=0.2, what=f"{BY_REQUEST}-0's leader in Metadata")
    assert _leader(cluster, BY_REQUEST) in FOLLOWERS
    assert _leader(cluster, BY_DEFAULT) == -1

    # And at last allows them, in every broker's dynamic config, for any topic not saying otherwise.
    # (librdkafka and kafka-python refuse the empty broker name of the cluster-wide default.)
    for broker_id in cluster.brokers:  # one broker per call, as librdkafka asks
        broker = ConfigResource(ResourceType.BROKER, str(broker_id), incremental_configs=[
            ConfigEntry("unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET)])
        for future in confluent.incremental_alter_configs([broker]).values():
            future.result(timeout=30)
    wait_until(lambda: _leader(cluster, BY_DEFAULT) >= 0, 60, interval=0.2,
               what=f"a leader for {BY_DEFAULT}-0 once the brokers' config allows unclean elections")
    assert _leader(cluster, BY_DEFAULT) in FOLLOWERS

    for topic in TOPICS:
        keys = [r.key for r in read_all(cluster.bootstrap, topic, 1)]
        assert keys == acked[topic], f"{topic}: {len(keys)} records read back of {RECORDS} acknowledged"
    logs = "".join(b.stderr_text(200_000) for b in cluster.brokers.values())
    for topic in TOPICS:
        assert f"{topic}-0: UNCLEAN leader election" in logs, f"the controller logs the unclean election of {topic}-0"
    # The empty replica catches up from the new leader and is in sync again.
    for topic in TOPICS:
        wait_until(lambda t=topic: len(cluster.partitions(t)[0].isr_nodes) == 3, 60, interval=0.2,
                   what=f"{topic}-0's replicas in sync again")
