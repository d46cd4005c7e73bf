"""Apache Kafka's own command-line tools against a minikafka cluster: ZooKeeper and three brokers
of two log dirs each (ACCEPTANCE.md K1 and K2).

Each tool is checked on what it prints and on the state it leaves, read back through another
client (kafka-python's Metadata, confluent-kafka) or the brokers' log dirs. Kafka 4.x tools
unless a test names 3.9. The cluster is shared by the module: every test works on topics of its
own, and a test that kills a broker starts it again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kazoo.client import KazooClient

from tests.integration.broker_process import BrokerProcess, KafkaWire, wait_until
from tests.integration.clients import confluent_consume, confluent_produce
from tests.interop.tools import (
    KafkaTools,
    describe_partitions,
    event_lines,
    fail_with,
    lines_with,
    log_dirs_of,
    reassignment_json,
)
from tests.system.cluster import Cluster

pytestmark = pytest.mark.system

# A follower may fetch one whole fetch (replica.fetch.max.bytes, 1 MiB by default) before its
# quota holds it back; the dir mover one copy chunk. The throttle bound allows that much more.
THROTTLE_SLACK = 1 << 20


@pytest.fixture(scope="module")
def tools(tools_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaTools]:
    tools = KafkaTools(tools_cluster.bootstrap, tmp_path_factory.mktemp("cluster-tools"))
    try:
        yield tools
    finally:
        tools.close()


def _running(cluster: Cluster) -> None:
    stopped = [i for i, b in cluster.brokers.items() if not b.is_running()]
    assert not stopped, f"brokers {stopped} are not running:\n{cluster.stderr()}"


@pytest.mark.parametrize("line", ["3.9", "4"])
def test_kafka_topics_on_the_cluster(tools: KafkaTools, tools_cluster: Cluster, line: str) -> None:
    topic = f"cluster-topics-{line.replace('.', '')}"
    tools.admin("kafka-topics", "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "3",
                "--config", "min.insync.replicas=2", line=line)
    tools_cluster.wait_for_leaders(topic, 3, isr_size=3)
    tools.admin("kafka-topics", "--alter", "--topic", topic, "--partitions", "4", line=line)
    tools_cluster.wait_for_leaders(topic, 4, isr_size=3)
    out = tools.admin("kafka-topics", "--describe", "--topic", topic, line=line)
    described = describe_partitions(out)
    metadata = tools_cluster.partitions(topic)
    expected = {(topic, i): (str(p.leader_id), ",".join(map(str, p.replica_nodes)), set(p.isr_nodes))
                for i, p in metadata.items()}
    found = {k: (v["Leader"], v["Replicas"], {int(b) for b in v["Isr"].split(",")}) for k, v in described.items()}
    if found != expected or "min.insync.replicas=2" not in out:
        raise fail_with("kafka-topics --describe", out, f"not the cluster's Metadata {expected}")
    assert all(len(set(replicas.split(","))) == 3 for _, replicas, _ in found.values())
    if line == "4":
        # DescribeProducers is answered by each partition's leader, spread over the brokers.
        for index in metadata:
            confluent_produce(tools_cluster.bootstrap, topic, [(b"k", b"v")], partition=index)
        for index in metadata:
            out = tools.admin("kafka-transactions", "describe-producers", "--topic", topic, "--partition", str(index))
            header, *rows = (row.split("\t") for row in out.strip().splitlines())
            shown = [{h.strip(): v.strip() for h, v in zip(header, values, strict=False)} for values in rows]
            if [(p["LastSequence"], p["CurrentTransactionStartOffset"]) for p in shown] != [("0", "None")]:
                raise fail_with("kafka-transactions describe-producers", out, f"not one idempotent producer on {index}")

    tools.admin("kafka-topics", "--delete", "--topic", topic, line=line)
    wait_until(lambda: topic not in tools.admin("kafka-topics", "--list", line=line).split(), 30,
               interval=0.5, what=f"{topic} deleted")
    _running(tools_cluster)


def test_kafka_configs_on_the_cluster(tools: KafkaTools, tools_cluster: Cluster) -> None:
    topic = "cluster-configs"
    tools_cluster.create_topic(topic, 1, 3)
    admin = AdminClient({"bootstrap.servers": tools_cluster.bootstrap})
    tools.admin("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
                "--add-config", "retention.bytes=1048576")
    tools.admin("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-name", "2",
                "--add-config", "log.cleaner.min.cleanable.ratio=0.3")
    tools.admin("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", "carol",
                "--add-config", "SCRAM-SHA-512=[iterations=5000,password=carol-secret]")
    # Every broker sees what went through ZooKeeper, whichever broker the tool talked to.
    for broker in tools_cluster.brokers.values():
        one = AdminClient({"bootstrap.servers": broker.bootstrap})
        (configs,) = one.describe_configs([ConfigResource("topic", topic)]).values()
        assert configs.result(10)["retention.bytes"].value == "1048576"
    (configs,) = admin.describe_configs([ConfigResource("broker", "2")]).values()
    assert configs.result(10)["log.cleaner.min.cleanable.ratio"].value == "0.3"
    out = tools.admin("kafka-configs", "--describe", "--entity-type", "users", "--entity-name", "carol")
    assert "SCRAM-SHA-512=iterations=5000" in out, out
    _client_quotas_on_the_cluster(tools, tools_cluster)
    tools.admin("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-name", "2",
                "--delete-config", "log.cleaner.min.cleanable.ratio")
    out = tools.admin("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "2")
    assert "log.cleaner.min.cleanable.ratio" not in out, out


def _client_quotas_on_the_cluster(tools: KafkaTools, cluster: Cluster) -> None:
    """Quotas set by kafka-configs are in ZooKeeper as Kafka writes them (a user's beside its SCRAM
    credential), and every broker follows their change notification."""
    tools.admin("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", "carol",
                "--add-config", "producer_byte_rate=1048576")
    tools.admin("kafka-configs", "--alter", "--entity-type", "clients", "--entity-name", "probe",
                "--add-config", "request_percentage=0.001")
    zk = KazooClient(hosts=cluster.zookeeper.connect + "/minikafka")
    zk.start(timeout=15)
    try:
        carol = json.loads(zk.get("/config/users/carol")[0])["config"]
        assert carol["producer_byte_rate"] == "1048576" and "SCRAM-SHA-512" in carol, carol
        assert json.loads(zk.get("/config/clients/probe")[0]) == {"version": 1,
                                                                   "config": {"request_percentage": "0.001"}}
        paths = [json.loads(zk.get(f"/config/changes/{n}")[0])["entity_path"] for n in zk.get_children("/config/changes")]
        assert {"users/carol", "clients/probe"} <= set(paths), paths
    finally:
        zk.stop()
        zk.close()
    out = tools.admin("kafka-configs", "--describe", "--entity-type", "users", "--entity-name", "carol")
    assert "Quota configs for user-principal 'carol' are producer_byte_rate=1048576.0" in out, out
    assert "SCRAM-SHA-512=iterations=5000" in out, out

    def throttled(broker: BrokerProcess) -> bool:
        with KafkaWire(broker.address, client_id="probe") as wire:
            return any(wire.request(MetadataRequest(topics=None, allow_auto_topic_creation=False), 8,
                                    MetadataResponse).throttle_time_ms for _ in range(20))
    for broker in cluster.brokers.values():
        wait_until(lambda b=broker: throttled(b), 15, what=f"broker {broker.broker_id} enforcing the probe's quota")
    tools.admin("kafka-configs", "--alter", "--entity-type", "clients", "--entity-name", "probe",
                "--delete-config", "request_percentage")
    tools.admin("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", "carol",
                "--delete-config", "producer_byte_rate")
    out = tools.admin("kafka-configs", "--describe", "--entity-type", "users", "--entity-name", "carol")
    assert "Quota configs" not in out and "SCRAM-SHA-512=iterations=5000" in out, out


# ---------------------------------------------------------------- K1

def _replica_bytes(broker: BrokerProcess, name: str) -> int:
    """Bytes of the .log files of the broker's replica `name` (topic-partition), future logs included."""
    return sum(f.stat().st_size for d in broker.log_dirs for pattern in (name, f"{name}.*-future")
               for f in d.glob(f"{pattern}/*.log"))


