"""Apache Kafka's Java client (4.x, and 3.9 for produce and consume) against minikafka, over
PLAINTEXT and over SASL_SSL with SCRAM-SHA-512 and ACLs.

The programs of tests/interop/java print what they were acknowledged and what they read; the
checks here are exact: every acknowledged record read once, at its offset, in order per
partition, nothing else. Covered: the idempotent producer (acks=all) with every codec, the
transactional producer (commit, abort, fencing, consume-transform-produce with the group's
offsets in the transaction, read_committed), the classic group protocol with the range and
cooperative-sticky assignors, static membership, KIP-848's consumer protocol (group.protocol=consumer,
the broker assigning), and the AdminClient calls Kafka's tools make.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from minikafka.coordinator.records import offsets_partition_for
from tests.integration.broker_process import HOST, BrokerProcess, free_port
from tests.integration.security import PLAIN_MODULE, SCRAM_MODULE, Certs, confluent_sasl, jaas
from tests.interop.jvm import Scenario, check_exact, properties_file

pytestmark = pytest.mark.integration
CODECS = "none,gzip,snappy,lz4,zstd"
PARTITIONS = 3
BROKER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "num.partitions": str(PARTITIONS),
    "group.consumer.heartbeat.interval.ms": "500",
}


@dataclass(frozen=True)
class Target:
    """A broker as one client sees it: where to connect, with which client properties, and a
    prefix its topics, groups and transactional ids must have (what its ACLs allow)."""

    name: str
    broker: BrokerProcess
    bootstrap: str
    config: str
    prefix: str
    admin: AdminClient

    def create_topic(self, name: str, partitions: int = PARTITIONS) -> str:
        for future in self.admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(20)
        return name


@pytest.fixture(scope="module")
def plaintext(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    root = tmp_path_factory.mktemp("java-plaintext")
    broker = BrokerProcess(root / "broker", overrides=BROKER_SETTINGS).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        yield Target("PLAINTEXT", broker, broker.bootstrap, "-", "plain-", admin)
    finally:
        broker.close()


@pytest.fixture(scope="module")
def sasl_ssl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A SASL_SSL listener with SCRAM-SHA-512 and Kafka's AclAuthorizer: the admin (PLAIN, a super
    user) creates alice's SCRAM credential and grants her what a producer, consumer and
    transactional producer need on "alice-" names, nothing more."""
    root = tmp_path_factory.mktemp("java-sasl-ssl")
    certs = Certs(root / "certs").make("broker")
    port = free_port()
    broker = BrokerProcess(root / "broker", overrides={
        **BROKER_SETTINGS,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas(PLAIN_MODULE, user_admin="admin-secret"),
        "ssl.keystore.location": certs.keystore("broker"),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    })
    broker.overrides["listeners"] += f",SASL_SSL://{HOST}:{port}"
    broker.start()
    bootstrap = f"{HOST}:{port}"
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap, **confluent_sasl("PLAIN", "admin", "admin-secret", certs)})
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret")])["alice"].result(20)
        grants = [(ResourceType.TOPIC, op) for op in (AclOperation.CREATE, AclOperation.WRITE, AclOperation.READ,
                                                      AclOperation.DESCRIBE)]
        grants += [(ResourceType.GROUP, AclOperation.READ), (ResourceType.TRANSACTIONAL_ID, AclOperation.WRITE),
                   (ResourceType.TRANSACTIONAL_ID, AclOperation.DESCRIBE)]
        for future in admin.create_acls([
                AclBinding(kind, "alice-", ResourcePatternType.PREFIXED, "User:alice", "*", operation,
                           AclPermissionType.ALLOW) for kind, operation in grants]).values():
            future.result(20)
        config = properties_file(root / "alice.properties", {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": jaas(SCRAM_MODULE, username="alice", password="alice-secret"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": certs.ca,
        })
        yield Target("SASL_SSL", broker, bootstrap, config, "alice-", admin)
    finally:
        broker.close()


def _target(request: pytest.FixtureRequest, transport: str) -> Target:
    target: Target = request.getfixturevalue("plaintext" if transport == "PLAINTEXT" else "sasl_ssl")
    return target


@pytest.fixture(params=["PLAINTEXT", "SASL_SSL"])
def target(request: pytest.FixtureRequest) -> Target:
    return _target(request, request.param)


@pytest.fixture(scope="module")
def java_lines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Scenario]]:
    """Kafka 4's and 3.9's clients, each line's programs run in one JVM for the whole module."""
    work_dir = tmp_path_factory.mktemp("java-scenarios")
    lines = {line: Scenario(line, work_dir) for line in ("4", "3.9")}
    try:
        yield lines
    finally:
        for scenario in lines.values():
            scenario.close()


