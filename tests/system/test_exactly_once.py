"""Exactly once through faults: a consume-transform-produce worker (tests/system/eos_worker.py,
confluent-kafka, offsets committed in its transactions) is killed with kill -9 at random points
and started again, and the broker coordinating its transactions is killed with kill -9 too; the
output holds each input record's result exactly once for read_committed readers (confluent-kafka
and aiokafka). kafka-python's transactional producer commits and aborts in the cluster, and a
zombie kafka-python producer is fenced by a new instance."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaProducer
from kafka.errors import KafkaError

from minikafka.txn.state import state_partition_for
from tests.integration.broker_process import REPO_ROOT, BrokerProcess, wait_until
from tests.integration.clients import aiokafka_consume, confluent_consume, confluent_produce
from tests.system.cluster import Cluster

# The tests share the module's cluster (the broker killed is started again), each with topics and
# transactional ids of its own.
pytestmark = pytest.mark.shared_cluster
SOURCE, SINK, GROUP, TXN_ID = "eos-in", "eos-out", "eos-workers", "eos-worker"
PARTITIONS = 3
RECORDS = 1500
STATE_PARTITIONS = 6  # transaction.state.log.num.partitions of the system tests' cluster
STATE_PARTITION = state_partition_for(TXN_ID, STATE_PARTITIONS)


def _worker(cluster: Cluster, ends: dict[int, int], log: Path) -> subprocess.Popen[bytes]:
    """A worker whose stderr (its own lines and librdkafka's) goes to ``log``, not to a pipe
    nobody reads, which would stop it once full."""
    with log.open("ab") as stderr:
        stderr.write(f"===== worker started {time.strftime('%H:%M:%S')}\n".encode())
        stderr.flush()
        return subprocess.Popen([sys.executable, "-m", "tests.system.eos_worker", cluster.bootstrap, SOURCE, SINK,
                                 GROUP, TXN_ID, json.dumps(ends)], cwd=REPO_ROOT, stderr=stderr)


def _read_committed_values(cluster: Cluster, client: str) -> list[bytes]:
    if client == "aiokafka":
        read = aiokafka_consume(cluster.bootstrap, SINK, range(PARTITIONS), isolation_level="read_committed")
    else:
        read = confluent_consume(cluster.bootstrap, SINK, range(PARTITIONS), isolation_level="read_committed")
    return sorted(r.value or b"" for r in read)


def _committed_total(cluster: Cluster) -> int:
    """How many input records the workers' committed transactions have consumed."""
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "isolation.level": "read_committed"})
    try:
        found = reader.committed([TopicPartition(SOURCE, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        reader.close()
    return sum(max(tp.offset, 0) for tp in found)


def _wait_for_commits(cluster: Cluster, worker: subprocess.Popen[bytes], what: str, timeout: float = 60) -> None:
    """Until the committed total grows, or the worker ends."""
    before = _committed_total(cluster)
    wait_until(lambda: worker.poll() is not None or _committed_total(cluster) > before, timeout, interval=0.1,
               what=what)


def _decommissioned(log: Path, since: int, broker: BrokerProcess) -> bool:
    """Whether librdkafka logged, after byte ``since`` of ``log``, that it dropped its handle of
    ``broker`` (the broker had left the cluster's Metadata)."""
    with log.open("rb") as read:
        read.seek(since)
        written = read.read().decode(errors="replace")
    return re.search(rf":{broker.port}/{broker.broker_id}: Decommissioning this broker .*_DESTROY_BROKER",
                     written) is not None


def _stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.kill()
    worker.wait(10)


def test_consume_transform_produce_killed_at_random_points_outputs_each_record_once(cluster: Cluster,
                                                                                     tmp_path: Path) -> None:
    log = tmp_path / "workers.log"
    try:
        _consume_transform_produce_through_kills(cluster, log)
    except BaseException as exc:
        exc.add_note("workers' stderr, last 100000 characters:\n" + log.read_text(errors="replace")[-100000:])
        raise


def _consume_transform_produce_through_kills(cluster: Cluster, log: Path) -> None:
    for topic in (SOURCE, SINK):
        cluster.create_topic(topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    placed = confluent_produce(cluster.bootstrap, SOURCE, [(b"k%d" % i, b"in-%d" % i) for i in range(RECORDS)])
    ends = {p: 0 for p in range(PARTITIONS)}
    for partition, offset in placed:
        ends[partition] = max(ends[partition], offset + 1)
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    kills = 0
    coordinator = -1
    while kills < 4:  # each worker is killed with kill -9 a moment after it committed something
        started_at = log.stat().st_size if log.exists() else 0
        worker = _worker(cluster, ends, log)
        try:
            _wait_for_commits(cluster, worker, f"a worker committing (seed {seed})")
            if kills == 1 and coordinator < 0:  # once: the coordinator's broker goes, the worker works on
                coordinator = cluster.leader("__transaction_state", STATE_PARTITION)
                cluster.brokers[coordinator].kill9()
                wait_until(lambda dead=coordinator: cluster.leader("__transaction_state", STATE_PARTITION)
                           not in (dead, -1), 30, interval=0.1, what="another broker coordinating the transactions")
                # Restarted, as an operator would, once the coordinator has moved: librdkafka keeps
                # a coordinator it found in a cache, and a TxnOffsetCommit for a group whose
                # coordinator was on the dead broker waits for that broker to come back up (or for
                # the call's timeout) before it asks where the group went.
                cluster.brokers[coordinator].start()
                try:
                    _wait_for_commits(cluster, worker, f"a worker committing after its coordinator died (seed {seed})",
                                      timeout=30)
                except TimeoutError:
                    # librdkafka 2.16 never asks again where the group went if its handle of the
                    # cached coordinator's broker was dropped while that broker was out of
                    # Metadata (confluentinc/librdkafka#5511, and #5456: the call's timeout is not
                    # kept either), so that worker can stall for good, having sent nothing. Only
                    # then is it killed like the others, and the next worker must commit through
                    # the coordinators that took over.
                    if not _decommissioned(log, started_at, cluster.brokers[coordinator]):
                        _wait_for_commits(cluster, worker, f"a worker committing after its coordinator died (seed "
                                          f"{seed}), 30 s more", timeout=30)
                    else:
                        _stop(worker)
                        worker = _worker(cluster, ends, log)
                        _wait_for_commits(cluster, worker, f"a new worker committing after its coordinator died (seed "
                                          f"{seed})")
            time.sleep(rng.uniform(0, 0.5))
            if worker.poll() is None:
                kills += 1
        finally:
            _stop(worker)
    assert _committed_total(cluster) < RECORDS, "the kills came too late to fall in the middle of the work"
    worker = _worker(cluster, ends, log)
    try:
        assert worker.wait(120) == 0, f"the last worker did not finish (seed {seed})"
    finally:
        _stop(worker)
    expected = sorted(b"out-%d" % i for i in range(RECORDS))
    for client in ("confluent", "aiokafka"):
        got = _read_committed_values(cluster, client)
        assert got == expected, (f"{client}: {len(got)} outputs for {RECORDS} inputs, {len(set(got))} distinct, "
                                 f"{len(set(expected) - set(got))} missing (seed {seed})")


def test_kafka_python_transactions_commit_abort_and_fence_a_zombie(cluster: Cluster) -> None:
    topic = "kp-txn"
    cluster.create_topic(topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    zombie = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="kp-cluster")
    successor: KafkaProducer | None = None
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        for i in range(9):
            zombie.send(topic, value=b"committed-%d" % i, partition=i % PARTITIONS)
        zombie.commit_transaction()
        zombie.begin_transaction()
        zombie.send(topic, value=b"aborted", partition=0)
        zombie.flush()
        zombie.abort_transaction()
        zombie.begin_transaction()
        zombie.send(topic, value=b"from-the-zombie", partition=1)
        zombie.flush()
        successor = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="kp-cluster")
        successor.init_transactions()  # fences the zombie, whose open transaction is aborted
        with pytest.raises(KafkaError):
            zombie.commit_transaction()
        successor.begin_transaction()
        successor.send(topic, value=b"from-the-successor", partition=2)
        successor.commit_transaction()
    finally:
        zombie.close(timeout=5)
        if successor is not None:
            successor.close(timeout=10)
    read = confluent_consume(cluster.bootstrap, topic, range(PARTITIONS), isolation_level="read_committed")
    assert sorted(r.value or b"" for r in read) == sorted([b"committed-%d" % i for i in range(9)]
                                                          + [b"from-the-successor"])