def _other_dir(broker: BrokerProcess, name: str) -> Path:
    current = broker.partition_dirs()[name]
    return next(d for d in broker.log_dirs if d != current)


@pytest.mark.parametrize("line", ["3.9", "4"])
def test_k1_kafka_reassign_partitions_moves_replicas_between_brokers_and_dirs_under_its_throttles(
        tools: KafkaTools, tools_cluster: Cluster, tmp_path: Path, line: str) -> None:
    topic = f"k1-{line.replace('.', '')}"
    tools_cluster.create_topic(topic, 3, 1)
    records = {p: [(f"{p}-{i}".encode(), bytes(1000)) for i in range(2500)] for p in range(3)}
    for p, batch in records.items():
        confluent_produce(tools_cluster.bootstrap, topic, batch, partition=p)
    brokers = tools_cluster.brokers
    owner = {p: tools_cluster.partitions(topic)[p].replica_nodes[0] for p in range(3)}

    before = log_dirs_of(tools.admin("kafka-log-dirs", "--describe", "--topic-list", topic, line=line))
    assert before == {(owner[p], f"{topic}-{p}"): [(str(brokers[owner[p]].partition_dirs()[f"{topic}-{p}"]), False)]
                      for p in range(3)}

    # Partition 0 to the other dir of its broker; 1 and 2 to the next broker (1->2, 2->3, 3->1),
    # into the dir there that holds no replica of this topic.
    target = {0: (owner[0], _other_dir(brokers[owner[0]], f"{topic}-0"))}
    for p in (1, 2):
        nxt = owner[p] % 3 + 1
        target[p] = (nxt, brokers[nxt].log_dirs[1])
    plan = tmp_path / "plan.json"
    plan.write_text(reassignment_json([(topic, p, [b], [str(d)]) for p, (b, d) in target.items()]))
    rate, dir_rate = 100_000, 200_000
    started = time.monotonic()
    out = tools.admin("kafka-reassign-partitions", "--execute", "--reassignment-json-file", str(plan),
                      "--throttle", str(rate), "--replica-alter-log-dirs-throttle", str(dir_rate), line=line)
    assert f"The inter-broker throttle limit was set to {rate} B/s" in out, out
    size = {p: _replica_bytes(brokers[owner[p]], f"{topic}-{p}") for p in range(3)}

    # The throttles hold: whatever the copies have written so far is within the rate (plus one
    # fetch), and the moves are not done, which unthrottled they would be in well under a second.
    def copied(p: int) -> int:
        broker, _ = target[p]
        return _replica_bytes(brokers[broker], f"{topic}-{p}") - (size[p] if broker == owner[p] else 0)
    wait_until(lambda: all(copied(p) > 0 for p in range(3)), 30, what="every copy started")
    time.sleep(0.5)  # a copy that was not held back would be complete by now
    elapsed = time.monotonic() - started
    for p in range(3):
        limit = (dir_rate if p == 0 else rate) * elapsed + THROTTLE_SLACK
        assert 0 < copied(p) <= min(limit, size[p] - 1), (p, copied(p), limit, size[p])
    out = tools.admin("kafka-reassign-partitions", "--verify", "--reassignment-json-file", str(plan),
                      "--preserve-throttles", line=line)
    assert lines_with(out, "still in progress"), out

    # Raising the throttles (--additional re-submits the plan with the new rates) lets them finish.
    tools.admin("kafka-reassign-partitions", "--execute", "--additional", "--reassignment-json-file", str(plan),
                "--throttle", "500000000", "--replica-alter-log-dirs-throttle", "500000000", line=line)

    def verified() -> str | None:
        out = tools.admin("kafka-reassign-partitions", "--verify", "--reassignment-json-file", str(plan), line=line)
        done = all(f"Reassignment of partition {topic}-{p} is completed" in out and
                   f"Reassignment of replica {topic}-{p}-{target[p][0]} completed successfully" in out
                   for p in range(3))
        return out if done else None
    out = wait_until(verified, 90, interval=1.0, what="--verify reporting every move done")
    assert "Clearing broker-level throttles on brokers 1,2,3" in out, out

    after = log_dirs_of(tools.admin("kafka-log-dirs", "--describe", "--topic-list", topic, line=line))
    assert after == {(b, f"{topic}-{p}"): [(str(d), False)] for p, (b, d) in target.items()}, after
    metadata = tools_cluster.partitions(topic)
    assert {p: (list(m.replica_nodes), m.leader_id, list(m.isr_nodes)) for p, m in metadata.items()} == {
        p: ([b], b, [b]) for p, (b, _) in target.items()}
    for p in range(3):
        read = confluent_consume(tools_cluster.bootstrap, topic, [p])
        assert [(r.key, r.value) for r in read] == records[p], f"partition {p} lost or changed records"
    admin = AdminClient({"bootstrap.servers": tools_cluster.bootstrap})
    for broker in brokers.values():
        (future,) = admin.describe_configs([ConfigResource("broker", str(broker.broker_id))]).values()
        entries = future.result(10)
        assert entries["leader.replication.throttled.rate"].source != 2  # no DYNAMIC_BROKER_CONFIG left
        assert entries["replica.alter.log.dirs.io.max.bytes.per.second"].source != 2
    _running(tools_cluster)