@pytest.fixture(scope="module")
def java4(java_lines: dict[str, Scenario]) -> Scenario:
    return java_lines["4"]


# Kafka 3.9's client too, over PLAINTEXT: users still run it, and it speaks older versions of some APIs.
@pytest.mark.parametrize(("transport", "line"), [("PLAINTEXT", "4"), ("SASL_SSL", "4"), ("PLAINTEXT", "3.9")])
def test_idempotent_producer_with_every_codec_and_a_consumer_group(request: pytest.FixtureRequest,
                                                                   java_lines: dict[str, Scenario], transport: str,
                                                                   line: str) -> None:
    target = _target(request, transport)
    java = java_lines[line]
    topic = target.create_topic(f"{target.prefix}codecs-{line}")
    common = ("--bootstrap", target.bootstrap, "--config", target.config, "--topic", topic)
    produced = java.run("Produce", *common, "--count", "300", "--compression", CODECS, "--prefix", "r")
    acked = produced.having("partition")
    assert len(acked) == 5 * 300 and produced.lines[-1] == {"done": True, "acked": 1500, "failed": 0}, \
        produced.where()
    consumed = java.run("Consume", *common, "--group", f"{target.prefix}codecs-{line}", "--expected", "1500")
    check_exact(acked, consumed.having("key"), consumed.where())
    assert all(r["value"].startswith(r["key"] + " ") for r in consumed.having("key")), consumed.where()
    # The group committed where it stopped: a second member of the group reads nothing more.
    again = java.run("Consume", *common, "--group", f"{target.prefix}codecs-{line}", "--expected", "1",
                     "--timeout-ms", "3000", check=False)
    assert again.having("key") == [] and again.lines[-1] == {"done": False, "count": 0}, again.where()


# Eager (range) over PLAINTEXT; cooperative, whose two-step rebalance asks more of the coordinator, over both.
@pytest.mark.parametrize(("transport", "assignor"), [("PLAINTEXT", "range"), ("PLAINTEXT", "cooperative-sticky"),
                                                     ("SASL_SSL", "cooperative-sticky")])
def test_a_member_joins_and_leaves_with_each_assignor(request: pytest.FixtureRequest, java4: Scenario,
                                                      transport: str, assignor: str) -> None:
    target = _target(request, transport)
    strategy = {"range": "org.apache.kafka.clients.consumer.RangeAssignor",
                "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"}[assignor]
    topic = target.create_topic(f"{target.prefix}join-{assignor}", partitions=6)
    run = java4.run("GroupScenario", "--bootstrap", target.bootstrap, "--config", target.config, "--topic", topic,
                    "--group", f"{target.prefix}join-{assignor}", "--assignor", strategy, "--partitions", "6",
                    "--count", "200", "--scenario", "join-leave")
    where = run.where()
    assert run.lines[-1] == {"done": True}, where
    check_exact([{"key": p["produced"], **p} for p in run.having("produced")], [r for r in run.having("member") if "key" in r],
                where)
    phase = "start"
    a_revoked_on_join: list[set[int]] = []
    a_before_join: set[int] = set()
    for line in run.lines:
        if "phase" in line:
            phase = line["phase"]
        elif line.get("member") == "a" and line.get("event") == "assigned" and phase == "start":
            a_before_join |= set(line["partitions"])
        elif line.get("member") == "a" and line.get("event") == "revoked" and phase == "joined" and line["partitions"]:
            a_revoked_on_join.append(set(line["partitions"]))
    assert a_before_join == set(range(6)), where
    assert not [line for line in run.lines if line.get("event") == "lost"], where
    if assignor == "range":
        # Eager: a gives up everything it has, then is assigned its share anew.
        assert a_revoked_on_join == [set(range(6))], where
    else:
        # Cooperative (KIP-429): a gives up only the partitions that move to b, and keeps reading the rest.
        b_assigned = set().union(*[set(line["partitions"]) for line in run.lines
                                   if line.get("member") == "b" and line.get("event") == "assigned"])
        assert a_revoked_on_join == [b_assigned] and 0 < len(b_assigned) < 6, where


