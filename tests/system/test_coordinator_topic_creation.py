"""The first lookup of a group's or a transaction's coordinator creates its internal topic, and
answers once the new topic is led (Kafka answers COORDINATOR_NOT_AVAILABLE, which some clients
never retry): librdkafka's send_offsets_to_transaction, for a group that no consumer has
joined, on a cluster that has no __consumer_offsets yet, completes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import confluent_kafka
import pytest

from minikafka.metadata.topics import OFFSETS_TOPIC
from protocol.errors import ErrorCode
from tests.integration.broker_process import wait_until
from tests.integration.clients import confluent_consume
from tests.system.cluster import Cluster, inter_broker_request

FIND_COORDINATOR = 10

# Each test needs brokers of its own (a cluster with no internal topic yet), not a ZooKeeper of
# its own: each test's cluster is under a chroot of its own.
pytestmark = pytest.mark.shared_zookeeper


def test_the_first_find_coordinator_answers_with_the_coordinator(cluster: Cluster) -> None:
    answer = inter_broker_request(cluster.brokers[1].port, FIND_COORDINATOR, 2, {"key": "first-group", "key_type": 0})
    assert (ErrorCode(answer.error_code), answer.node_id in cluster.brokers) == (ErrorCode.NONE, True)


def test_first_lookups_at_once_on_every_broker_all_answer_with_the_coordinator(cluster: Cluster) -> None:
    # One creates the topic; the others may come while their broker knows it with no partition
    # led yet, and wait for the leaders too (a full run caught librdkafka's committed() failing
    # on the COORDINATOR_NOT_AVAILABLE they were answered).
    def lookup(broker: int) -> tuple[ErrorCode, bool]:
        answer = inter_broker_request(cluster.brokers[broker].port, FIND_COORDINATOR, 2,
                                      {"key": f"group-{broker}", "key_type": 0})
        return ErrorCode(answer.error_code), answer.node_id in cluster.brokers

    with ThreadPoolExecutor(len(cluster.brokers)) as pool:
        answers = list(pool.map(lookup, sorted(cluster.brokers)))
    assert answers == [(ErrorCode.NONE, True)] * len(cluster.brokers)


def test_offsets_sent_to_a_transaction_for_a_group_no_consumer_joined(cluster: Cluster) -> None:
    assert cluster.metadata([OFFSETS_TOPIC]).topics[0].error_code != ErrorCode.NONE, "no offsets topic yet"
    cluster.create_topic("txn-offsets-out", 1, 3)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "offsets-txn"})
    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "never-joined"})
    try:
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce("txn-offsets-out", value=b"out")
        producer.send_offsets_to_transaction([confluent_kafka.TopicPartition("txn-offsets-out", 0, 1)],
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
    finally:
        consumer.close()
    # commit_transaction returns once the commit is prepared; the marker follows (as in Kafka).
    read: list[bytes] = []

    def committed_readable() -> bool:
        read[:] = [r.value for r in confluent_consume(cluster.bootstrap, "txn-offsets-out", [0],
                                                      isolation_level="read_committed")]
        return bool(read)

    wait_until(committed_readable, 30, interval=0.5, what="the committed record readable")
    assert read == [b"out"]
