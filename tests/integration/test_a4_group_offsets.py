"""A failed log dir takes only the consumer groups whose __consumer_offsets partition was in it.

Two groups commit offsets: one whose offsets partition lives in the good dir, one whose
partition lives in the dir that then fails. The first keeps its committed offsets and keeps
committing; the second gets an error, never offsets made up from nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.structs import OffsetAndMetadata

from tests.integration import disk_faults
from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import create_topic, kafka_python_produce

pytestmark = pytest.mark.integration

TOPIC = "committed"
OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hash(text: str) -> int:
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group: str, partitions: int) -> int:
    """Kafka's placement of a group: abs(String.hashCode) mod the offsets topic's partitions."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@pytest.fixture
def made_brokers() -> Iterator[list[BrokerProcess]]:
    """Brokers this test starts (closed afterwards; their stderr printed, shown on failure)."""
    brokers: list[BrokerProcess] = []
    yield brokers
    for broker in brokers:
        broker.close()
        print(f"---- broker stderr ({broker.stderr_path})\n{broker.stderr_text()}")


def _commit(broker: BrokerProcess, group: str, offset: int) -> None:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
                             request_timeout_ms=10_000)
    try:
        consumer.commit({KpTopicPartition(TOPIC, 0): OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close()


def _committed(broker: BrokerProcess, group: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="tests-offsets", request_timeout_ms=10_000)
    try:
        found = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in found.items() if tp.topic == TOPIC}


def test_groups_whose_offsets_live_in_the_good_dir_keep_them(tmp_path: Path,
                                                             made_brokers: list[BrokerProcess]) -> None:
    broker = BrokerProcess(tmp_path / "broker", overrides={"log.dir.check.interval.ms": "200"})
    made_brokers.append(broker)
    broker.start()
    create_topic(broker.bootstrap, TOPIC, 1)
    kafka_python_produce(broker.bootstrap, TOPIC, [(b"k", b"v")] * 20, partition=0)
    _commit(broker, "warm-up", 1)  # creates __consumer_offsets
    placed = {int(n.rsplit("-", 1)[1]): d for n, d in broker.partition_dirs().items()
              if n.rsplit("-", 1)[0] == OFFSETS_TOPIC}
    count = len(placed)
    assert count > 1 and set(placed.values()) == set(broker.log_dirs), placed
    candidates = [f"group-{i}" for i in range(200)]
    kept = next(g for g in candidates if placed[offsets_partition(g, count)] == broker.log_dirs[0])
    doomed = next(g for g in candidates if placed[offsets_partition(g, count)] == broker.log_dirs[1])
    _commit(broker, kept, 7)
    _commit(broker, doomed, 9)
    assert _committed(broker, kept) == {0: 7} and _committed(broker, doomed) == {0: 9}

    disk_faults.replace_with_file(broker.log_dirs[1])
    wait_until(lambda: disk_faults.offline_counts(broker)[0] == 1.0, timeout=10, what="the dir offline")

    assert _committed(broker, kept) == {0: 7}
    _commit(broker, kept, 11)
    assert _committed(broker, kept) == {0: 11}
    try:
        answer = _committed(broker, doomed)
    except Exception as exc:  # the coordinator of that group is gone: an error is the right answer
        answer = exc
    assert not isinstance(answer, dict) or answer == {}, f"offsets of a group on the failed dir: {answer}"
    assert broker.is_running()