def test_static_members_restart_without_a_rebalance(plaintext: Target, java4: Scenario) -> None:
    topic = plaintext.create_topic("plain-static", partitions=4)
    run = java4.run("GroupScenario", "--bootstrap", plaintext.bootstrap, "--topic", topic, "--group", "plain-static",
                    "--assignor", "org.apache.kafka.clients.consumer.RangeAssignor", "--partitions", "4",
                    "--count", "100", "--scenario", "static")
    where = run.where()
    assert run.lines[-1] == {"done": True}, where
    check_exact([{"key": p["produced"], **p} for p in run.having("produced")],
                [r for r in run.having("member") if "key" in r], where)
    phase = "start"
    last: dict[str, tuple[set[int], int]] = {}  # member's instance id -> (partitions, generation) last assigned
    for line in run.lines:
        if "phase" in line:
            phase = line["phase"]
            continue
        event = line.get("event")
        if event is None:
            continue
        instance = line["member"][0]
        if phase.startswith("restart-"):
            restarted = phase.removeprefix("restart-")
            # A static member that comes back takes its place at once: its partitions and the
            # group's generation, and nobody else notices (no callback on the other member).
            assert instance == restarted, f"{line} while {restarted} restarted{where}"
            if event == "revoked":
                continue  # the member closing gives up its partitions, in its own callback
            assert line["member"] == restarted + "2" and event == "assigned", where
            assert (set(line["partitions"]), line["generation"]) == last[instance], where
        elif event == "assigned":
            partitions = set(line["partitions"])
            if line["partitions"] or instance not in last:
                last[instance] = (partitions, line["generation"])
    assert set(last) == {"a", "b"} and last["a"][0] | last["b"][0] == set(range(4)), where


@pytest.mark.parametrize("scenario", ["join-leave", "static"])
def test_consumer_protocol_members_reconcile_incrementally(plaintext: Target, java4: Scenario, scenario: str) -> None:
    """KIP-848: the broker's uniform assignor; a joining member takes only what the other revoked, and a
    static member that restarts gets its partitions back without a rebalance."""
    topic = plaintext.create_topic(f"plain-kip848-{scenario}", partitions=6)
    run = java4.run("GroupScenario", "--bootstrap", plaintext.bootstrap, "--topic", topic,
                    "--group", f"plain-kip848-{scenario}", "--assignor", "uniform", "--protocol", "consumer",
                    "--partitions", "6", "--count", "200", "--scenario", scenario)
    where = run.where()
    assert run.lines[-1] == {"done": True}, where
    check_exact([{"key": p["produced"], **p} for p in run.having("produced")],
                [r for r in run.having("member") if "key" in r], where)
    assert not [line for line in run.lines if line.get("event") == "lost"], where
    owners: dict[int, str] = {}
    phase = "start"
    for line in run.lines:
        phase = line.get("phase", phase)
        event, member = line.get("event"), line.get("member")
        for partition in line.get("partitions", []) if event else []:
            if event == "assigned":
                # One owner at a time: given only once its previous owner revoked it.
                assert partition not in owners, f"{member} given {partition} still held by {owners[partition]}{where}"
                owners[partition] = member
            else:
                assert owners.pop(partition) == member, where
        if scenario == "join-leave" and event == "revoked" and member == "a" and phase == "joined":
            b_given = [set(x["partitions"]) for x in run.lines if x.get("member") == "b" and x.get("event") == "assigned"]
            assert set(line["partitions"]) <= set().union(*b_given) and len(line["partitions"]) == 3, where
    if scenario == "join-leave":
        _kafka_reads_the_group_records(plaintext, java4, f"plain-kip848-{scenario}")
    if scenario == "static":
        # A static member that restarts (leaving with epoch -2) takes its place back at once: the
        # same partitions, and the other member sees nothing.
        callbacks = "\n".join(str(line) for line in run.lines if "event" in line or "phase" in line)
        held: dict[str, tuple[set[int], int]] = {}  # instance id -> partitions it holds, its epoch
        phase = "start"
        for line in run.lines:
            phase = line.get("phase", phase)
            if "event" not in line:
                continue
            instance, partitions = line["member"][0], set(line["partitions"])
            if phase.startswith("restart-"):
                assert instance == phase.removeprefix("restart-"), callbacks
            before = held.get(instance, (set(), -1))
            if line["event"] == "revoked" and phase.startswith("restart-"):
                continue  # the closing member's own callback: the restarted one must get the same back
            if line["event"] == "assigned" and phase.startswith("restart-") and not partitions:
                # The Java consumer reconciles what it can name: answered before its metadata has the
                # topic's id, it calls back with none, then with the partitions (the broker's log
                # shows one answer, with all of them).
                continue
            if line["event"] == "assigned" and phase.startswith("restart-"):
                # Its epoch as the callbacks report it can lag (a callback runs before the epoch moves):
                # the partitions are what must come back.
                assert line["member"].endswith("2") and partitions == before[0], callbacks
                assert line["generation"] >= before[1] > 0, callbacks
            if line["event"] == "assigned":
                held[instance] = (before[0] | partitions, line["generation"])
            else:
                held[instance] = (before[0] - partitions, line["generation"])


