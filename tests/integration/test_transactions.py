"""Transactions (KIP-98) on a real broker with real clients: what a transaction commits is seen by
read_committed consumers of confluent-kafka, kafka-python and aiokafka, what it aborts never is;
a read_committed consumer stops at a transaction still open; a new instance of a transactional id
fences the old one and aborts its transaction; consume-transform-produce commits the consumer's
offsets with the output; a transaction left open is aborted at its timeout; a partition not in
the transaction refuses its batch (KIP-890); the admin APIs describe and list transactions; a
partition moved to another log dir with a transaction open keeps it, and what it aborted."""

from __future__ import annotations

import uuid
from typing import Any

import confluent_kafka
import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.errors import KafkaError, UnknownTopicOrPartitionError
from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from protocol.errors import ErrorCode
from protocol.record_codec import NewRecord, encode_batch
from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import (
    aiokafka_consume,
    confluent_consume,
    confluent_produce,
    create_topic,
    kafka_python_consume,
    latest_offsets,
)

pytestmark = pytest.mark.integration

CRASH_EXIT_STATUS = 86  # of a broker stopped at a crash point (minikafka/storage/crash_points.py)
# The coordinator looks for transactions past their timeout every 200 ms.
TXN_BROKER = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
              "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory):
    broker = BrokerProcess(tmp_path_factory.mktemp("txn"), overrides=TXN_BROKER)
    try:
        yield broker.start()
    finally:
        broker.close()


def _producer(broker: BrokerProcess, transactional_id: str, **config: Any) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id,
                                         "linger.ms": 1, **config})
    producer.init_transactions(30)
    return producer


def _in_txn(producer: confluent_kafka.Producer, topic: str, values: list[bytes], partitions: int) -> None:
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.produce(topic, key=b"k%d" % i, value=value, partition=i % partitions)
    producer.flush(30)


def _committed(broker: BrokerProcess, topic: str, partitions: int, client: str = "confluent") -> list[bytes]:
    wanted = range(partitions)
    if client == "confluent":
        read = confluent_consume(broker.bootstrap, topic, wanted, isolation_level="read_committed")
    elif client == "kafka-python":
        read = kafka_python_consume(broker.bootstrap, topic, wanted, isolation_level="read_committed")
    else:
        read = aiokafka_consume(broker.bootstrap, topic, wanted, isolation_level="read_committed")
    return sorted(r.value or b"" for r in read)


def _last_stable_offset(broker: BrokerProcess, topic: str) -> int:
    return latest_offsets(broker.bootstrap, topic, [0], isolation_level="read_committed")[0]


def _values(prefix: bytes, count: int) -> list[bytes]:
    return [b"%s-%d" % (prefix, i) for i in range(count)]


def test_committed_records_are_read_aborted_ones_never_by_every_client(txn_broker: BrokerProcess) -> None:
    topic = "txn-commit-abort"
    create_topic(txn_broker.bootstrap, topic, 3)
    producer = _producer(txn_broker, "commit-abort")
    _in_txn(producer, topic, _values(b"first", 30), 3)
    producer.commit_transaction(30)
    _in_txn(producer, topic, _values(b"aborted", 30), 3)
    producer.abort_transaction(30)
    _in_txn(producer, topic, _values(b"second", 9), 3)
    producer.commit_transaction(30)
    expected = sorted(_values(b"first", 30) + _values(b"second", 9))
    for client in ("confluent", "kafka-python", "aiokafka"):
        assert _committed(txn_broker, topic, 3, client) == expected, client
    everything = confluent_consume(txn_broker.bootstrap, topic, range(3), isolation_level="read_uncommitted")
    assert len(everything) == 69, "read_uncommitted also returns the aborted records"


def test_a_kafka_python_transactional_producer_commits_and_aborts(txn_broker: BrokerProcess) -> None:
    topic = "txn-kafka-python"
    create_topic(txn_broker.bootstrap, topic, 1)
    producer = KafkaProducer(bootstrap_servers=txn_broker.bootstrap, transactional_id="kafka-python-txn")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for value in _values(b"kept", 5):
            producer.send(topic, key=b"k", value=value)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, key=b"k", value=b"dropped")
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)
    assert _committed(txn_broker, topic, 1, "aiokafka") == _values(b"kept", 5)


