"""K3: Kafka Streams and Kafka Connect (4.x) on the three-broker cluster, through the kill -9 of a
broker and their own.

Streams: tests/interop/java/WordCount.java counts words: a repartition topic (regroup by word), a state
store with its compacted changelog, an output topic with every new count. Lines go in while one
broker is killed with kill -9 and started again, and then while the Streams application itself
is killed with kill -9 and started again (same state dir). Read with read_committed, the output
holds, for every word, exactly the counts 1, 2, ..., n in order (the record cache is off, so each
word read gives one update): no update lost, none doubled, and n the word's count in the input.

Connect: a distributed worker (ConnectDistributed, its configs, offsets and status in compacted
topics, exactly.once.source.support=enabled) runs the FileStream source and sink connectors,
created through its REST API. Lines are appended to the source file while a broker is killed
and started again; then, the sink paused with its offsets committed, while the source reads
more lines, the worker is killed with kill -9 and started again, and the sink resumed. The sink
file equals the source file: no line lost or doubled, in order (one partition).
"""

from __future__ import annotations

import json
import struct
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from tests.integration.broker_process import HOST, free_port, wait_until
from tests.integration.clients import confluent_consume
from tests.interop.jvm import Scenario
from tests.interop.kafka import JavaProcess
from tests.system.cluster import Cluster
from tests.system.zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.system
APP = "wordcount"
INPUT, OUTPUT = "streams-lines", "streams-counts"
PARTITIONS = 3
WORDS = [f"w{i:02d}" for i in range(20)]
LINES_PER_STEP = 150


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("k3-cluster")
    zookeeper = ZooKeeperProcess(root / "zookeeper").start()
    made = Cluster(root, zookeeper)
    try:
        yield made.start()
    finally:
        made.close()
        zookeeper.close()


@pytest.fixture(scope="module")
def java4() -> Scenario:
    return Scenario("4")


def _line(number: int) -> str:
    """Line `number` of the input: a few words, chosen so that every word comes many times."""
    return " ".join(WORDS[(number * step + step) % len(WORDS)] for step in (1, 3, 7, 11)[: 1 + number % 4])


def _produce(cluster: Cluster, first: int, count: int) -> None:
    """Lines first..first+count-1 with an idempotent acks=all producer; every one acknowledged."""
    failures: list[str] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 60_000})
    for number in range(first, first + count):
        producer.produce(INPUT, key=str(number).encode(), value=_line(number).encode(),
                         on_delivery=lambda err, msg: failures.append(str(err)) if err else None)
        producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0 and not failures, f"input lines not acknowledged: {remaining} left, {failures[:5]}"


def _read_committed(cluster: Cluster) -> list[tuple[str, int]]:
    """(word, count) of every output record a read_committed consumer sees, in order per partition."""
    read = confluent_consume(cluster.bootstrap, OUTPUT, range(PARTITIONS), timeout=20, isolation_level="read_committed")
    return [((r.key or b"").decode(), struct.unpack(">q", r.value or b"")[0]) for r in read]


class JavaService:
    """A Kafka main class run as a service of the test (the Streams application, the Connect
    worker): started again on demand, killed with kill -9; each start logs to a file of its own."""

    name = "service"

    def __init__(self, java: Scenario, cluster: Cluster, root: Path) -> None:
        self.java, self.cluster, self.root = java, cluster, root
        self.process: JavaProcess | None = None
        self.starts = 0

    def launch(self, main_class: str, *args: str) -> None:
        self.starts += 1
        self.process = self.java.kafka.start(
            main_class, *args, log=self.root / f"{self.name}-{self.starts}.log", heap="384m",
            extra_classpath=[self.java.classes], log_level="warn")

    def wait(self, condition: Callable[[], Any], what: str, timeout: float = 90) -> Any:
        """Polls `condition` until it holds; fails naming the process and its output if the process
        exits or the time runs out."""
        process = self.process
        assert process is not None

        def holds() -> Any:
            if not process.alive():
                raise process.failure(f"{self.name} exited")
            return condition()

        try:
            return wait_until(holds, timeout, interval=0.2, what=what)
        except TimeoutError as timed_out:
            raise process.failure(f"{self.name}: {timed_out}") from None

    def kill9(self) -> None:
        assert self.process is not None
        self.process.process.kill()
        self.process.process.wait(10)

    def close(self) -> None:
        if self.process is not None:
            self.process.stop()

    def logs(self) -> str:
        return "\n".join(f"---- {log.name}\n{log.read_text(errors='replace')[-15_000:]}"
                         for log in sorted(self.root.glob(f"{self.name}-*.log")))


