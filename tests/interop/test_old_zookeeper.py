"""minikafka on a ZooKeeper older than 3.6 (3.5.10, the last line without multiRead), as Kafka 3.9
still runs: the controller reads many znodes one by one there, where a newer ZooKeeper answers
them in a few multiRead requests. A real server, from its jars."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.exceptions import UnimplementedError

from minikafka.zk.kafka_zk import ZOOKEEPER_UNAVAILABLE, KafkaZk, LeaderIsr
from tests.integration.broker_process import wait_until
from tests.integration.clients import confluent_consume, confluent_produce
from tests.interop.old_zookeeper import OldZooKeeperProcess
from tests.system.cluster import Cluster


@pytest.fixture
def old_zookeeper(tmp_path: Path) -> Iterator[OldZooKeeperProcess]:
    server = OldZooKeeperProcess(tmp_path / "zookeeper")
    try:
        yield server.start(timeout=60)
    finally:
        server.close()


async def test_many_partition_states_are_read_from_a_zookeeper_without_multi_read(
        old_zookeeper: OldZooKeeperProcess, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "minikafka.zk.kafka_zk")
    zk = KafkaZk(old_zookeeper.connect + "/old", 6000, 10000)
    await zk.start()
    try:
        assert "older than 3.6" in caplog.text
        became = await zk.try_become_controller(1)
        assert became is not None
        states = {("t", p): LeaderIsr(1, p, (1,), became[0]) for p in range(700)}
        await zk.create_partition_states(states, became[1])
        found = await zk.partition_states("t", [*range(700), 700])
        assert found == [(states[("t", p)], 0) for p in range(700)] + [None]
    finally:
        await zk.close()


async def test_a_session_that_moved_to_it_from_a_newer_server_reads_one_by_one_after_one_failure(
        old_zookeeper: OldZooKeeperProcess) -> None:
    zk = KafkaZk(old_zookeeper.connect, 6000, 10000)
    await zk.start()
    try:
        await zk.create("/moved", b"here")
        zk._multi_read_answered = True  # as found at the start, on a 3.6+ server of the ensemble
        with pytest.raises(UnimplementedError):
            await zk.get_many(["/moved"])
        # The caller tries again (a controller resigns and stands again), once reconnected.
        wait_until_connected = time.monotonic() + 10
        while True:
            try:
                assert [got and got[0] for got in await zk.get_many(["/moved", "/absent"])] == [b"here", None]
                break
            except ZOOKEEPER_UNAVAILABLE:
                assert time.monotonic() < wait_until_connected, "no reconnection"
                await asyncio.sleep(0.05)
    finally:
        await zk.close()


def test_a_cluster_on_it_serves_and_fails_over_without_losing_a_record(
        old_zookeeper: OldZooKeeperProcess, tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / "cluster", old_zookeeper, size=3).start()
    try:
        cluster.create_topic("old-zk", 12, 3, **{"min.insync.replicas": "2"})
        sent = confluent_produce(cluster.bootstrap, "old-zk", [(b"k%d" % i, b"v%d" % i) for i in range(600)])
        # The new controller reads every partition's state as it takes over.
        controller = cluster.controller_id()
        cluster.brokers[controller].kill9()
        wait_until(lambda: cluster.controller_id() not in (controller, -1), 30, what="a new controller")
        wait_until(lambda: all(p.leader_id not in (controller, -1) for p in cluster.partitions("old-zk").values()),
                   30, what="every partition led by a live broker")
        sent += confluent_produce(cluster.bootstrap, "old-zk", [(b"k%d" % i, b"v%d" % i) for i in range(600, 900)])
        read = confluent_consume(cluster.bootstrap, "old-zk", range(12))
        assert sorted((r.partition, r.offset) for r in read) == sorted(sent)
        assert sorted(r.value for r in read if r.value is not None) == sorted(b"v%d" % i for i in range(900))
        assert all("older than 3.6" in broker.stderr_text(10**6) for broker in cluster.brokers.values())
    finally:
        cluster.close()
