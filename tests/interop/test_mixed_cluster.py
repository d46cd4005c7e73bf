"""minikafka brokers in a ZooKeeper-mode Apache Kafka 3.9 cluster (issue 32): real ZooKeeper,
real Kafka brokers started from their jars, real minikafka broker processes, one znode tree.

A Kafka broker is rolled to minikafka in place: SIGTERM, then `minikafka serve --config` on the
very server.properties Kafka used (no key translated; Kafka keys minikafka does not implement
are warned about and ignored) and the same log dirs; and back.

The tests share one ZooKeeper server, each under a chroot of its own (a cluster of its own: the
tests differ in which kind of broker controls), and start the brokers that need not wait for
each other side by side. The Kafka brokers start from an archive of the classes a Kafka broker
loads (the JVM's AppCDS), made once per machine: it halves their start, 5-7 s of CPU here."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient, NewTopic
from kazoo.client import KazooClient

from tests.integration.broker_process import HOST, BrokerProcess, KafkaWire, free_port, wait_until
from tests.integration.clients import confluent_produce
from tests.interop.kafka import JavaProcess, cache_root, kafka
from tests.interop.tools import KafkaTools, reassignment_json
from tests.system.cluster import inter_broker_request
from tests.system.load import (
    GroupMember,
    ProducerRun,
    TransformLoop,
    assert_delivered_to_group,
    assert_exactly_once,
    assert_transformed_once,
    read_all,
    wait_acked,
)
from tests.system.zookeeper import ZooKeeperProcess

INIT_PRODUCER_ID = 22


@dataclasses.dataclass(frozen=True)
class ZkRoot:
    """The module's ZooKeeper as one test's brokers and clients see it: under that test's own
    chroot, so the tests share the server and never see each other's znodes."""

    server: ZooKeeperProcess
    chroot: str

    @property
    def connect(self) -> str:
        return self.server.connect + self.chroot


class KafkaZkBroker:
    """One Apache Kafka 3.9 broker in ZooKeeper mode: its server.properties and log dirs under
    ``root``, its output in ``root/kafka.log``; ``stop`` is a SIGTERM (a controlled shutdown)."""

    def __init__(self, root: Path, broker_id: int, zookeeper: ZkRoot, **settings: str) -> None:
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
            "zookeeper.connect": zookeeper.connect,
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

    # The JVM's own options for every Kafka broker of the module (the class archive's, see class_archive).
    jvm_args: ClassVar[list[str]] = []

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self, timeout: float = 90.0) -> KafkaZkBroker:
        self.launch()
        self.wait_serving(timeout)
        return self

    def launch(self) -> KafkaZkBroker:
        """Starts the JVM without waiting for it to serve (`wait_serving` does)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in self.settings.items()))
        self.process = kafka("3.9").start("kafka.Kafka", str(self.properties), log=self.log, heap="256m",
                                          jvm_args=self.jvm_args)
        return self

    def wait_serving(self, timeout: float = 90.0) -> None:
        """Until the broker lists itself in its Metadata: registered, and sent the cluster's
        metadata by a controller (so one has been elected)."""
        def registered() -> bool:
            if self.process is None or not self.process.alive():
                raise AssertionError(f"Kafka broker {self.broker_id} exited:\n{self.log.read_text()[-5000:]}")
            with KafkaWire((HOST, self.port), timeout=2.0) as wire:
                return any(b.node_id == self.broker_id for b in wire.metadata(topics=[], version=1).brokers)
        wait_until(registered, timeout, interval=0.1, what=f"Kafka broker {self.broker_id} serving")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def kill(self) -> None:
        if self.process is not None:
            self.process.process.kill()
            self.process.process.wait(10)
            self.process = None


@pytest.fixture(scope="module")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    server = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"))
    try:
        yield server.start()
    finally:
        server.close()


@pytest.fixture(scope="module", autouse=True)
def class_archive(zookeeper_server: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The classes a Kafka broker loads, archived for the JVM to map at start instead of loading
    them one by one (-XX:SharedArchiveFile). Made once per machine, by a broker that starts,
    serves and stops cleanly (the JVM writes the archive at its exit), and kept with Kafka's jars,
    named by the java binary and the classpath it holds (a JVM refuses an archive of another
    classpath, with a warning, and then loads the classes as usual)."""
    java = os.path.realpath(shutil.which("java") or "java")
    key = hashlib.sha256("\0".join([java, *map(str, kafka("3.9").classpath)]).encode()).hexdigest()[:16]
    archive = cache_root() / kafka("3.9").version / f"broker-classes-{key}.jsa"
    if not archive.exists():
        partial = archive.with_suffix(f".{os.getpid()}.partial")
        root = tmp_path_factory.mktemp("class-archive")
        # Alone, it needs no controlled shutdown (which would wait on its own controller).
        trainer = KafkaZkBroker(root, 1, ZkRoot(zookeeper_server, "/class-archive"),
                                **{"controlled.shutdown.enable": "false"})
        trainer.jvm_args = [f"-XX:ArchiveClassesAtExit={partial}"]
        try:
            trainer.start()
        finally:
            trainer.stop()
        if partial.exists():  # several workers may make one at once: the last one stays
            partial.replace(archive)
    KafkaZkBroker.jvm_args = [f"-XX:SharedArchiveFile={archive}"] if archive.exists() else []
    try:
        yield archive
    finally:
        KafkaZkBroker.jvm_args = []


