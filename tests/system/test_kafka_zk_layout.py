"""Znodes that Apache Kafka writes and minikafka shares in a mixed cluster: minikafka reads
them as Kafka writes them and leaves what is not its own. Against a real ZooKeeper."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from minikafka.security.scram import new_credential
from minikafka.security.stores import ZkSecurityStore
from minikafka.zk.kafka_zk import KafkaZk
from tests.system.zookeeper import ZooKeeperProcess


@pytest.fixture
async def zk(zookeeper: ZooKeeperProcess) -> AsyncIterator[KafkaZk]:
    session = KafkaZk(zookeeper.connect, 6000, 10000)
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
