"""Transactions in a three-broker cluster: markers go to partition leaders on other brokers
(WriteTxnMarkers) and a transaction's first batch in a partition is verified with a coordinator
on another broker; a transaction open when its coordinator is killed with kill -9 commits through
the coordinator that takes over, and read_committed consumers read every committed record once
and nothing of what was aborted; a leader's log dir failing under an open transaction loses none
of it and leaves no transaction open."""

from __future__ import annotations

import confluent_kafka
import pytest

from minikafka.txn.state import state_partition_for
from tests.integration.broker_process import wait_until
from tests.integration.clients import confluent_consume, latest_offsets
from tests.integration.disk_faults import replace_with_file
from tests.system.cluster import Cluster

TOPIC = "txn-out"
PARTITIONS = 3
TXN_ID = "pipeline"
STATE_PARTITIONS = 6  # transaction.state.log.num.partitions of the system tests' cluster


def _send(producer: confluent_kafka.Producer, prefix: bytes, count: int, topic: str = TOPIC) -> list[bytes]:
    values = [b"%s-%d" % (prefix, i) for i in range(count)]
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.produce(topic, key=b"k%d" % i, value=value, partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    return values

# The second test breaks a leader's dir, so each test has brokers of its own; not a ZooKeeper of
# its own: each test's cluster is under a chroot of its own.
pytestmark = pytest.mark.shared_zookeeper


def test_a_transaction_commits_through_the_coordinator_that_takes_over_from_a_killed_one(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": TXN_ID,
                                         "linger.ms": 1, "transaction.timeout.ms": 60_000})
    producer.init_transactions(60)
    leaders = {cluster.leader(TOPIC, p) for p in range(PARTITIONS)}
    assert len(leaders) > 1, "the transaction's partitions are led by several brokers"
    committed = _send(producer, b"before", 30)
    producer.commit_transaction(60)

    open_values = _send(producer, b"open", 30)
    coordinator = cluster.leader("__transaction_state", state_partition_for(TXN_ID, STATE_PARTITIONS))
    cluster.brokers[coordinator].kill9()
    producer.commit_transaction(90)  # retried with the new coordinator, which loaded the open transaction
    committed += open_values
    assert cluster.leader("__transaction_state", state_partition_for(TXN_ID, STATE_PARTITIONS)) not in (
        coordinator, -1)

    _send(producer, b"aborted", 30)
    producer.abort_transaction(60)
    committed += _send(producer, b"after", 30)
    producer.commit_transaction(60)

    cluster.brokers[coordinator].start()
    wait_until(lambda: all(len(p.isr_nodes) == 3 for p in cluster.partitions(TOPIC).values()), 60, interval=0.2,
               what=f"broker {coordinator} back in every ISR of {TOPIC}")
    read = confluent_consume(cluster.bootstrap, TOPIC, range(PARTITIONS), isolation_level="read_committed")
    assert sorted(r.value or b"" for r in read) == sorted(committed), "every committed record once, no aborted one"


def test_a_leaders_log_dir_failing_under_an_open_transaction_loses_nothing_and_leaves_none_open(
        cluster: Cluster) -> None:
    topic = "txn-dir-failure"
    cluster.create_topic(topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "dir-failure",
                                         "linger.ms": 1, "transaction.timeout.ms": 60_000})
    producer.init_transactions(60)
    committed = _send(producer, b"before", 30, topic)
    producer.commit_transaction(60)

    open_values = _send(producer, b"open", 30, topic)  # acknowledged by every in-sync replica
    leader = cluster.leader(topic, 0)
    replace_with_file(cluster.brokers[leader].partition_dirs()[f"{topic}-0"])  # the leader's disk fails
    wait_until(lambda: cluster.leader(topic, 0) not in (leader, -1), 30, interval=0.1,
               what=f"{topic}-0 led by another broker")
    producer.commit_transaction(90)  # its marker goes to the new leader
    committed += open_values
    _send(producer, b"aborted", 30, topic)
    producer.abort_transaction(60)

    read = confluent_consume(cluster.bootstrap, topic, range(PARTITIONS), isolation_level="read_committed")
    assert sorted(r.value or b"" for r in read) == sorted(committed), "every committed record once, no aborted one"
    assert latest_offsets(cluster.bootstrap, topic, range(PARTITIONS), isolation_level="read_committed") \
        == latest_offsets(cluster.bootstrap, topic, range(PARTITIONS)), \
        "a transaction left open (a last stable offset short of its high watermark)"