@pytest.fixture
def zookeeper(zookeeper_server: ZooKeeperProcess, request: pytest.FixtureRequest) -> ZkRoot:
    return ZkRoot(zookeeper_server, "/" + re.sub(r"[^\w-]", "-", request.node.name)[:80])


@pytest.fixture
def closing() -> Iterator[list[KafkaZkBroker | BrokerProcess]]:
    """Every broker a test starts, killed at its end whatever happened: the test has checked
    what it checks, and nothing is kept (a controlled shutdown of each would take seconds)."""
    started: list[KafkaZkBroker | BrokerProcess] = []
    yield started
    for broker in reversed(started):
        with contextlib.suppress(Exception):
            broker.kill() if isinstance(broker, KafkaZkBroker) else broker.kill9()
        if isinstance(broker, BrokerProcess):
            broker.close()


def start_together(closing: list[KafkaZkBroker | BrokerProcess], *brokers: KafkaZkBroker | BrokerProcess) -> None:
    """Starts brokers side by side (their JVMs and interpreters start up at once), then waits
    for each to serve."""
    for broker in brokers:
        broker.launch()
        closing.append(broker)
    for broker in brokers:
        if isinstance(broker, KafkaZkBroker):
            broker.wait_serving()
        else:
            broker.wait_ready(broker.ready_timeout)


def minikafka_broker(root: Path, broker_id: int, zookeeper: ZkRoot, **settings: str) -> BrokerProcess:
    broker = BrokerProcess(root, broker_id=broker_id, ready_timeout=60.0, overrides={
        "zookeeper.connect": zookeeper.connect, "zookeeper.session.timeout.ms": "6000",
        "metrics.port": "-1", **settings})
    # Each transaction's offsets and markers as the group coordinator and the markers see them:
    # the roll's exactly-once check, failing, is read against them and the worker's log.
    broker.extra_env["MINIKAFKA_LOG_LEVEL"] = "INFO,minikafka.group.offsets=DEBUG,minikafka.txn.markers=DEBUG"
    return broker


def create_topic(bootstrap: str, name: str, partitions: int, replication: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, replication)])
    finally:
        admin.close()


def test_under_a_kafka_controller_replica_dirs_are_not_asked_for_again_and_again(
        tmp_path: Path, zookeeper: ZkRoot, closing: list[KafkaZkBroker | BrokerProcess]) -> None:
    # A Kafka controller in ZooKeeper mode does not serve AssignReplicasToDirs (KIP-858): the
    # minikafka broker says so once, in words, and stops asking rather than retrying for ever.
    controller = KafkaZkBroker(tmp_path / "kafka1", 1, zookeeper)
    broker = minikafka_broker(tmp_path / "mini2", 2, zookeeper, **{"minikafka.controller.eligible": "false"})
    start_together(closing, controller, broker)  # minikafka's may not control: Kafka's does
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


def _state(zk: KazooClient, topic: str, partition: int) -> dict[str, Any]:
    data, _ = zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
    return dict(json.loads(data))


def _kafka_follower(tmp_path: Path, zookeeper: ZkRoot, **settings: str) -> KafkaZkBroker:
    # A session that outlives the pause of _pause_until_the_isr_shrinks: it only stops fetching,
    # it stays registered.
    return KafkaZkBroker(tmp_path / "kafka3", 3, zookeeper, **{"zookeeper.session.timeout.ms": "30000"}, **settings)


