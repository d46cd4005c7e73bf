"""Znodes that Apache Kafka writes and minikafka shares in a mixed cluster: minikafka reads
them as Kafka writes them and leaves what is not its own. Against a real ZooKeeper."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from minikafka.security.scram import new_credential
from minikafka.security.stores import ZkSecurityStore
from minikafka.zk.kafka_zk import (
    FEATURE,
    FEATURE_ENABLED,
    ControllerZnode,
    FeatureZnode,
    KafkaZk,
    LeaderIsr,
    StaleState,
)
from minikafka.zk.multi_read import READS_PER_REQUEST
from tests.system.zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.shared_zookeeper  # each test under a chroot of its own


def recorded_calls(monkeypatch: pytest.MonkeyPatch, zk: KafkaZk, method: str) -> list[tuple[Any, ...]]:
    """The positional arguments of every call of ``zk``'s coroutine ``method`` from now on (it
    still runs as before)."""
    calls: list[tuple[Any, ...]] = []
    original = getattr(zk, method)

    async def recorded(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return await original(*args, **kwargs)
    monkeypatch.setattr(zk, method, recorded)
    return calls


@pytest.fixture
async def zk(zookeeper: ZooKeeperProcess, chroot: str) -> AsyncIterator[KafkaZk]:
    session = KafkaZk(zookeeper.connect + chroot, 6000, 10000)
    await session.start()
    try:
        yield session
    finally:
        await session.close()


async def test_a_scram_write_keeps_the_quotas_of_the_user(zk: KafkaZk) -> None:
    # What kafka-configs --alter --entity-type users --add-config producer_byte_rate=... writes.
    await zk.create("/config/users/alice", json.dumps(
        {"version": 1, "config": {"producer_byte_rate": "1024", "consumer_byte_rate": "2048"}}).encode(),
        makepath=True)
    store = ZkSecurityStore(zk)
    assert await store.credentials() == {}  # quotas alone are no credential
    credential = new_credential("SCRAM-SHA-256", "secret")
    await store.update_credentials("alice", lambda current: current | {"SCRAM-SHA-256": credential})
    configs = await zk.entity_configs("users", "alice")
    assert configs == {"producer_byte_rate": "1024", "consumer_byte_rate": "2048",
                       "SCRAM-SHA-256": credential.encode()}
    assert await store.credentials() == {"alice": {"SCRAM-SHA-256": credential}}

    await store.update_credentials("alice", lambda current: {})
    assert await zk.entity_configs("users", "alice") == {"producer_byte_rate": "1024",
                                                         "consumer_byte_rate": "2048"}


async def test_controller_znode_v2_of_a_migration_is_read_and_left(zk: KafkaZk) -> None:
    # What a KRaft controller writes while it migrates a ZooKeeper cluster.
    written = b'{"version":2,"brokerid":3000,"timestamp":"1700000000000","kraftControllerEpoch":7}'
    await zk.create("/controller", written, ephemeral=True)
    assert await zk.controller() == ControllerZnode(3000, 7)
    assert await zk.controller_id() == 3000
    assert await zk.try_become_controller(3000) is None
    await zk.resign_controller(3000)  # not the ZooKeeper-mode controller 3000: not deleted
    got = await zk.get("/controller")
    assert got is not None and got[0] == written


async def test_controller_znode_v1_is_read(zk: KafkaZk) -> None:
    await zk.create("/controller", b'{"version":1,"brokerid":2,"timestamp":"1700000000000"}', ephemeral=True)
    assert await zk.controller() == ControllerZnode(2, None)
    await zk.resign_controller(2)
    assert await zk.controller() is None


@pytest.mark.parametrize("written, expected", [
    # Kafka 3.9's controller, elected in a fresh cluster.
    (b'{"features":{},"version":2,"status":1}', FeatureZnode(2, FEATURE_ENABLED, {}, 0)),
    # Version 1 (Kafka 2.7 to 3.2) with a finalized feature, as kafka-features leaves it.
    (b'{"features":{"group.version":{"min_version_level":1,"max_version_level":1}},"version":1,"status":1}',
     FeatureZnode(1, FEATURE_ENABLED, {"group.version": 1}, 0)),
])
async def test_feature_znode_as_kafka_wrote_it_is_read_and_left(zk: KafkaZk, written: bytes,
                                                             expected: FeatureZnode) -> None:
    await zk.create(FEATURE, written)
    assert await zk.feature() == expected
    assert await zk.enable_feature_versioning() == expected
    got = await zk.get(FEATURE)
    assert got is not None and got[0] == written and got[1].version == 0


async def test_feature_versioning_is_enabled_as_kafka_controller_does(zk: KafkaZk) -> None:
    assert await zk.feature() is None
    assert await zk.enable_feature_versioning() == FeatureZnode(2, FEATURE_ENABLED, {}, 0)
    got = await zk.get(FEATURE)
    assert got is not None and json.loads(got[0]) == {"version": 2, "status": 1, "features": {}}
    # Disabled by a controller below inter.broker.protocol.version 2.7: enabled, features kept.
    await zk.set(FEATURE, b'{"features":{"f":{"max_version_level":3}},"version":2,"status":0}')
    assert await zk.enable_feature_versioning() == FeatureZnode(2, FEATURE_ENABLED, {"f": 3}, 2)
    feature = await zk.feature()
    assert feature == FeatureZnode(2, FEATURE_ENABLED, {"f": 3}, 2)


async def test_the_first_producer_id_block_follows_the_empty_znode_kafka_creates(zk: KafkaZk) -> None:
    # A Kafka broker creates /latest_producer_id_block, empty, among its persistent paths.
    await zk.create("/latest_producer_id_block")
    assert await zk.allocate_producer_ids(2) == range(0, 1000)
    assert await zk.allocate_producer_ids(3) == range(1000, 2000)


async def test_new_partitions_states_are_written_and_read_with_one_read_for_each_new_topic(
        zk: KafkaZk, monkeypatch: pytest.MonkeyPatch) -> None:
    became = await zk.try_become_controller(1)
    assert became is not None
    epoch, epoch_version = became
    calls = recorded_calls(monkeypatch, zk, "exists")
    # A topic part way created by an earlier controller: /partitions and partition 0's parent.
    await zk.create("/brokers/topics/old/partitions/0", makepath=True)
    states = {(topic, p): LeaderIsr(1, 0, (1,), epoch) for topic in ("new", "old") for p in range(50)}
    assert await zk.create_partition_states(states, epoch_version) == dict.fromkeys(states, 0)
    # Per new topic one read, not one a partition; the part-made topic's partitions are each asked.
    assert len(calls) == 2 + 50, calls
    calls.clear()
    found = await zk.partition_states("new", list(range(50)))
    assert found == [(LeaderIsr(1, 0, (1,), epoch), 0)] * 50
    assert await zk.partition_states("unborn", list(range(50))) == [None] * 50
    reads = [args[0] for args in calls]
    assert reads.count("/brokers/topics/unborn/partitions") == 1 and len(reads) == 2


async def test_many_znodes_are_read_in_a_few_multi_reads_under_the_chroot(
        zk: KafkaZk, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = [f"/many/{i}" for i in range(READS_PER_REQUEST + 20)]
    await zk.create("/many")
    for start in range(0, len(paths), 200):
        await zk._commit(lambda t, chunk=paths[start:start + 200]: [
            t.create(path, f"data {path}".encode()) for path in chunk])
    await zk.create("/many/empty")
    calls = recorded_calls(monkeypatch, zk, "_multi_read_of")
    asked = paths[:READS_PER_REQUEST // 2] + ["/many/absent", "/many/empty"] + paths[READS_PER_REQUEST // 2:]
    found = await zk.get_many(asked)
    assert len(calls) == 2, "a request for each READS_PER_REQUEST reads"
    for path, got in zip(asked, found, strict=True):
        if path == "/many/absent":
            assert got is None
        elif path == "/many/empty":
            assert got is not None and got[0] == b""
        else:
            assert got is not None and got[0] == f"data {path}".encode() and got[1].version == 0, path
    assert await zk.get_many([]) == []


async def test_a_topic_tree_is_deleted_in_a_few_transactions_and_only_by_the_current_controller(
        zk: KafkaZk, monkeypatch: pytest.MonkeyPatch) -> None:
    became = await zk.try_become_controller(1)
    assert became is not None
    epoch, epoch_version = became
    states = {("t", p): LeaderIsr(1, 0, (1,), epoch) for p in range(600)}
    await zk.create("/brokers/topics/t", b"{}", makepath=True)
    await zk.create_partition_states(states, epoch_version)
    with pytest.raises(StaleState):  # a controller whose epoch moved on deletes nothing
        await zk.delete_tree("/brokers/topics/t", epoch_version + 1)
    assert len(await zk.children("/brokers/topics/t/partitions")) == 600
    commits = recorded_calls(monkeypatch, zk, "_commit")
    await zk.delete_tree("/brokers/topics/t", epoch_version)
    assert await zk.exists("/brokers/topics/t") is None
    assert len(commits) == 2, "1,202 znodes in transactions of 1,000, not one a znode"
    await zk.delete_tree("/brokers/topics/gone", epoch_version)  # nothing there: nothing to do