def test_kafka_reassign_partitions_cancels_a_move_between_brokers(
        tools: KafkaTools, tools_cluster: Cluster, tmp_path: Path) -> None:
    topic = "cancelled-reassignment"
    tools_cluster.create_topic(topic, 1, 1)
    confluent_produce(tools_cluster.bootstrap, topic, [(None, bytes(1000)) for _ in range(3000)], partition=0)
    source = tools_cluster.partitions(topic)[0].replica_nodes[0]
    destination = source % 3 + 1
    plan = tmp_path / "plan.json"
    plan.write_text(reassignment_json([(topic, 0, [destination], ["any"])]))
    tools.admin("kafka-reassign-partitions", "--execute", "--reassignment-json-file", str(plan), "--throttle", "20000")
    out = tools.admin("kafka-reassign-partitions", "--list")
    assert f"{topic}-0: replicas: " in out and f"adding: {destination}. removing: {source}." in out, out
    out = tools.admin("kafka-reassign-partitions", "--cancel", "--reassignment-json-file", str(plan))
    assert f"Successfully cancelled partition reassignment for: {topic}-0" in out, out
    assert "No partition reassignments found." in tools.admin("kafka-reassign-partitions", "--list")
    wait_until(lambda: list(tools_cluster.partitions(topic)[0].replica_nodes) == [source], 30,
               what="the replicas as before")
    wait_until(lambda: f"{topic}-0" not in tools_cluster.brokers[destination].partition_dirs(), 30,
               what="the destination's copy removed")


