"""Two cluster bugs that client libraries' own integration suites found, each reproduced on the
wire and with a real client on three brokers:
- a transactional producer with several Produce requests in flight to a partition whose
  transaction coordinator is on another broker had all but one refused INVALID_TXN_STATE;
- Metadata that auto-creates a topic, sent to every broker at once, answered
  TOPIC_ALREADY_EXISTS from the brokers that lost the race (Kafka: LEADER_NOT_AVAILABLE)."""

from __future__ import annotations

import socket
import struct
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import confluent_kafka
import pytest
from kafka import KafkaProducer

from minikafka.txn.state import state_partition_for
from protocol import encode_request, parse_response
from protocol.errors import ErrorCode
from tests.integration.broker_process import HOST, BrokerProcess, wait_until
from tests.integration.clients import confluent_consume
from tests.system.cluster import Cluster
from tests.unit.storage.helpers import make_batch

# Each test has topics and transactional ids of its own and harms no broker.
pytestmark = pytest.mark.shared_cluster
STATE_PARTITIONS = 6  # transaction.state.log.num.partitions of the system tests' cluster
PRODUCE, METADATA, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 0, 3, 22, 24, 26


class Pipeline:
    """One connection that sends several requests before reading any answer."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.sock = socket.create_connection((HOST, broker.port), timeout=30)
        self.sent: list[tuple[int, int, int]] = []

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> None:
        correlation_id = len(self.sent) + 1
        self.sock.sendall(encode_request(api_key, version, correlation_id, "client-suite-bugs", body))
        self.sent.append((api_key, version, correlation_id))

    def answers(self) -> list[Any]:
        bodies = []
        for api_key, version, correlation_id in self.sent:
            (size,) = struct.unpack(">i", self._recv(4))
            got, body = parse_response(api_key, version, self._recv(size))
            assert got == correlation_id
            bodies.append(body)
        self.sent.clear()
        return bodies

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.send(api_key, version, body)
        return self.answers()[0]

    def _recv(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def _remote_transactional_id(cluster: Cluster, leader: int) -> str:
    """A transactional id whose coordinator is not ``leader``."""
    for i in range(100):
        candidate = f"remote-{i}"
        if cluster.leader("__transaction_state", state_partition_for(candidate, STATE_PARTITIONS)) != leader:
            return candidate
    raise AssertionError("every transaction coordinator is on the partition's leader")


def test_pipelined_transactional_produce_to_a_partition_with_a_remote_coordinator_is_taken(
        cluster: Cluster) -> None:
    topic = "pipelined-txn-wire"
    cluster.create_topic(topic, 1, 3, **{"min.insync.replicas": "2"})
    # The coordinators' partitions, created by the first FindCoordinator of a transaction.
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "warm-up"})
    producer.init_transactions(60)
    leader = cluster.leader(topic, 0)
    transactional_id = _remote_transactional_id(cluster, leader)
    coordinator = Pipeline(cluster.brokers[cluster.leader(
        "__transaction_state", state_partition_for(transactional_id, STATE_PARTITIONS))])
    partition_leader = Pipeline(cluster.brokers[leader])
    try:
        init = coordinator.call(INIT_PRODUCER_ID, 4, {"transactional_id": transactional_id,
                                                      "transaction_timeout_ms": 60_000})
        assert init.error_code == ErrorCode.NONE
        added = coordinator.call(ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": init.producer_id,
            "v3_and_below_producer_epoch": init.producer_epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        for sequence in range(5):  # five in flight, the Java producer's default
            batch = make_batch(1, producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                               base_sequence=sequence, transactional=True, tag=b"%d" % sequence)
            partition_leader.send(PRODUCE, 9, {"transactional_id": transactional_id, "acks": -1, "timeout_ms": 30_000,
                                               "topic_data": [{"name": topic, "partition_data": [
                                                   {"index": 0, "records": batch}]}]})
        answers = [a.responses[0].partition_responses[0] for a in partition_leader.answers()]
        assert [(ErrorCode(a.error_code), a.error_message) for a in answers] == [(ErrorCode.NONE, None)] * 5
        assert [a.base_offset for a in answers] == [0, 1, 2, 3, 4]
        ended = coordinator.call(END_TXN, 3, {"transactional_id": transactional_id, "producer_id": init.producer_id,
                                              "producer_epoch": init.producer_epoch, "committed": True})
        assert ended.error_code == ErrorCode.NONE
    finally:
        coordinator.close()
        partition_leader.close()
    # EndTxn answers once the commit is prepared; the markers follow (as in Kafka), and until the
    # partition's marker is written a read_committed reader sees nothing of the transaction.
    expected = [b"%d-0-" % i + b"x" * 6 for i in range(5)]
    read: list[bytes] = []

    def read_all_committed() -> bool:
        read[:] = [r.value for r in confluent_consume(cluster.bootstrap, topic, [0], isolation_level="read_committed")]
        return len(read) >= len(expected)

    wait_until(read_all_committed, 30, interval=0.5, what="the committed records readable")
    assert read == expected


def test_a_pipelining_confluent_producer_commits_every_transaction(cluster: Cluster) -> None:
    topic = "pipelined-txn"
    cluster.create_topic(topic, 1, 3, **{"min.insync.replicas": "2"})
    expected: list[bytes] = []
    for t in range(6):  # six transactional ids: some coordinators are remote from the leader
        producer = confluent_kafka.Producer({
            "bootstrap.servers": cluster.bootstrap, "transactional.id": f"pipelining-{t}", "linger.ms": 0,
            "batch.num.messages": 1, "max.in.flight": 5})
        producer.init_transactions(60)
        for n in range(5):
            producer.begin_transaction()
            values = [b"%d-%d-%d" % (t, n, i) for i in range(50)]
            for value in values:
                producer.produce(topic, value=value, partition=0)
            producer.commit_transaction(60)  # raises on a refused batch
            expected += values
    read = confluent_consume(cluster.bootstrap, topic, [0], isolation_level="read_committed")
    assert [r.value for r in read] == expected


def test_auto_create_through_every_broker_at_once_answers_leader_not_available(cluster: Cluster) -> None:
    for round_ in range(3):
        name = f"auto-created-{round_}"
        pipes = [Pipeline(broker) for broker in cluster.brokers.values()]
        try:
            for pipe in pipes:  # every broker asked before any answers
                pipe.send(METADATA, 4, {"topics": [{"name": name}], "allow_auto_topic_creation": True})
            errors = {ErrorCode(pipe.answers()[0].topics[0].error_code) for pipe in pipes}
        finally:
            for pipe in pipes:
                pipe.close()
        assert errors <= {ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE}, f"round {round_}: {errors}"
    cluster.wait_for_leaders("auto-created-2", 1)


def test_kafka_python_producers_on_every_broker_auto_create_one_topic(cluster: Cluster) -> None:
    # kafka-python treats TOPIC_ALREADY_EXISTS from Metadata as fatal.
    name = "auto-created-by-clients"

    def send_through(broker: BrokerProcess) -> int:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_block_ms=30_000)
        try:
            return int(producer.send(name, value=broker.bootstrap.encode()).get(timeout=30).offset)
        finally:
            producer.close()

    with ThreadPoolExecutor(len(cluster.brokers)) as pool:  # every broker's Metadata at once
        offsets = sorted(pool.map(send_through, cluster.brokers.values()))
    assert offsets == [0, 1, 2]