class WordCountApp(JavaService):
    """The WordCount program; its log holds its JSON lines ({"state"}) and Kafka's log lines."""

    name = "wordcount"

    def start(self) -> None:
        config = self.root / "streams.properties"
        config.write_text("replication.factor=3\ncommit.interval.ms=200\nsession.timeout.ms=6000\n"
                          "heartbeat.interval.ms=1000\n")
        self.launch("WordCount", "--bootstrap", self.cluster.bootstrap, "--application-id", APP, "--input", INPUT,
                    "--output", OUTPUT, "--state-dir", str(self.root / "state"), "--config", str(config))
        self.wait(lambda: self.states()[-1:] == ["RUNNING"], "the Streams application RUNNING", 120)

    def states(self) -> list[str]:
        assert self.process is not None
        return [json.loads(line)["state"] for line in self.process.output().splitlines()
                if line.startswith('{"state"')]


def test_streams_word_count_exactly_once_through_a_broker_kill_and_its_own(cluster: Cluster, java4: Scenario,
                                                                           tmp_path: Path) -> None:
    cluster.create_topic(INPUT, PARTITIONS, 3)
    cluster.create_topic(OUTPUT, PARTITIONS, 3)
    app = WordCountApp(java4, cluster, tmp_path)
    expected: Counter[str] = Counter()
    try:
        app.start()
        _produce(cluster, 0, LINES_PER_STEP)
        # A broker dies and comes back while lines go in and the application counts them.
        victim = cluster.brokers[2]
        victim.kill9()
        _produce(cluster, LINES_PER_STEP, LINES_PER_STEP)
        victim.start()
        _produce(cluster, 2 * LINES_PER_STEP, LINES_PER_STEP)
        # The application dies in the middle of its work and starts again from its state dir.
        app.kill9()
        _produce(cluster, 3 * LINES_PER_STEP, LINES_PER_STEP)
        app.start()
        for number in range(4 * LINES_PER_STEP):
            expected.update(_line(number).split(" "))

        def caught_up() -> dict[str, int]:
            final = {word: count for word, count in _read_committed(cluster)}
            return final if final == dict(expected) else {}

        wait_until(caught_up, 120, interval=1.0, what="the final counts in the output")
        updates: dict[str, list[int]] = defaultdict(list)
        for word, count in _read_committed(cluster):
            updates[word].append(count)
        wrong = {word: counts for word, counts in updates.items() if counts != list(range(1, expected[word] + 1))}
        assert not wrong, f"updates not exactly 1..n: {dict(list(wrong.items())[:3])}"
        _check_internal_topics(cluster)
        assert app.process is not None and app.process.alive() and "ERROR" not in app.states()
    except BaseException:
        print(app.logs())
        print(cluster.stderr())
        raise
    finally:
        app.close()


