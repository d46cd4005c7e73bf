"""minikafka brokers in a ZooKeeper-mode Apache Kafka 3.9 cluster (issue 32): real ZooKeeper,
real Kafka brokers started from their jars, real minikafka broker processes, one znode tree."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from tests.integration.broker_process import HOST, BrokerProcess, KafkaWire, free_port, wait_until
from tests.interop.kafka import JavaProcess, kafka
from tests.system.zookeeper import ZooKeeperProcess

CHROOT = "/mixed"


class KafkaZkBroker:
    """One Apache Kafka 3.9 broker in ZooKeeper mode: its server.properties and log dirs under
    ``root``, its output in ``root/kafka.log``; ``stop`` is a SIGTERM (a controlled shutdown)."""

    def __init__(self, root: Path, broker_id: int, zookeeper: ZooKeeperProcess, **settings: str) -> None:
        self.root = root
        self.broker_id = broker_id
        self.port = free_port()
        self.log_dirs = [root / "logdir1", root / "logdir2"]
        self.properties = root / "server.properties"
        self.log = root / "kafka.log"
        self.settings = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            "zookeeper.connect": zookeeper.connect + CHROOT,
            "zookeeper.session.timeout.ms": "6000",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "replica.lag.time.max.ms": "5000",
            "controlled.shutdown.retry.backoff.ms": "500",
            **settings,
        }
        self.process: JavaProcess | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self, timeout: float = 90.0) -> KafkaZkBroker:
        self.root.mkdir(parents=True, exist_ok=True)
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in self.settings.items()))
        self.process = kafka("3.9").start("kafka.Kafka", str(self.properties), log=self.log, heap="256m")

        def registered() -> bool:
            if self.process is None or not self.process.alive():
                raise AssertionError(f"Kafka broker {self.broker_id} exited:\n{self.log.read_text()[-5000:]}")
            with KafkaWire((HOST, self.port), timeout=2.0) as wire:
                return any(b.node_id == self.broker_id for b in wire.metadata(topics=[], version=1).brokers)
        wait_until(registered, timeout, interval=0.2, what=f"Kafka broker {self.broker_id} serving")
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperProcess]:
    server = ZooKeeperProcess(tmp_path / "zookeeper")
    try:
        yield server.start()
    finally:
        server.close()


@pytest.fixture
def closing() -> Iterator[list[KafkaZkBroker | BrokerProcess]]:
    """Every broker a test starts, stopped at its end whatever happened."""
    started: list[KafkaZkBroker | BrokerProcess] = []
    yield started
    for broker in reversed(started):
        with contextlib.suppress(Exception):
            broker.stop() if isinstance(broker, KafkaZkBroker) else broker.close()


def minikafka_broker(root: Path, broker_id: int, zookeeper: ZooKeeperProcess, **settings: str) -> BrokerProcess:
    return BrokerProcess(root, broker_id=broker_id, ready_timeout=60.0, overrides={
        "zookeeper.connect": zookeeper.connect + CHROOT, "zookeeper.session.timeout.ms": "6000",
        "metrics.port": "-1", **settings})


def create_topic(bootstrap: str, name: str, partitions: int, replication: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, replication)])
    finally:
        admin.close()


def test_under_a_kafka_controller_replica_dirs_are_not_asked_for_again_and_again(
        tmp_path: Path, zookeeper: ZooKeeperProcess, closing: list[KafkaZkBroker | BrokerProcess]) -> None:
    # A Kafka controller in ZooKeeper mode does not serve AssignReplicasToDirs (KIP-858): the
    # minikafka broker says so once, in words, and stops asking rather than retrying for ever.
    controller = KafkaZkBroker(tmp_path / "kafka1", 1, zookeeper)
    closing.append(controller.start())
    broker = minikafka_broker(tmp_path / "mini2", 2, zookeeper, **{"minikafka.controller.eligible": "false"})
    closing.append(broker.start())
    create_topic(controller.bootstrap, "placed", 4, 2)

    def hosted() -> bool:
        return len([p for p in broker.partition_dirs() if re.fullmatch(r"placed-\d+", p)]) == 4
    wait_until(hosted, 60, interval=0.2, what="the minikafka broker hosting its 4 replicas")
    warning = "does not serve AssignReplicasToDirs"
    wait_until(lambda: warning in broker.stderr_text(), 30, interval=0.2, what="the warning")
    create_topic(controller.bootstrap, "placed-later", 2, 2)
    wait_until(lambda: len([p for p in broker.partition_dirs() if p.startswith("placed-later-")]) == 2, 60,
               interval=0.2, what="two more replicas")
    assert broker.stderr_text().count(warning) == 1
    assert "KIP-858's detection of a replaced disk is off" in broker.stderr_text()