def _pause_until_the_isr_shrinks(zk: KazooClient, bootstrap: str, follower: KafkaZkBroker, what: str) -> None:
    """Create topic isr (replicas 2 and 3, 2 leading), stop the Kafka follower 3 and produce a
    record until the ISR is the leader alone, then let it go on. The record is what makes the
    leader drop it: a follower at the leader's log end stays in sync however long it is silent
    (Kafka's rule), and a first fetch can land before the stop."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic("isr", replica_assignments={0: [2, 3]})])
    finally:
        admin.close()
    wait_until(lambda: any((d / "isr-0").is_dir() for d in follower.log_dirs), 60, interval=0.2,
               what="the follower's replica")
    assert follower.process is not None
    follower.process.process.send_signal(signal.SIGSTOP)  # the follower stops fetching
    try:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": 1})
        producer.produce("isr", b"while the follower is stopped")
        assert producer.flush(30) == 0, "the record for the stopped follower to miss was not acknowledged"
        wait_until(lambda: _state(zk, "isr", 0)["isr"] == [2], 60, interval=0.2, what=what)
    finally:
        follower.process.process.send_signal(signal.SIGCONT)


def _assert_producer_id_from_a_block_of(zk: KazooClient, port: int, broker_id: int) -> None:
    """A producer id asked of the broker on ``port`` comes from the block the controller
    allocated to it last (AllocateProducerIds)."""
    def producer_id() -> Any:  # COORDINATOR_LOAD_IN_PROGRESS while a Kafka broker asks for its block
        found = inter_broker_request(port, INIT_PRODUCER_ID, 4,
                                     {"transactional_id": None, "transaction_timeout_ms": 60_000})
        return found if found.error_code == 0 else None
    answer = wait_until(producer_id, 30, interval=0.2, what=f"a producer id from broker {broker_id}")
    block = json.loads(zk.get("/latest_producer_id_block")[0])
    assert block["broker"] == broker_id, block
    assert int(block["block_start"]) <= answer.producer_id <= int(block["block_end"]), (answer, block)


def _minikafka_tool(bootstrap: str, tool: str, *args: str) -> str:
    """Runs a minikafka tool to its end (exit 0); its output."""
    done = subprocess.run([sys.executable, "-m", "minikafka", tool, "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"minikafka {tool} {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done.stdout


def test_kafka_brokers_change_isrs_get_producer_ids_and_delete_topics_under_a_minikafka_controller(
        tmp_path: Path, zookeeper: ZkRoot, closing: list[KafkaZkBroker | BrokerProcess]) -> None:
    # Kafka 3.9 brokers (inter.broker.protocol.version 3.9) send AlterPartition and
    # AllocateProducerIds to the controller rather than writing ZooKeeper themselves. Every broker
    # has a control-plane listener (KIP-291): the controller's requests go to the Kafka brokers'
    # one, and Kafka's brokers send theirs to the controller's.
    control_ports = {b: free_port() for b in (1, 2, 3)}
    control = {"control.plane.listener.name": "CONTROL",
               "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL:PLAINTEXT"}
    controller = minikafka_broker(tmp_path / "mini1", 1, zookeeper, **{"replica.lag.time.max.ms": "5000"}, **control)
    controller.overrides["listeners"] += f",CONTROL://{HOST}:{control_ports[1]}"
    closing.append(controller.start())
    # 3 s without fetching puts the paused follower out of the ISR (Kafka checks every half of it).
    leader = KafkaZkBroker(tmp_path / "kafka2", 2, zookeeper, **{"replica.lag.time.max.ms": "3000"}, **control)
    follower = _kafka_follower(tmp_path, zookeeper, **control)
    for kafka_broker in (leader, follower):
        kafka_broker.settings["listeners"] += f",CONTROL://{HOST}:{control_ports[kafka_broker.broker_id]}"
    start_together(closing, leader, follower)  # the minikafka broker controls already
    zk = KazooClient(hosts=zookeeper.connect)
    zk.start(timeout=10)
    try:
        _pause_until_the_isr_shrinks(zk, leader.bootstrap, follower,
                                     "the Kafka leader's shrink of the ISR, through the minikafka controller")
        try:
            wait_until(lambda: sorted(_state(zk, "isr", 0)["isr"]) == [2, 3], 60, interval=0.2,
                       what="the Kafka leader's expansion of the ISR")
        except TimeoutError as exc:  # it happened once in a loaded full run: say what each side saw
            raise AssertionError(_isr_story(leader, follower, controller)) from exc
        assert _state(zk, "isr", 0)["leader"] == 2
        assert "proposed by its leader, broker 2" in controller.stderr_text()
        wait_until(lambda: [sorted(p.isr_nodes) for p in _partitions(controller, "isr")] == [[2, 3]],
                   30, interval=0.2, what="the new ISR in the minikafka broker's Metadata")

        # An idempotent producer on the cluster (librdkafka may ask any broker for its id).
        producer = Producer({"bootstrap.servers": leader.bootstrap, "enable.idempotence": True})
        delivered: list[Any] = []
        producer.produce("isr", b"once", on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(60) == 0 and delivered == [None]
        # A producer id asked of the Kafka leader itself comes from a block that the minikafka
        # controller allocated to it (AllocateProducerIds).
        _assert_producer_id_from_a_block_of(zk, leader.port, 2)

        # minikafka's tools, given a Kafka broker that is not the controller, send what Kafka serves
        # at the controller alone (NOT_CONTROLLER elsewhere) to the controller, as Kafka's tools do.
        assert _minikafka_tool(leader.bootstrap, "reassign-partitions", "--list") == \
            "No partition reassignments found.\n"
        _minikafka_tool(leader.bootstrap, "topics", "--create", "--topic", "by-tool", "--partitions", "2",
                        "--replication-factor", "2")
        wait_until(lambda: zk.exists("/brokers/topics/by-tool/partitions/1/state") and
                   len(_state(zk, "by-tool", 1)["isr"]) == 2, 30, interval=0.2, what="the topic the tool created")

        # A Kafka leader's replica moved to the minikafka controller's broker: the Kafka leader
        # proposes the new replica into the ISR (AlterPartition) on the state the reassignment wrote.
        plan = tmp_path / "plan.json"
        plan.write_text(reassignment_json([("by-tool", 0, [1, 3], ["any", "any"])]))
        before = _state(zk, "by-tool", 0)
        _minikafka_tool(leader.bootstrap, "reassign-partitions", "--reassignment-json-file", str(plan), "--execute")
        wait_until(lambda: json.loads(zk.get("/brokers/topics/by-tool")[0])["partitions"]["0"] == [1, 3], 60,
                   interval=0.2, what=f"by-tool-0 moved to [1, 3] (state before {before}, now "
                                      f"{_state(zk, 'by-tool', 0)}):\n{controller.stderr_text()[-3000:]}")

        # A topic deleted while a Kafka broker holding a replica is down stays pending: a
        # ZooKeeper-mode Kafka broker deletes no log unless told to, so the minikafka controller
        # waits for it as Kafka's does, tells it when it returns, and only then removes the znodes.
        admin = KafkaAdminClient(bootstrap_servers=leader.bootstrap)
        try:
            admin.create_topics([NewTopic("doomed", replica_assignments={0: [2, 3]})])
            wait_until(lambda: any((d / "doomed-0").is_dir() for d in follower.log_dirs), 60, interval=0.2,
                       what="the Kafka follower's replica of the doomed topic")
            follower.stop()
            wait_until(lambda: "3" not in zk.get_children("/brokers/ids"), 30, interval=0.2,
                       what="the Kafka follower unregistered")
            admin.delete_topics(["doomed"], timeout_ms=30_000)
        finally:
            admin.close()
        wait_until(lambda: "deletion of topic doomed waits for broker 3, which is down" in controller.stderr_text(),
                   30, interval=0.2, what="the controller's word on the pending deletion")
        assert zk.exists("/brokers/topics/doomed") and zk.exists("/admin/delete_topics/doomed")
        assert any((d / "doomed-0").is_dir() for d in follower.log_dirs)
        follower.start()
        wait_until(lambda: zk.exists("/admin/delete_topics/doomed") is None, 60, interval=0.2,
                   what="the deletion done once the Kafka broker is back")
        assert zk.exists("/brokers/topics/doomed") is None
        assert not any((d / "doomed-0").is_dir() for d in follower.log_dirs), "the Kafka broker kept its log"
        assert "controller event failed" not in controller.stderr_text()
    finally:
        zk.stop()
        zk.close()


def test_a_minikafka_leader_changes_isrs_and_gets_producer_ids_through_a_kafka_controller(
        tmp_path: Path, zookeeper: ZkRoot, closing: list[KafkaZkBroker | BrokerProcess]) -> None:
    # At the default inter.broker.protocol.version (3.9-IV0) a minikafka leader proposes its ISR
    # changes to the Kafka controller (AlterPartition) and asks it for producer ids
    # (AllocateProducerIds), as Kafka's brokers do, instead of writing ZooKeeper itself.
    controller = KafkaZkBroker(tmp_path / "kafka1", 1, zookeeper)
    leader = minikafka_broker(tmp_path / "mini2", 2, zookeeper, **{
        "minikafka.controller.eligible": "false", "replica.lag.time.max.ms": "3000"})
    follower = _kafka_follower(tmp_path, zookeeper)
    controller.launch()
    closing.append(controller)
    leader.launch()
    closing.append(leader)
    controller.wait_serving()  # the controller, before the other Kafka broker could be
    start_together(closing, follower)
    leader.wait_ready(leader.ready_timeout)
    zk = KazooClient(hosts=zookeeper.connect)
    zk.start(timeout=10)
    try:
        _pause_until_the_isr_shrinks(zk, controller.bootstrap, follower,
                                     "the minikafka leader's shrink of the ISR, through the Kafka controller")
        wait_until(lambda: sorted(_state(zk, "isr", 0)["isr"]) == [2, 3], 60, interval=0.2,
                   what="the minikafka leader's expansion of the ISR")
        assert _state(zk, "isr", 0)["leader"] == 2
        # The leader logs a change once the controller's answer is back: a moment after ZooKeeper shows it.
        wait_until(lambda: leader.stderr_text().count("isr-0: in-sync replicas") >= 2, 10, interval=0.1,
                   what="the minikafka leader's word on both ISR changes")
        assert "recorded by the controller: " in leader.stderr_text()

        _assert_producer_id_from_a_block_of(zk, leader.port, 2)
        assert "the controller gave this broker producer ids" in leader.stderr_text()
    finally:
        zk.stop()
        zk.close()


CREATE_TOPICS, CREATE_PARTITIONS = 19, 37


def _racks(address: tuple[str, int]) -> dict[int, str | None]:
    with KafkaWire(address, timeout=5.0) as wire:
        return {b.node_id: b.rack for b in wire.metadata(topics=[], version=8).brokers}


def _create_topic_error(port: int, name: str) -> tuple[int, str | None]:
    answer = inter_broker_request(port, CREATE_TOPICS, 4, {"topics": [{
        "name": name, "num_partitions": 3, "replication_factor": 2, "assignments": [], "configs": []}],
        "timeout_ms": 30_000, "validate_only": False})
    (topic,) = answer.topics
    return topic.error_code, topic.error_message


def _create_partitions_error(port: int, name: str) -> tuple[int, str | None]:
    answer = inter_broker_request(port, CREATE_PARTITIONS, 1, {"topics": [{
        "name": name, "count": 4, "assignments": None}], "timeout_ms": 30_000, "validate_only": False})
    (topic,) = answer.results
    return topic.error_code, topic.error_message


def test_kafka_and_minikafka_brokers_read_each_others_racks_and_refuse_a_partial_rack_layout_alike(
        tmp_path: Path, zookeeper: ZkRoot, closing: list[KafkaZkBroker | BrokerProcess]) -> None:
    kafka_broker = KafkaZkBroker(tmp_path / "kafka1", 1, zookeeper, **{"broker.rack": "a"})
    racked = minikafka_broker(tmp_path / "mini2", 2, zookeeper,
                              **{"broker.rack": "b", "minikafka.controller.eligible": "false"})
    start_together(closing, kafka_broker, racked)
    # Each kind shows the other's rack: the Kafka controller read minikafka's registration.
    both = {1: "a", 2: "b"}
    wait_until(lambda: _racks((HOST, kafka_broker.port)) == both == _racks(racked.address), 30, interval=0.2,
               what="both racks in both brokers' Metadata")
    # minikafka places replicas from the registrations, Kafka's among them: a rack missing there
    # would make it refuse.
    assert _create_topic_error(racked.port, "racked") == (0, None)
    wait_until(lambda: len(_partitions(racked, "racked")) == 3, 30, interval=0.2, what="the topic in Metadata")

    bare = minikafka_broker(tmp_path / "mini3", 3, zookeeper, **{"minikafka.controller.eligible": "false"})
    closing.append(bare.start())
    wait_until(lambda: len(_racks((HOST, kafka_broker.port))) == 3 == len(_racks(racked.address)), 30,
               interval=0.2, what="the broker without a rack in Metadata")
    # Kafka refuses to place replicas when only some brokers have a rack; minikafka answers alike
    # (CreateTopics goes to Kafka's controller, which alone serves it in ZooKeeper mode).
    kafka_code, _ = _create_topic_error(kafka_broker.port, "half-racked")
    mini_code, message = _create_topic_error(racked.port, "half-racked")
    assert kafka_code != 0 and mini_code == kafka_code, (kafka_code, mini_code)
    assert message is not None and "Brokers without broker.rack: [3]" in message, message
    kafka_code, _ = _create_partitions_error(kafka_broker.port, "racked")
    mini_code, _ = _create_partitions_error(racked.port, "racked")
    assert kafka_code != 0 and mini_code == kafka_code, (kafka_code, mini_code)
    assert len(_partitions(racked, "racked")) == 3


def _isr_story(leader: KafkaZkBroker, follower: KafkaZkBroker, controller: BrokerProcess) -> str:
    """The lines of each broker's log about the partition, its ISR and the brokers' liveness."""
    def grep(text: str, pattern: str) -> str:
        return "\n".join(line[:300] for line in text.splitlines() if re.search(pattern, line))[-6000:]
    kafka_lines = r"isr-0|ISR|AlterPartition|UpdateMetadata|[Ss]ession (expired|establishment)| ERROR | WARN "
    return "\n".join([
        "== Kafka leader (broker 2) ==", grep(leader.log.read_text(errors="replace"), kafka_lines),
        "== Kafka follower (broker 3) ==", grep(follower.log.read_text(errors="replace"), kafka_lines),
        "== minikafka controller (broker 1) ==", grep(controller.stderr_text(), r"ISR|broker|WARN|ERROR")])


def _partitions(broker: BrokerProcess, topic: str) -> list[Any]:
    with KafkaWire(broker.address, timeout=5.0) as wire:
        found = wire.metadata([topic], version=8)
    return [p for t in found.topics if t.name == topic for p in t.partitions]


class MinikafkaOnKafkaProperties(BrokerProcess):
    """minikafka started in place of a Kafka broker: on its server.properties (as is, no key
    translated), its log dirs and its address."""

    def __init__(self, kafka_broker: KafkaZkBroker) -> None:
        super().__init__(kafka_broker.root / "as-minikafka", broker_id=kafka_broker.broker_id, ready_timeout=90.0)
        self.port = kafka_broker.port
        self.log_dirs = kafka_broker.log_dirs
        self.properties = kafka_broker.properties

    def command(self) -> list[str]:
        # metrics.port is minikafka's own (its Prometheus endpoint), off here as Kafka has none.
        return [sys.executable, "-m", "minikafka", "serve", "--config", str(self.properties),
                "--override", "metrics.port=-1"]


# Every ISR is full again within this of a step's SIGTERM (the stop, the other kind's start, and
# its replicas caught up under load), and a reassignment is done within it.
ISR_BOUND_S = 90.0
ROLL_SETTINGS = {
    "min.insync.replicas": "2",
    # The group's offsets and the transactions' state survive a broker's stop, as in production.
    "offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2", "transaction.state.log.num.partitions": "3",
    # Leadership goes back to the preferred replicas when kafka-leader-election says so alone.
    "auto.leader.rebalance.enable": "false",
}


def _controller(zk: KazooClient) -> int:
    return int(json.loads(zk.get("/controller")[0])["brokerid"])


def _assignment(zk: KazooClient) -> dict[tuple[str, int], list[int]]:
    found: dict[tuple[str, int], list[int]] = {}
    for topic in zk.get_children("/brokers/topics"):
        for partition, replicas in json.loads(zk.get(f"/brokers/topics/{topic}")[0])["partitions"].items():
            found[(topic, int(partition))] = replicas
    return found


def _not_full(zk: KazooClient) -> list[str]:
    """Every partition whose ISR (in ZooKeeper, as the controller and leaders wrote it) is not all
    of its replicas, or that has no leader."""
    wrong = []
    for (topic, partition), replicas in _assignment(zk).items():
        if not zk.exists(f"/brokers/topics/{topic}/partitions/{partition}/state"):
            wrong.append(f"{topic}-{partition}: no state yet")
            continue
        state = _state(zk, topic, partition)
        if state["leader"] == -1 or sorted(state["isr"]) != sorted(replicas):
            wrong.append(f"{topic}-{partition}: replicas {replicas}, leader {state['leader']}, isr {state['isr']}")
    return wrong


def _not_preferred(zk: KazooClient) -> list[str]:
    return [f"{t}-{p}: leader {_state(zk, t, p)['leader']}, replicas {r}" for (t, p), r in _assignment(zk).items()
            if _state(zk, t, p)["leader"] != r[0]]


def _replica_dir(broker: KafkaZkBroker, name: str) -> list[Path]:
    return [d / name for d in broker.log_dirs if (d / name).is_dir()]


@dataclasses.dataclass
class Roll:
    """Three brokers, each a Kafka broker or minikafka on its properties; the steps from one kind
    to the other, timed; and the cross-kind operations on topic MOVED."""

    MOVED: ClassVar[str] = "moved"
    zk: KazooClient
    tools: KafkaTools
    work: Path
    closing: list[KafkaZkBroker | BrokerProcess]
    kafkas: dict[int, KafkaZkBroker]
    running: dict[int, KafkaZkBroker | MinikafkaOnKafkaProperties]
    moved_records: list[tuple[bytes, bytes]]
    runs: list[ProducerRun]
    steps: list[str] = dataclasses.field(default_factory=list)
    slowest_ack_s: float = 0.0
    plans: int = 0

    @property
    def bootstrap(self) -> str:
        return ",".join(k.bootstrap for k in self.kafkas.values())

    def kind(self, broker_id: int) -> str:
        return "Kafka" if isinstance(self.running[broker_id], KafkaZkBroker) else "minikafka"

    def step(self, broker_id: int) -> None:
        """SIGTERM the broker, start the other kind in its place, wait for every ISR to be full
        again, then give the partitions back to their preferred leaders (kafka-leader-election)."""
        before, started = self.kind(broker_id), time.monotonic()
        current = self.running[broker_id]
        if isinstance(current, KafkaZkBroker):
            current.stop()
            replacement: KafkaZkBroker | MinikafkaOnKafkaProperties = MinikafkaOnKafkaProperties(current)
        else:
            assert current.stop(60) == 0, f"minikafka broker {broker_id} did not stop cleanly"
            replacement = self.kafkas[broker_id]
        stopped = time.monotonic() - started
        self.closing.append(replacement.launch())
        if isinstance(replacement, KafkaZkBroker):
            replacement.wait_serving()
        else:
            replacement.wait_ready(replacement.ready_timeout)
        self.running[broker_id] = replacement
        serving = time.monotonic() - started
        wait_until(lambda: not _not_full(self.zk), max(1.0, ISR_BOUND_S - serving), interval=0.2,
                   what=f"every ISR full within {ISR_BOUND_S:.0f}s of broker {broker_id}'s SIGTERM "
                        f"({before} to {self.kind(broker_id)}): {_not_full(self.zk)}")
        full = time.monotonic() - started
        # The broker came back leading nothing: the election has partitions to move.
        assert _not_preferred(self.zk), "every partition led by its preferred replica before the election"
        out = self.tools.admin("kafka-leader-election", "--election-type", "preferred", "--all-topic-partitions",
                               line="3.9")
        assert "Successfully completed leader election (PREFERRED)" in out, out
        wait_until(lambda: not _not_preferred(self.zk), 30, interval=0.2,
                   what=f"every partition led by its preferred replica: {_not_preferred(self.zk)}")
        slowest = max(run.take_slowest_ack() for run in self.runs)
        self.slowest_ack_s = max(self.slowest_ack_s, slowest)
        self.steps.append(f"broker {broker_id} {before} -> {self.kind(broker_id)} (controller now "
                          f"{self.kind(_controller(self.zk))} broker {_controller(self.zk)}): stopped in "
                          f"{stopped:.1f}s, serving at {serving:.1f}s, every ISR full at {full:.1f}s, "
                          f"preferred leaders at {time.monotonic() - started:.1f}s; slowest acknowledgement "
                          f"{slowest:.2f}s")
        print(self.steps[-1])

    def reassign(self, tool: str, replicas: list[int], log_dirs: list[str] | None = None) -> None:
        """Moves MOVED-0 to ``replicas`` (and ``log_dirs``) with kafka-reassign-partitions or
        minikafka reassign-partitions, and checks where its replicas are and what it holds."""
        started = time.monotonic()
        self.plans += 1
        plan = self.work / f"plan-{self.plans}.json"
        plan.write_text(reassignment_json([(self.MOVED, 0, replicas, log_dirs or ["any"] * len(replicas))]))
        if tool == "kafka-reassign-partitions":
            self.tools.admin(tool, "--execute", "--reassignment-json-file", str(plan), line="3.9")

            def verified() -> bool:
                out = self.tools.admin(tool, "--verify", "--reassignment-json-file", str(plan), line="3.9")
                return f"Reassignment of partition {self.MOVED}-0 is completed" in out and (
                    log_dirs is None or "still in progress" not in out)
        else:
            _minikafka_tool(self.bootstrap, "reassign-partitions", "--reassignment-json-file", str(plan), "--execute")
            command = [sys.executable, "-m", "minikafka", "reassign-partitions", "--bootstrap-server", self.bootstrap,
                       "--reassignment-json-file", str(plan), "--verify"]

            def verified() -> bool:  # exit 3: still in progress
                return subprocess.run(command, capture_output=True, timeout=60).returncode == 0
        wait_until(verified, ISR_BOUND_S, interval=0.5, what=f"{tool} done: {replicas} {log_dirs or ''}")
        assert _assignment(self.zk)[(self.MOVED, 0)] == replicas
        wait_until(lambda: not _not_full(self.zk), 30, interval=0.2, what=f"a full ISR: {_not_full(self.zk)}")

        def placed() -> bool:
            for broker_id, broker in self.kafkas.items():
                found = _replica_dir(broker, f"{self.MOVED}-0")
                if broker_id not in replicas:
                    if found:
                        return False
                elif len(found) != 1 or any(p.name.endswith("-future") for d in broker.log_dirs for p in d.iterdir()):
                    return False
                elif log_dirs and log_dirs[replicas.index(broker_id)] != "any" and \
                        found[0].parent != Path(log_dirs[replicas.index(broker_id)]):
                    return False
            return True
        wait_until(placed, 30, interval=0.2, what=f"the replicas of {self.MOVED}-0 on disk where asked")
        read = read_all(self.bootstrap, self.MOVED, 1)
        assert [(r.key, r.value) for r in read] == self.moved_records, f"{self.MOVED}-0 lost or changed records"
        where = ", ".join(f"{self.kind(b)} {b}" for b in replicas)
        slowest = max(run.take_slowest_ack() for run in self.runs)
        self.slowest_ack_s = max(self.slowest_ack_s, slowest)
        self.steps.append(f"{tool} under a {self.kind(_controller(self.zk))} controller: {self.MOVED}-0 to "
                          f"{where}{' (log dirs ' + str(log_dirs) + ')' if log_dirs else ''} in "
                          f"{time.monotonic() - started:.1f}s; slowest acknowledgement {slowest:.2f}s")
        print(self.steps[-1])

    def cross_kind_moves(self, dir_move: bool = False) -> None:
        """MOVED-0 from a Kafka broker to a minikafka broker and back, each way with the other
        tool than under the other controller; with ``dir_move``, in between, a KIP-113 move of the
        minikafka broker's replica to its other log dir (kafka-reassign-partitions' log_dirs)."""
        replicas = _assignment(self.zk)[(self.MOVED, 0)]
        source = next(b for b in replicas if self.kind(b) == "Kafka")
        target = next(b for b in self.running if b not in replicas and self.kind(b) == "minikafka")
        there = [target if b == source else b for b in replicas]
        tools = ["kafka-reassign-partitions", "minikafka reassign-partitions"]
        if self.kind(_controller(self.zk)) == "minikafka":
            tools.reverse()
        self.reassign(tools[0], there)
        if dir_move:
            (here,) = _replica_dir(self.kafkas[target], f"{self.MOVED}-0")
            other = next(d for d in self.kafkas[target].log_dirs if d != here.parent)
            self.reassign("kafka-reassign-partitions", there,
                          [str(other) if b == target else "any" for b in there])
        self.reassign(tools[1], replicas)


@pytest.mark.timeout(600)  # about 4 min on a loaded 2-core machine: 6 steps and 6 reassignments
def test_a_kafka_cluster_rolled_to_minikafka_and_back_under_load_keeps_every_acknowledged_record(
        tmp_path: Path, zookeeper: ZkRoot, closing: list[KafkaZkBroker | BrokerProcess]) -> None:
    # Three Kafka 3.9 brokers, broker 1 the controller. Each is rolled to minikafka, the
    # controller last (a minikafka broker then controls), and back, the controller last again (a
    # Kafka broker controls again), under idempotent producers, a consumer group and a
    # transactional consume-transform-produce loop. Where the cluster is mixed under each kind of
    # controller, topic MOVED goes from a Kafka broker to a minikafka broker and back with both
    # kinds' reassignment tools, and between the log dirs of a minikafka broker (KIP-113).
    kafkas = {i: KafkaZkBroker(tmp_path / f"kafka{i}", i, zookeeper, **ROLL_SETTINGS) for i in (1, 2, 3)}
    closing.append(kafkas[1].start())
    start_together(closing, kafkas[2], kafkas[3])
    zk = KazooClient(hosts=zookeeper.connect)
    zk.start(timeout=10)
    tools = KafkaTools(",".join(k.bootstrap for k in kafkas.values()), tmp_path)
    loop = TransformLoop(",".join(k.bootstrap for k in kafkas.values()), "roll", 3, "roll-out", "roll-eos", tmp_path)
    try:
        assert _controller(zk) == 1
        admin = KafkaAdminClient(bootstrap_servers=kafkas[1].bootstrap)
        try:
            admin.create_topics([NewTopic("roll", 3, 3), NewTopic("roll-out", 3, 3),
                                 NewTopic(Roll.MOVED, replica_assignments={0: [1, 3]})])
        finally:
            admin.close()
        bootstrap = ",".join(k.bootstrap for k in kafkas.values())
        moved = [(b"moved-%d" % i, bytes(200)) for i in range(500)]
        confluent_produce(bootstrap, Roll.MOVED, moved, partition=0)
        runs = [ProducerRun("confluent", bootstrap, "roll", 3, pace_s=0.004).start(),
                ProducerRun("kafka-python", bootstrap, "roll", 3, pace_s=0.008).start()]
        # About one run in a hundred, a member's consume() stopped returning and its heartbeats
        # stopped (librdkafka 2.16, under a Kafka coordinator): its group log says what it was doing.
        members = [GroupMember(bootstrap, "roll-watchers", "roll", f"watcher-{i}", debug="cgrp").start()
                   for i in range(2)]
        loop.start()
        roll = Roll(zk, tools, tmp_path, closing, kafkas, dict(kafkas), moved, runs)
        # The tools' JVM starts before the roll (its start is no step's).
        out = tools.admin("kafka-reassign-partitions", "--list", line="3.9")
        assert "No partition reassignments found." in out, out
        wait_acked(runs, {})
        wait_until(lambda: not _not_full(zk), 60, interval=0.2, what=f"every ISR full: {_not_full(zk)}")
        print(f"before the roll: slowest acknowledgement {max(run.take_slowest_ack() for run in runs):.2f}s")

        roll.step(2)
        roll.cross_kind_moves(dir_move=True)  # under the Kafka controller, in a cluster of both kinds
        roll.step(3)
        assert roll.kind(_controller(zk)) == "Kafka"
        roll.step(1)
        assert roll.kind(_controller(zk)) == "minikafka", "the controller did not move to a minikafka broker"

        controller = _controller(zk)
        back = [*sorted(b for b in kafkas if b != controller), controller]
        roll.step(back[0])
        assert roll.kind(_controller(zk)) == "minikafka"
        roll.cross_kind_moves(dir_move=True)  # under the minikafka controller, in a cluster of both kinds
        roll.step(back[1])
        roll.step(back[2])
        assert roll.kind(_controller(zk)) == "Kafka", "the controller did not move back to a Kafka broker"
        acked = {run.client: len(run.acked) for run in runs}
        wait_acked(runs, acked)
        print("the roll, step by step:\n  " + "\n  ".join(roll.steps))

        for run in runs:
            run.stop()
        stored = read_all(roll.bootstrap, "roll", 3)
        assert_exactly_once(runs, stored)
        assert_delivered_to_group(members, stored)
        for run in runs:
            assert not run.failed, f"{run.client}: {len(run.failed)} produce errors, e.g. {list(run.failed.items())[:3]}"
        loop.stop()
        transformed = assert_transformed_once(loop, stored, 3)
        committed, aborted = loop.ended()
        print(f"rolled to minikafka and back: {len(stored)} records stored once in order and given to the group; "
              f"{transformed} transformed exactly once in {len(committed)} committed transactions, {len(aborted)} "
              f"aborted; slowest acknowledgement during the roll {roll.slowest_ack_s:.2f}s (ISR bound "
              f"{ISR_BOUND_S:.0f}s); transform workers started again: {loop.restarts or 'none'}")
    finally:
        loop.kill()
        tools.close()
        zk.stop()
        zk.close()
