"""DescribeLogDirs and AlterReplicaLogDirs as Apache Kafka answers them, at every version, on a
real broker: errors, the dir remembered for a replica not created yet (across a restart),
cancelling a move, the throttle changed at run time, a failed destination dir."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin.cluster import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)

from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import confluent_produce, create_topic
from tests.integration.disk_faults import replace_with_file
from tests.integration.test_a2_move_every_replica import replica_dirs

pytestmark = pytest.mark.integration

KAFKA_STORAGE_ERROR, LOG_DIR_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION = 56, 57, 3
THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
MOVE_ERROR_TAG = "_10000"


def describe(broker: BrokerProcess, version: int, topics=None):
    wanted = None if topics is None else [DescribeLogDirsRequest.DescribableLogDirTopic(topic=t, partitions=ps)
                                          for t, ps in topics.items()]
    with broker.wire() as wire:
        return wire.request(DescribeLogDirsRequest(topics=wanted), version, DescribeLogDirsResponse)


def alter(broker: BrokerProcess, version: int, moves: dict[tuple[str, int], str]) -> dict[tuple[str, int], int]:
    by_dir: dict[str, dict[str, list[int]]] = {}
    for (topic, partition), path in moves.items():
        by_dir.setdefault(path, {}).setdefault(topic, []).append(partition)
    dirs = [AlterReplicaLogDirsRequest.AlterReplicaLogDir(path=path, topics=[
        AlterReplicaLogDirsRequest.AlterReplicaLogDir.AlterReplicaLogDirTopic(name=t, partitions=ps)
        for t, ps in topics.items()]) for path, topics in by_dir.items()]
    with broker.wire() as wire:
        response = wire.request(AlterReplicaLogDirsRequest(dirs=dirs), version, AlterReplicaLogDirsResponse)
    return {(t.topic_name, p.partition_index): p.error_code for t in response.results for p in t.partitions}


def fill(broker: BrokerProcess, topic: str, megabytes: int) -> None:
    confluent_produce(broker.bootstrap, topic, [(b"k%d" % i, b"x" * 1000) for i in range(megabytes * 1000)],
                      partition=0, batch_size=100_000)


@pytest.mark.parametrize("version", range(5))
def test_describe_log_dirs_every_version(module_broker: BrokerProcess, version: int) -> None:
    topic = f"described-{version}"
    create_topic(module_broker.bootstrap, topic, 3)
    response = describe(module_broker, version)
    assert [r.log_dir for r in response.results] == [str(d) for d in module_broker.log_dirs]
    found = {}
    for result in response.results:
        assert result.error_code == 0
        if version >= 4:
            assert result.total_bytes >= result.usable_bytes > 0
        for t in result.topics:
            for p in t.partitions:
                found[(t.name, p.partition_index)] = (result.log_dir, p.partition_size, p.offset_lag, p.is_future_key)
    assert {p for (t, p) in found if t == topic} == {0, 1, 2}
    assert all(not future and lag == 0 for _, _, lag, future in found.values())
    only = describe(module_broker, version, {topic: [1], "absent": [0]})
    listed = [(t.name, p.partition_index) for r in only.results for t in r.topics for p in t.partitions]
    assert listed == [(topic, 1)]


@pytest.mark.parametrize("version", range(3))
def test_alter_replica_log_dirs_errors_and_the_remembered_dir(module_broker: BrokerProcess, version: int) -> None:
    dirs = [str(d) for d in module_broker.log_dirs]
    created = f"known-{version}"
    create_topic(module_broker.bootstrap, created, 1)
    (home,) = replica_dirs(module_broker.bootstrap)[(created, 0)]
    later = f"later-{version}"
    target = next(d for d in dirs if d != home[0])  # not where placement would put the first topic
    errors = alter(module_broker, version, {(created, 0): "/no/such/dir", (later, 0): target, (later, 1): target,
                                            ("relative", 0): "logdir1"})
    assert errors == {(created, 0): LOG_DIR_NOT_FOUND, (later, 0): UNKNOWN_TOPIC_OR_PARTITION,
                      (later, 1): UNKNOWN_TOPIC_OR_PARTITION, ("relative", 0): LOG_DIR_NOT_FOUND}
    # To the dir it is in: nothing to do.
    assert alter(module_broker, version, {(created, 0): home[0]}) == {(created, 0): 0}
    # Placement would spread the two partitions over the dirs; they go where they were asked.
    create_topic(module_broker.bootstrap, later, 2)
    dirs_now = replica_dirs(module_broker.bootstrap)
    assert dirs_now[(later, 0)] == dirs_now[(later, 1)] == [(target, False)]


def test_the_remembered_dir_survives_a_restart(broker: BrokerProcess) -> None:
    dirs = [str(d) for d in broker.log_dirs]
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="api-admin")
    try:
        result = admin.alter_replica_log_dirs({("future-topic", p, 1): dirs[1] for p in (0, 1)})
        assert [e.__name__ for e in result.values()] == ["UnknownTopicOrPartitionError"] * 2
    finally:
        admin.close()
    broker.restart()
    create_topic(broker.bootstrap, "future-topic", 2)
    found = replica_dirs(broker.bootstrap)
    assert found[("future-topic", 0)] == found[("future-topic", 1)] == [(dirs[1], False)]
    broker.restart()  # used once: no longer remembered
    assert "log_dir_requests" not in (broker.log_dirs[0] / "minikafka-metadata.json").read_text().replace(
        '"log_dir_requests": {}', "")


def test_cancel_a_move_and_change_the_throttle_at_run_time(broker_factory) -> None:
    broker = broker_factory(overrides={THROTTLE: "100000", "log.segment.bytes": str(256 << 10)})
    create_topic(broker.bootstrap, "slow", 1)
    fill(broker, "slow", 3)
    ((home, _),) = replica_dirs(broker.bootstrap)[("slow", 0)]
    other = next(str(d) for d in broker.log_dirs if str(d) != home)
    assert alter(broker, 2, {("slow", 0): other}) == {("slow", 0): 0}
    # At 100 kB/s the copy is visible as a future replica, behind the current one.
    wait_until(lambda: sorted(replica_dirs(broker.bootstrap)[("slow", 0)]) == sorted([(home, False), (other, True)]),
               timeout=10, what="a future replica in the other dir")
    sizes = {(r.log_dir, p.is_future_key): (p.partition_size, p.offset_lag)
             for r in describe(broker, 4).results for t in r.topics for p in t.partitions}
    assert sizes[(other, True)][0] < sizes[(home, False)][0]
    assert sizes[(other, True)][1] > 0  # offset lag of the copy
    # Moving it to the dir it is in cancels the move.
    assert alter(broker, 2, {("slow", 0): home}) == {("slow", 0): 0}
    assert replica_dirs(broker.bootstrap)[("slow", 0)] == [(home, False)]
    wait_until(lambda: not any(e.name.startswith("slow-0.") for e in (broker.log_dirs[0].parent / "logdir1").iterdir())
               and not any(e.name.startswith("slow-0.") for e in (broker.log_dirs[0].parent / "logdir2").iterdir()),
               timeout=10, what="the cancelled copy removed")

    # A slow move again, then the throttle lifted through IncrementalAlterConfigs.
    assert alter(broker, 2, {("slow", 0): other}) == {("slow", 0): 0}
    assert 44 in broker.advertised_versions(), "IncrementalAlterConfigs must be served"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="api-admin")
    try:
        started = time.monotonic()
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1", configs={THROTTLE: "1000000000"})],
                            incremental=True)
    finally:
        admin.close()
    wait_until(lambda: replica_dirs(broker.bootstrap)[("slow", 0)] == [(other, False)], timeout=15,
               what="the move done once the throttle was lifted")
    assert time.monotonic() - started < 15  # 3 MB at the old 100 kB/s would take 30 s


def test_a_failing_destination_stops_the_move_and_says_so(broker_factory) -> None:
    broker = broker_factory(overrides={THROTTLE: "100000", "log.segment.bytes": str(256 << 10)})
    create_topic(broker.bootstrap, "doomed", 1)
    fill(broker, "doomed", 2)
    ((home, _),) = replica_dirs(broker.bootstrap)[("doomed", 0)]
    index = next(i for i, d in enumerate(broker.log_dirs) if str(d) != home)
    other = broker.log_dirs[index]
    assert alter(broker, 2, {("doomed", 0): str(other)}) == {("doomed", 0): 0}
    wait_until(lambda: (str(other), True) in replica_dirs(broker.bootstrap)[("doomed", 0)], timeout=10,
               what="the copy under way")
    replace_with_file(other)

    def failed_dir_reported() -> bool:
        results = {r.log_dir: r for r in describe(broker, 4).results}
        return results[str(other)].error_code == KAFKA_STORAGE_ERROR
    wait_until(failed_dir_reported, timeout=15, what="the destination reported offline")
    offline = {r.log_dir: r for r in describe(broker, 4).results}[str(other)]
    assert (offline.topics, offline.total_bytes, offline.usable_bytes) == ([], -1, -1)
    # The source goes on serving, the move is over and says why.
    healthy = {r.log_dir: r for r in describe(broker, 4).results}[home]
    (entry,) = [p for t in healthy.topics if t.name == "doomed" for p in t.partitions]
    assert not entry.is_future_key
    assert f"the move to {other} failed".encode() in entry.unknown_tags[MOVE_ERROR_TAG]
    assert "the move of doomed-0 from" in broker.stderr_text() and "failed" in broker.stderr_text()
    assert alter(broker, 2, {("doomed", 0): str(other)}) == {("doomed", 0): KAFKA_STORAGE_ERROR}
    fill(broker, "doomed", 1)  # still writable where it is