def _check_internal_topics(cluster: Cluster) -> None:
    """The repartition topic and the state store's changelog, made by Streams with Kafka's settings."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    repartition, changelog = f"{APP}-words-repartition", f"{APP}-counts-changelog"
    listed = admin.list_topics(timeout=20).topics
    assert {repartition, changelog} <= set(listed), sorted(listed)
    assert all(len(p.replicas) == 3 for p in listed[changelog].partitions.values())
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in (repartition, changelog)]
    configs = {resource.name: future.result(20) for resource, future in admin.describe_configs(resources).items()}
    assert configs[changelog]["cleanup.policy"].value == "compact"
    assert configs[repartition]["cleanup.policy"].value == "delete"


# ---------------------------------------------------------------- Kafka Connect

CONNECT_TOPIC = "connect-lines"
CONNECT_INTERNAL = {"config": "connect-configs", "offset": "connect-offsets", "status": "connect-status"}


class ConnectWorker(JavaService):
    """One ConnectDistributed worker, its REST API on a free 127.0.0.1 port."""

    name = "connect"

    def __init__(self, java: Scenario, cluster: Cluster, root: Path) -> None:
        super().__init__(java, cluster, root)
        self.port = free_port()
        self.properties = root / "worker.properties"
        self.properties.write_text("\n".join([
            f"bootstrap.servers={cluster.bootstrap}",
            "group.id=k3-connect",
            f"listeners=http://{HOST}:{self.port}",
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
            "value.converter=org.apache.kafka.connect.storage.StringConverter",
            *(f"{kind}.storage.topic={topic}" for kind, topic in CONNECT_INTERNAL.items()),
            *(f"{kind}.storage.replication.factor=3" for kind in CONNECT_INTERNAL),
            "offset.flush.interval.ms=500",
            # Fewer partitions and no classpath scan: a worker that starts in seconds, not a minute.
            "offset.storage.partitions=2",
            "status.storage.partitions=1",
            "plugin.discovery=service_load",
            "exactly.once.source.support=enabled",
            "consumer.isolation.level=read_committed",
            "session.timeout.ms=6000",
            "heartbeat.interval.ms=1000",
            "scheduled.rebalance.max.delay.ms=2000",
        ]) + "\n")

    def start(self) -> None:
        self.launch("org.apache.kafka.connect.cli.ConnectDistributed", str(self.properties))
        self.wait(lambda: isinstance(self.rest("GET", "/connectors"), list), "its REST API", 120)

    def rest(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://{HOST}:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read().decode()
        return json.loads(text) if text else None

    def state(self, connector: str) -> tuple[str, list[str]]:
        status = self.rest("GET", f"/connectors/{connector}/status")
        return status["connector"]["state"], [task["state"] for task in status["tasks"]]


def _append(path: Path, first: int, count: int) -> None:
    with path.open("a") as out:
        out.writelines(f"line {number:06d} of the source file\n" for number in range(first, first + count))


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _sink_group_caught_up(cluster: Cluster) -> bool:
    """The sink's consumer group committed the offset just past the last line in the topic (a
    sink task commits past the records it wrote, which stops short of a transaction's marker)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("connect-file-sink")])
    (result,) = committed.values()
    offsets = {tp.partition: tp.offset for tp in result.result(20).topic_partitions if tp.topic == CONNECT_TOPIC}
    read = confluent_consume(cluster.bootstrap, CONNECT_TOPIC, [0], timeout=20, isolation_level="read_committed")
    return bool(read) and offsets.get(0) == read[-1].offset + 1


def test_connect_file_source_to_sink_through_a_broker_kill_and_its_own(cluster: Cluster, java4: Scenario,
                                                                       tmp_path: Path) -> None:
    cluster.create_topic(CONNECT_TOPIC, 1, 3)
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    _append(source, 0, 500)
    worker = ConnectWorker(java4, cluster, tmp_path)
    try:
        worker.start()
        worker.rest("POST", "/connectors", {"name": "file-source", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
            "file": str(source), "topic": CONNECT_TOPIC, "exactly.once.support": "required"}})
        worker.rest("POST", "/connectors", {"name": "file-sink", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "1",
            "file": str(sink), "topics": CONNECT_TOPIC}})
        worker.wait(lambda: len(_lines(sink)) == 500, "the first 500 lines in the sink file")

        # A broker dies and comes back while lines are appended.
        victim = cluster.brokers[3]
        victim.kill9()
        _append(source, 500, 500)
        victim.start()
        worker.wait(lambda: len(_lines(sink)) == 1000, "1000 lines in the sink file")

        # The sink pauses, its offsets committed (a sink is at least once: lines written but not
        # committed when its worker dies are written again, in Kafka as here); then the worker dies
        # while the source reads new lines, its records and offsets in open transactions.
        worker.rest("PUT", "/connectors/file-sink/pause")
        worker.wait(lambda: worker.state("file-sink") == ("PAUSED", ["PAUSED"]), "the sink paused")
        worker.wait(lambda: _sink_group_caught_up(cluster), "the sink's offsets committed at the end")
        paused_at = len(_lines(sink))
        _append(source, 1000, 2000)
        worker.kill9()
        assert len(_lines(sink)) == paused_at
        worker.start()
        worker.wait(lambda: worker.state("file-source") == ("RUNNING", ["RUNNING"]), "the source running again")
        # The paused state was kept in the config topic.
        worker.wait(lambda: worker.state("file-sink") == ("PAUSED", ["PAUSED"]), "the sink still paused")
        worker.rest("PUT", "/connectors/file-sink/resume")
        worker.wait(lambda: len(_lines(sink)) >= 3000, "3000 lines in the sink file")
        assert _lines(sink) == _lines(source), "the sink file differs from the source file"
        _check_connect_topics(cluster)
    except BaseException:
        print(worker.logs())
        print(cluster.stderr())
        raise
    finally:
        worker.close()


def _check_connect_topics(cluster: Cluster) -> None:
    """The worker's configs, offsets and status: in compacted topics, as Connect made them."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resources = [ConfigResource(ResourceType.TOPIC, topic) for topic in CONNECT_INTERNAL.values()]
    for resource, future in admin.describe_configs(resources).items():
        assert future.result(20)["cleanup.policy"].value == "compact", resource.name