def _kafka_reads_the_group_records(target: Target, java: Scenario, group: str) -> None:
    """Kafka's own decoder of __consumer_offsets (kafka-dump-log --offsets-decoder) reads every
    record the group's coordinator wrote for it, each of Kafka 4's consumer-group record types."""
    partition = offsets_partition_for(group, int(BROKER_SETTINGS["offsets.topic.num.partitions"]))
    segments = [str(p) for d in target.broker.log_dirs for p in sorted(d.glob(f"__consumer_offsets-{partition}/*.log"))]
    dumped = java.tool("org.apache.kafka.tools.DumpLogSegments", "--files", ",".join(segments),
                       "--offsets-decoder", "--print-data-log")
    types: set[int] = set()
    for line in dumped.stdout.splitlines():
        match = re.search(r'key: (\{.*?\}\}) payload: (.*)$', line)
        if match is None or json.loads(match.group(1))["data"].get("groupId") != group:
            continue
        record_type = int(json.loads(match.group(1))["type"])
        payload = match.group(2)
        assert payload == "<DELETE>" or json.loads(payload)["version"] == "0", line
        types.add(record_type)
    assert types == {3, 4, 5, 6, 7, 8}, dumped.stdout[-3000:]


def test_transactions(target: Target, java4: Scenario) -> None:
    prefix = target.prefix + "txn"
    input_topic, output_topic = target.create_topic(f"{prefix}-in"), target.create_topic(f"{prefix}-out")
    run = java4.run("Transactions", "--bootstrap", target.bootstrap, "--config", target.config,
                    "--input", input_topic, "--output", output_topic, "--group", f"{prefix}-group",
                    "--prefix", prefix, "--count", "50")
    where = run.where()
    assert run.lines[-1] == {"done": True}, where
    assert run.having("fenced") == [{"fenced": "ProducerFencedException"}], where
    written = run.having("written")
    committed_input = [w | {"key": w["written"]} for w in written if w["txn"] == "committed"]
    assert len(committed_input) == 100 and len(written) == 150, where

    config = target.config
    read_committed = _config_with(target, "read-committed", {"isolation.level": "read_committed"})

    # read_committed shows the committed records of the input, and not the aborted nor the zombie's.
    read = java4.run("Consume", "--bootstrap", target.bootstrap, "--config", read_committed, "--topic", input_topic)
    check_exact(committed_input, read.having("key"), read.where())
    # read_uncommitted shows the aborted records too (the transaction did write them).
    uncommitted = java4.run("Consume", "--bootstrap", target.bootstrap, "--config", config, "--topic", input_topic)
    assert {r["key"] for r in uncommitted.having("key")} >= {w["written"] for w in written}, uncommitted.where()

    # The processor's output: each committed input exactly once, though one transaction was aborted
    # and its records processed again.
    processed = run.having("processed")
    assert any(p["txn"] == "aborted" for p in processed), where
    out = java4.run("Consume", "--bootstrap", target.bootstrap, "--config", read_committed, "--topic", output_topic)
    check_exact([p | {"key": p["processed"]} for p in processed if p["txn"] == "committed"], out.having("key"),
                out.where())
    assert sorted(r["key"] for r in out.having("key")) == sorted(w["written"] for w in committed_input), out.where()
    # The group's offsets committed with the transactions: just past the last committed input record.
    ends: dict[int, int] = {}
    for record in committed_input:
        ends[record["partition"]] = max(ends.get(record["partition"], 0), record["offset"] + 1)
    (offsets,) = run.having("committed_offsets")
    assert {int(p): o for p, o in offsets["committed_offsets"].items()} == ends, where


