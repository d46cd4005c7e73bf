"""Several real minikafka brokers coordinated by a real ZooKeeper, for system tests.

`Cluster` owns its brokers (BrokerProcess, one dir each with two log dirs) and knows the
ZooKeeper they share. Every broker has a client listener (PLAINTEXT, the BrokerProcess port)
and a separate inter-broker listener (INTERNAL), as a production cluster would. Blocking
methods, for the test's own thread; `close()` leaves no broker running.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import struct
from pathlib import Path
from typing import Any

from kafka.admin import KafkaAdminClient, NewTopic

from protocol import encode_request, parse_response
from tests.integration.broker_process import HOST, BrokerProcess, KafkaWire, free_port, wait_until
from tests.system.zookeeper import ZooKeeperProcess

# Short timeouts so that failures are noticed within seconds.
CLUSTER_SETTINGS = {
    "zookeeper.session.timeout.ms": "4000",
    "zookeeper.connection.timeout.ms": "10000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
    "group.initial.rebalance.delay.ms": "0",
    "controlled.shutdown.retry.backoff.ms": "500",
    "log.dir.check.interval.ms": "200",
    "metrics.port": "-1",  # one free port less to race for per broker
}


class Cluster:
    def __init__(self, root: Path, zookeeper: ZooKeeperProcess, size: int = 3, chroot: str = "/minikafka",
                 overrides: dict[str, str] | None = None, metrics: bool = False) -> None:
        self.zookeeper = zookeeper
        self.chroot = chroot
        self.brokers: dict[int, BrokerProcess] = {}
        self.internal_ports: dict[int, int] = {}
        self.paused: set[int] = set()
        for broker_id in range(1, size + 1):
            broker = BrokerProcess(root / f"broker{broker_id}", broker_id=broker_id, ready_timeout=60.0,
                                   overrides={"zookeeper.connect": zookeeper.connect + chroot, **CLUSTER_SETTINGS,
                                              **(overrides or {})})
            internal = self.internal_ports[broker_id] = free_port()
            broker.overrides["listeners"] = f"PLAINTEXT://{HOST}:{broker.port},INTERNAL://{HOST}:{internal}"
            if metrics:
                broker.overrides["metrics.port"] = str(broker.metrics_port)
            self.brokers[broker_id] = broker

    def start(self) -> Cluster:
        try:
            for broker in self.brokers.values():
                broker.launch()
            for broker in self.brokers.values():
                broker.wait_ready(broker.ready_timeout)
        except BaseException:
            self.close()
            raise
        wait_until(lambda: len(self.metadata().brokers) == len(self.brokers), 30, what="every broker in Metadata")
        return self

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def running(self) -> list[BrokerProcess]:
        return [b for b in self.brokers.values() if b.is_running()]

    def metadata(self, topics: list[str] | None = None, via: BrokerProcess | None = None) -> Any:
        """Metadata v8 from ``via`` or the first running broker."""
        broker = via or self.running()[0]
        with KafkaWire(broker.address, timeout=5.0) as wire:
            return wire.metadata(topics, version=8)

    def partitions(self, topic: str, via: BrokerProcess | None = None) -> dict[int, Any]:
        found = self.metadata([topic], via)
        (described,) = [t for t in found.topics if t.name == topic]
        return {p.partition_index: p for p in described.partitions}

    def replicas(self, topic: str) -> dict[int, list[int]]:
        """Each partition's replicas, as Metadata lists them."""
        return {p: list(found.replica_nodes) for p, found in self.partitions(topic).items()}

    def leader(self, topic: str, partition: int) -> int:
        return self.partitions(topic)[partition].leader_id

    def controller_id(self) -> int:
        return self.metadata().controller_id

    def create_topic(self, name: str, partitions: int, replication: int, **configs: str) -> None:
        """CreateTopics through kafka-python's admin client; returns once every partition has a
        leader and a full ISR."""
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(name, partitions, replication, topic_configs=configs)])
        finally:
            admin.close()
        self.wait_for_leaders(name, partitions, isr_size=replication)

    def wait_for_leaders(self, topic: str, count: int, isr_size: int | None = None, timeout: float = 30) -> None:
        def ready() -> bool:
            partitions = self.partitions(topic)
            return len(partitions) == count and all(
                p.leader_id >= 0 and (isr_size is None or len(p.isr_nodes) == isr_size) for p in partitions.values())
        wait_until(ready, timeout, interval=0.1, what=f"leaders of all {count} partitions of {topic}")

    def pause(self, broker_id: int) -> None:
        process = self.brokers[broker_id].process
        assert process is not None
        process.send_signal(signal.SIGSTOP)
        self.paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        process = self.brokers[broker_id].process
        assert process is not None
        process.send_signal(signal.SIGCONT)
        self.paused.discard(broker_id)

    def restore(self) -> Cluster:
        """Every broker running, none paused, ZooKeeper answering and every broker in Metadata
        again: what a test sharing the cluster of its module starts from, whatever the test
        before it did (a broker it stopped and did not start, say)."""
        self.zookeeper.resume()
        if not self.zookeeper.answers() and self.zookeeper.process is None:
            self.zookeeper.start()
        for broker_id in list(self.paused):
            self.resume(broker_id)
        stopped = [b for b in self.brokers.values() if not b.is_running()]
        for broker in stopped:
            broker.process = None  # one that stopped on its own leaves its exit status behind
            broker.launch()
        for broker in stopped:
            broker.wait_ready(broker.ready_timeout)
        wait_until(lambda: all(len(self.metadata(via=b).brokers) == len(self.brokers) for b in self.brokers.values()),
                   30, what="every broker in every broker's Metadata")
        return self

    def stderr(self) -> str:
        return "\n".join(f"---- broker {i}\n{b.stderr_text(8000)}" for i, b in self.brokers.items())

    def close(self) -> None:
        for broker_id, broker in self.brokers.items():
            with contextlib.suppress(Exception):
                self.resume(broker_id)
            # All told at once, they stop side by side instead of one after another.
            if broker.process is not None and broker.process.poll() is None:
                broker.process.send_signal(signal.SIGTERM)
        for broker in self.brokers.values():
            broker.close()


def inter_broker_request(port: int, api_key: int, version: int, body: dict[str, Any]) -> Any:
    """One request on its own connection (a controller's request, say), encoded and its answer
    decoded by the protocol package."""
    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(encode_request(api_key, version, 7, "system-test", body))
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        return parse_response(api_key, version, _recv_exactly(sock, size))[1]


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data