def test_read_committed_stops_at_an_open_transaction(txn_broker: BrokerProcess) -> None:
    topic = "txn-open"
    create_topic(txn_broker.bootstrap, topic, 1)
    confluent_produce(txn_broker.bootstrap, topic, [(b"k", b"before")], partition=0)
    producer = _producer(txn_broker, "stays-open")
    _in_txn(producer, topic, _values(b"open", 3), 1)
    confluent_produce(txn_broker.bootstrap, topic, [(b"k", b"after")], partition=0)  # not transactional

    assert _last_stable_offset(txn_broker, topic) == 1, "read_committed's latest is where the open txn starts"
    assert _committed(txn_broker, topic, 1) == [b"before"], "nothing at or past the open transaction"
    assert len(confluent_consume(txn_broker.bootstrap, topic, [0], isolation_level="read_uncommitted")) == 5, \
        "read_uncommitted reads on"
    producer.commit_transaction(30)
    assert _committed(txn_broker, topic, 1) == sorted([b"before", b"after", *_values(b"open", 3)])


def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction(txn_broker: BrokerProcess) -> None:
    topic = "txn-zombie"
    create_topic(txn_broker.bootstrap, topic, 2)
    zombie = _producer(txn_broker, "fenced-id")
    _in_txn(zombie, topic, _values(b"zombie", 4), 2)
    successor = _producer(txn_broker, "fenced-id")  # waits for the zombie's transaction to be aborted
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        zombie.commit_transaction(30)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError._FENCED, refused.value
    _in_txn(successor, topic, _values(b"successor", 4), 2)
    successor.commit_transaction(30)
    assert _committed(txn_broker, topic, 2) == _values(b"successor", 4)


def test_consume_transform_produce_commits_the_offsets_with_the_output(txn_broker: BrokerProcess) -> None:
    source, sink, group = "txn-source", "txn-sink", "transformers"
    create_topic(txn_broker.bootstrap, source, 1)
    create_topic(txn_broker.bootstrap, sink, 1)
    confluent_produce(txn_broker.bootstrap, source, [(None, b"in-%d" % i) for i in range(10)], partition=0)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": txn_broker.bootstrap, "group.id": group,
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                         "isolation.level": "read_committed"})
    producer = _producer(txn_broker, "transformer")
    try:
        consumer.subscribe([source])
        for commit, count in ((True, 6), (False, 4)):
            producer.begin_transaction()
            taken = 0
            while taken < count:
                message = consumer.poll(1)
                if message is None or message.error() is not None:
                    continue
                producer.produce(sink, value=(message.value() or b"").replace(b"in", b"out"), partition=0)
                taken += 1
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
        (committed,) = consumer.committed([confluent_kafka.TopicPartition(source, 0)], timeout=10)
    finally:
        consumer.close()
    assert committed.offset == 6, "the aborted transaction's offsets were not committed"
    assert _committed(txn_broker, sink, 1) == sorted(b"out-%d" % i for i in range(6))


def test_a_transaction_left_open_is_aborted_at_its_timeout(txn_broker: BrokerProcess) -> None:
    topic = "txn-timeout"
    create_topic(txn_broker.bootstrap, topic, 1)
    producer = _producer(txn_broker, "forgetful", **{"transaction.timeout.ms": 1500})
    _in_txn(producer, topic, _values(b"forgotten", 3), 1)
    admin = KafkaAdminClient(bootstrap_servers=txn_broker.bootstrap)
    try:
        assert admin.describe_transactions(["forgetful"])["forgetful"].state.value == "Ongoing"
        wait_until(lambda: admin.describe_transactions(["forgetful"])["forgetful"].state.value == "CompleteAbort",
                   30, interval=0.2, what="the coordinator aborting the transaction at its timeout")
    finally:
        admin.close()
    confluent_produce(txn_broker.bootstrap, topic, [(b"k", b"later")], partition=0)
    assert _committed(txn_broker, topic, 1) == [b"later"], "the aborted records stay hidden, the rest reads on"
    with pytest.raises(confluent_kafka.KafkaException):
        producer.commit_transaction(10)


def _produce_outside_the_transaction(broker: BrokerProcess, transactional_id: str, topic: str, partition: int,
                                     value: bytes) -> int:
    """A transactional batch for a partition the transaction never added; the error it is answered."""
    described = _describe(broker, transactional_id)
    records = encode_batch([NewRecord(b"k", value)], 0, producer_id=described.producer_id,
                           producer_epoch=described.producer_epoch, base_sequence=0, transactional=True)
    request = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=records)])])
    with broker.wire() as wire:
        response = wire.request(request, 8, ProduceResponse)
    (answer,) = response.responses[0].partition_responses
    return int(answer.error_code)