def test_acls_refuse_alice_what_she_was_not_granted(sasl_ssl: Target, java4: Scenario) -> None:
    topic = sasl_ssl.create_topic("secret", partitions=1)
    produced = java4.run("Produce", "--bootstrap", sasl_ssl.bootstrap, "--config", sasl_ssl.config, "--topic", topic,
                         "--count", "1", "--prefix", "nope", check=False)
    assert produced.result.returncode == 1, produced.where()
    assert [line["error"] for line in produced.having("error")] == [
        "org.apache.kafka.common.errors.TopicAuthorizationException: "
        "Not authorized to access topics: [secret]"], produced.where()
    # Her own topic, but a group her ACLs do not name.
    mine = sasl_ssl.create_topic("alice-not-her-group", partitions=1)
    consumed = java4.run("Consume", "--bootstrap", sasl_ssl.bootstrap, "--config", sasl_ssl.config, "--topic", mine,
                         "--group", "other-group", "--expected", "1", "--timeout-ms", "15000", check=False)
    assert consumed.result.returncode != 0 and "GroupAuthorizationException" in consumed.result.stderr, \
        consumed.where()


def test_admin_client_calls_of_kafka_tools(target: Target, java4: Scenario) -> None:
    secured = target.name == "SASL_SSL"
    # Over SASL_SSL, the super user: ACLs and SCRAM users are the admin's business.
    config = _config_with(target, "admin", {
        "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas(PLAIN_MODULE, username="admin", password="admin-secret"),
    }) if secured else target.config
    topic, group = f"{target.prefix}admin", f"{target.prefix}admin-group"
    run = java4.run("AdminCalls", "--bootstrap", target.bootstrap, "--config", config, "--topic", topic,
                    "--group", group, "--broker-id", "1", "--security", str(secured).lower())
    answers = {line["call"]: {k: v for k, v in line.items() if k != "call"} for line in run.having("call")}
    dirs = [str(d) for d in target.broker.log_dirs]
    expected = {
        "createTopics": {},
        "createTopics again": {"error": "TopicExistsException"},
        "listTopics": {"names": True},
        "describeTopics": {"partitions": [[0, 1, [1]], [1, 1, [1]]], "topicId": True},
        "createPartitions": {"partitions": [[0, 1, [1]], [1, 1, [1]], [2, 1, [1]]], "topicId": True},
        "describeConfigs": {"retention.ms": ["3600000", "DYNAMIC_TOPIC_CONFIG"],
                            "segment.bytes": ["1073741824", "DEFAULT_CONFIG"]},
        "incrementalAlterConfigs": {"retention.ms": ["604800000", "DEFAULT_CONFIG"],
                                    "segment.bytes": ["1048576", "DYNAMIC_TOPIC_CONFIG"]},
        "describeBrokerConfig": {"num.partitions": str(PARTITIONS)},
        "describeCluster": {"nodes": [1], "controller": 1, "clusterId": True},
        "produce": {},
        "listOffsets": {"earliest": 0, "latest": 10},
        "deleteRecords": {"low_watermark": 4, "earliest": 4},
        "commitOffsets": {},
        "listConsumerGroups": {"has": True},
        "describeConsumerGroups": {"state": "Empty", "members": 0},
        "listConsumerGroupOffsets": {"offsets": {"0": 7, "1": 0}},
        "alterConsumerGroupOffsets": {"offsets": {"0": 9, "1": 0}},
        "deleteConsumerGroupOffsets": {"offsets": {"0": 9}},
        "electLeaders": {"error": "ElectionNotNeededException"},
        "listPartitionReassignments": {"count": 0},
        "deleteConsumerGroups": {"has": False},
        "deleteTopics": {"names": False},
    }
    described_dirs = answers.pop("describeLogDirs", {})
    assert sorted(p for replicas in described_dirs.get("dirs", {}).values() for p in replicas) == [0, 1, 2] and \
        set(described_dirs["dirs"]) <= set(dirs), run.where()
    if secured:
        expected |= {
            "createAcls": {"described": [f"(pattern=ResourcePattern(resourceType=TOPIC, name={topic}, "
                                         "patternType=LITERAL), entry=(principal=User:bob, host=*, "
                                         "operation=READ, permissionType=ALLOW))"]},
            "deleteAcls": {"deleted": 1, "described": 0},
            "alterUserScramCredentials": {"bob": ["SCRAM_SHA_256/8192"]},
        }
    wrong = {call: (answers.get(call), want) for call, want in expected.items() if answers.get(call) != want}
    assert not wrong and run.lines[-1] == {"done": True}, f"calls answered otherwise (got, expected): {wrong}" \
        + run.where()


def _config_with(target: Target, name: str, settings: dict[str, str]) -> str:
    """The target's client properties with `settings` over them, in a file of their own."""
    base = {} if target.config == "-" else dict(
        line.split("=", 1) for line in Path(target.config).read_text().splitlines() if "=" in line)
    return properties_file(target.broker.root / f"{name}.properties", base | settings)