# ---------------------------------------------------------------- K2, kafka-leader-election

def test_k2_verifiable_producer_and_consumer_through_kill_9_of_a_leader_then_preferred_election(
        tools: KafkaTools, tools_cluster: Cluster, tmp_path: Path) -> None:
    topic, group = "verifiable", "verifiable-group"
    tools_cluster.create_topic(topic, 3, 3, **{"min.insync.replicas": "2"})
    consumer = tools.start("kafka-verifiable-consumer", "--bootstrap-server", tools_cluster.bootstrap,
                           "--topic", topic, "--group-id", group, "--reset-policy", "earliest", "--verbose",
                           log=tmp_path / "consumer.log")
    producer = None
    victim = tools_cluster.leader(topic, 0)
    try:
        producer = tools.start("kafka-verifiable-producer", "--bootstrap-server", tools_cluster.bootstrap,
                               "--topic", topic, "--acks", "-1", "--max-messages", "4000", "--throughput", "400",
                               log=tmp_path / "producer.log")

        def acked() -> list[dict]:
            return [e for e in event_lines(producer.output()) if e["name"] == "producer_send_success"]
        wait_until(lambda: len(acked()) >= 1000 or not producer.alive(), 60, interval=0.2,
                   what="a quarter of the records acknowledged")
        tools_cluster.brokers[victim].kill9()
        wait_until(lambda: tools_cluster.leader(topic, 0) not in (victim, -1), 30, what="a new leader of partition 0")
        wait_until(lambda: not producer.alive(), 90, interval=0.5, what="the producer done")
        if producer.stop() != 0:
            raise producer.failure("kafka-verifiable-producer did not end cleanly")
        tools_cluster.brokers[victim].start()

        sent = {(e["partition"], e["offset"]): e["value"] for e in acked()}
        tool_data = [e for e in event_lines(producer.output()) if e["name"] == "tool_data"]
        assert tool_data and tool_data[-1]["acked"] == len(sent), producer.output()[-3000:]
        # The verifiable producer does not retry: what was in flight to the killed leader failed
        # (as with Kafka). It must have gone on with the new leaders after that.
        failed = [int(e["value"]) for e in event_lines(producer.output()) if e["name"] == "producer_send_error"]
        after_failures = [v for v in map(int, sent.values()) if v > max(failed, default=-1)]
        assert len(after_failures) >= 1000, f"{len(after_failures)} acknowledged after the last failed send"

        def consumed() -> dict[tuple[int, int], str]:
            return {(e["partition"], e["offset"]): e["value"] for e in event_lines(consumer.output())
                    if e["name"] == "record_data"}
        wait_until(lambda: sent.keys() <= consumed().keys() or not consumer.alive(), 90, interval=0.5,
                   what="every acknowledged record consumed")
        got = consumed()
        missing = sorted(set(sent) - set(got))
        if missing or any(got[k] != v for k, v in sent.items()):
            raise consumer.failure(f"kafka-verifiable-consumer missed {len(missing)} acknowledged records "
                                   f"(first {missing[:10]}) or read other values")
    finally:
        if producer is not None:
            producer.stop()
        consumer.stop()
    tools_cluster.wait_for_leaders(topic, 3, isr_size=3, timeout=60)

    # The restarted broker leads nothing until kafka-leader-election gives its partitions back.
    partition0 = tools_cluster.partitions(topic)[0]
    assert partition0.replica_nodes[0] == victim and partition0.leader_id != victim
    out = tools.admin("kafka-leader-election", "--election-type", "preferred", "--topic", topic, "--partition", "0")
    assert f"Successfully completed leader election (PREFERRED) for partitions {topic}-0" in out, out
    # The tool asked the controller, which answers once its own metadata shows the new leader;
    # the other brokers hear of it a moment later.
    controller = tools_cluster.brokers[tools_cluster.controller_id()]
    assert tools_cluster.partitions(topic, via=controller)[0].leader_id == victim
    out = tools.admin("kafka-leader-election", "--election-type", "preferred", "--topic", topic, "--partition", "0")
    assert f"Valid replica already elected for partitions {topic}-0" in out, out
    _running(tools_cluster)


def test_kafka_leader_election_unclean_on_the_cluster(tools: KafkaTools, tools_cluster: Cluster) -> None:
    topic = "unclean-election"
    tools_cluster.create_topic(topic, 1, 3)
    out = tools.admin("kafka-leader-election", "--election-type", "unclean", "--topic", topic, "--partition", "0")
    assert f"Valid replica already elected for partitions {topic}-0" in out, out
    refused = tools.admin("kafka-leader-election", "--election-type", "unclean", "--topic", "no-such-topic",
                          "--partition", "0", expect_failure=True)
    assert "UnknownTopicOrPartitionException" in refused