def test_a_batch_for_a_partition_not_in_the_transaction_is_refused(txn_broker: BrokerProcess) -> None:
    # KIP-890: a leader asks the coordinator before a transaction's first batch in a partition.
    topic = "txn-unverified"
    create_topic(txn_broker.bootstrap, topic, 2)
    producer = _producer(txn_broker, "sneaky")
    _in_txn(producer, topic, [b"added"], 1)  # the transaction has partition 0 only
    assert _produce_outside_the_transaction(txn_broker, "sneaky", topic, 1, b"not-added") == \
        ErrorCode.INVALID_TXN_STATE
    producer.commit_transaction(30)
    assert _committed(txn_broker, topic, 2) == [b"added"]
    assert confluent_consume(txn_broker.bootstrap, topic, [1], isolation_level="read_uncommitted") == [], \
        "nothing was appended to partition 1"


def _alter_cluster_default(broker: BrokerProcess, key: str, value: str | None) -> None:
    """IncrementalAlterConfigs of the cluster-wide broker default (resource name ""): SET, or
    DELETE when ``value`` is None. kafka-python's admin client names brokers by id only."""
    operation = 1 if value is None else 0
    request = IncrementalAlterConfigsRequest(resources=[(4, "", [(key, operation, value)])], validate_only=False)
    with broker.wire() as wire:
        (answer,) = wire.request(request, 1, IncrementalAlterConfigsResponse).responses
    assert (answer.error_code, answer.error_message) == (ErrorCode.NONE, None), answer


def test_verification_is_switched_off_and_on_at_run_time(txn_broker: BrokerProcess) -> None:
    # transaction.partition.verification.enable is a cluster-wide dynamic config in Kafka.
    topic = "txn-verification-switch"
    create_topic(txn_broker.bootstrap, topic, 2)
    producer = _producer(txn_broker, "switch")
    _in_txn(producer, topic, [b"added"], 1)
    _alter_cluster_default(txn_broker, "transaction.partition.verification.enable", "false")
    try:
        assert _produce_outside_the_transaction(txn_broker, "switch", topic, 1, b"unverified") == ErrorCode.NONE
    finally:
        _alter_cluster_default(txn_broker, "transaction.partition.verification.enable", None)
    producer.commit_transaction(30)
    producer = _producer(txn_broker, "switch")
    _in_txn(producer, topic, [b"added-again"], 1)
    assert _produce_outside_the_transaction(txn_broker, "switch", topic, 1, b"refused") == \
        ErrorCode.INVALID_TXN_STATE, "verification did not come back with the default"
    producer.abort_transaction(30)


def _describe(broker: BrokerProcess, transactional_id: str) -> Any:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        return admin.describe_transactions([transactional_id])[transactional_id]
    finally:
        admin.close()


def test_the_admin_apis_describe_and_list_transactions(txn_broker: BrokerProcess) -> None:
    topic = "txn-admin"
    create_topic(txn_broker.bootstrap, topic, 2)
    open_id, done_id = f"open-{uuid.uuid4().hex[:6]}", f"done-{uuid.uuid4().hex[:6]}"
    done = _producer(txn_broker, done_id)
    _in_txn(done, topic, [b"x"], 1)
    done.commit_transaction(30)
    still_open = _producer(txn_broker, open_id)
    _in_txn(still_open, topic, [b"a", b"b"], 2)
    admin = KafkaAdminClient(bootstrap_servers=txn_broker.bootstrap)
    try:
        described = admin.describe_transactions([open_id, done_id])
        assert described[open_id].state.value == "Ongoing"
        assert {(tp.topic, tp.partition) for tp in described[open_id].topic_partitions} == {(topic, 0), (topic, 1)}
        assert described[open_id].transaction_start_time_ms > 0
        assert described[done_id].state.value == "CompleteCommit" and not described[done_id].topic_partitions
        listed = [t for txns in admin.list_transactions().values() for t in txns]
        assert {t.transactional_id for t in listed} >= {open_id, done_id}
        ongoing = [t for txns in admin.list_transactions(state_filters=["Ongoing"]).values() for t in txns]
        assert open_id in {t.transactional_id for t in ongoing} and done_id not in {t.transactional_id for t in ongoing}
        with pytest.raises(KafkaError):
            admin.describe_transactions(["never-used"])
    finally:
        admin.close()
    still_open.abort_transaction(30)


def test_describe_producers_shows_each_producer_and_the_open_transaction_start(txn_broker: BrokerProcess) -> None:
    """DescribeProducers (KIP-664) through kafka-python's admin client: the idempotent producer and
    the transactional one, whose open transaction starts at its first record's offset."""
    topic = "txn-producers"
    create_topic(txn_broker.bootstrap, topic, 1)
    confluent_produce(txn_broker.bootstrap, topic, [(b"k", b"plain")] * 3, partition=0)
    still_open = _producer(txn_broker, f"hanging-{uuid.uuid4().hex[:6]}")
    _in_txn(still_open, topic, [b"a", b"b"], 1)
    admin = KafkaAdminClient(bootstrap_servers=txn_broker.bootstrap)
    try:
        states = admin.describe_producers([TopicPartition(topic, 0)])[TopicPartition(topic, 0)].active_producers
        by_txn = {s.current_transaction_start_offset: s for s in states}
        assert set(by_txn) == {-1, 3}, states
        assert by_txn[-1].last_sequence == 2 and by_txn[3].last_sequence == 1
        assert by_txn[3].producer_id != by_txn[-1].producer_id and by_txn[3].last_timestamp > 0
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_producers([TopicPartition("no-such-topic", 0)], broker_id=txn_broker.broker_id)
    finally:
        admin.close()
    still_open.commit_transaction(30)


@pytest.mark.parametrize("point, answered", [("txn.decided", False), ("txn.markers_written", True)])
def test_a_commit_decided_before_a_crash_is_finished_by_the_restarted_coordinator(
        broker_factory, monkeypatch, point: str, answered: bool) -> None:
    # The broker exits (as kill -9) once the commit is recorded in __transaction_state (before
    # the producer is answered), or once its markers are written but the transaction is not
    # recorded complete (the producer was answered when the decision was recorded).
    monkeypatch.setenv("MINIKAFKA_TEST_EXIT_AT", point)
    broker = broker_factory(overrides=TXN_BROKER)
    monkeypatch.delenv("MINIKAFKA_TEST_EXIT_AT")
    topic = "txn-crash"
    create_topic(broker.bootstrap, topic, 2)
    producer = _producer(broker, "crashing", **{"message.timeout.ms": 20_000})
    values = _values(b"decided", 10)
    _in_txn(producer, topic, values, 2)
    if answered:
        producer.commit_transaction(30)
    else:
        with pytest.raises(confluent_kafka.KafkaException):
            producer.commit_transaction(5)  # the broker goes while the client waits
    wait_until(lambda: broker.process is not None and broker.process.poll() == CRASH_EXIT_STATUS, 30,
               interval=0.05, what=f"the broker stopped at {point}")
    broker.start()
    assert _committed(broker, topic, 2) == sorted(values), "the restarted coordinator wrote the commit markers"
    assert _describe(broker, "crashing").state.value == "CompleteCommit"


def test_a_partition_moved_with_a_transaction_open_keeps_it_and_what_it_aborted(broker_factory) -> None:
    # KIP-113 under KIP-98: the move copies the open transaction's records, the producer state
    # that holds it open and the index of the aborted transaction; the moved replica ends it.
    broker = broker_factory(overrides=TXN_BROKER)
    topic = "txn-moved"
    create_topic(broker.bootstrap, topic, 1)
    producer = _producer(broker, "moving")
    _in_txn(producer, topic, _values(b"aborted", 20), 1)
    producer.abort_transaction(30)  # offsets 0-19 and the abort marker at 20
    committed = _values(b"committed", 20)
    _in_txn(producer, topic, committed, 1)  # from offset 21, open while the partition moves
    source = broker.partition_dirs()[f"{topic}-0"]
    target = next(d for d in broker.log_dirs if d != source)
    broker.move_replica(topic, 0, target)
    assert _last_stable_offset(broker, topic) == 21, "the moved replica holds the transaction open"
    assert _committed(broker, topic, 1) == [], "and knows the aborted one"
    producer.commit_transaction(30)
    assert _committed(broker, topic, 1) == sorted(committed)
    broker.restart(clean=False)  # kill -9: the moved replica's own files carry both transactions
    assert broker.partition_dirs()[f"{topic}-0"] == target
    assert _committed(broker, topic, 1) == sorted(committed)
    assert _last_stable_offset(broker, topic) == 42, "nothing left open"
    assert len(confluent_consume(broker.bootstrap, topic, [0], isolation_level="read_uncommitted")) == 40
