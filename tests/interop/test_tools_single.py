"""Apache Kafka's own command-line tools against one minikafka broker (two log dirs).

Each tool is checked on what it prints and on the state it leaves, read back through another
client (confluent-kafka's admin client, or the files of the log dirs). Kafka 4.x tools unless a
test names 3.9; kafka-topics runs with both. The broker is shared by the module: every test works
on topics, groups and users of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
    ScramMechanism,
)

from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import confluent_produce, create_topic, describe_client_quotas
from tests.interop.tools import (
    KafkaTools,
    describe_partitions,
    fail_with,
    json_line,
    lines_with,
    log_dirs_of,
    reassignment_json,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tools(tools_broker: BrokerProcess) -> Iterator[KafkaTools]:
    tools = KafkaTools(tools_broker.bootstrap, tools_broker.root)
    try:
        yield tools
    finally:
        tools.close()


@pytest.fixture(scope="module")
def admin(tools_broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": tools_broker.bootstrap})


def partition_count(admin: AdminClient, topic: str) -> int | None:
    # All topics: asking for one by name would create it again (auto.create.topics.enable).
    described = admin.list_topics(timeout=10).topics.get(topic)
    return None if described is None or described.error is not None else len(described.partitions)


def topic_configs(admin: AdminClient, topic: str) -> dict[str, tuple[str, int]]:
    """{name: (value, source)} of a topic, through confluent-kafka."""
    (future,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
    return {name: (entry.value, entry.source) for name, entry in future.result(10).items()}


def broker_configs(admin: AdminClient, broker_id: int) -> dict[str, tuple[str, int]]:
    (future,) = admin.describe_configs([ConfigResource("broker", str(broker_id))]).values()
    return {name: (entry.value, entry.source) for name, entry in future.result(10).items()}


DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, DEFAULT = 1, 2, 3, 5


# ---------------------------------------------------------------- kafka-topics

@pytest.mark.parametrize("line", ["3.9", "4"])
def test_kafka_topics_creates_describes_alters_and_deletes(tools: KafkaTools, admin: AdminClient,
                                                           tools_broker: BrokerProcess, line: str) -> None:
    topic = f"topics-{line.replace('.', '')}"
    out = tools.admin("kafka-topics", "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1",
                      "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact", line=line)
    assert f"Created topic {topic}." in out
    assert partition_count(admin, topic) == 2
    assert topic_configs(admin, topic)["retention.ms"] == ("3600000", DYNAMIC_TOPIC)

    out = tools.admin("kafka-topics", "--alter", "--topic", topic, "--partitions", "5", line=line)
    assert partition_count(admin, topic) == 5
    before = tools_broker.request_versions().get(("DescribeTopicPartitions", 0), 0)
    out = tools.admin("kafka-topics", "--describe", "--topic", topic, line=line)
    # Kafka's AdminClient (3.7 on) describes topics with DescribeTopicPartitions where the broker has it.
    assert tools_broker.request_versions().get(("DescribeTopicPartitions", 0), 0) > before
    header = lines_with(out, "PartitionCount")
    if not (len(header) == 1 and "PartitionCount: 5" in header[0] and "ReplicationFactor: 1" in header[0]
            and "cleanup.policy=compact" in header[0] and "retention.ms=3600000" in header[0]):
        raise fail_with("kafka-topics --describe", out, "the topic line is not the topic as created and altered")
    partitions = describe_partitions(out)
    assert sorted(partitions) == [(topic, p) for p in range(5)], out
    assert all(p["Leader"] == "1" and p["Replicas"] == "1" and p["Isr"] == "1" for p in partitions.values()), out

    refused = tools.admin("kafka-topics", "--create", "--topic", topic, "--partitions", "1", line=line,
                          expect_failure=True)
    assert f"Topic '{topic}' already exists" in refused
    refused = tools.admin("kafka-topics", "--alter", "--topic", topic, "--partitions", "3", line=line,
                          expect_failure=True)
    assert "InvalidPartitionsException" in refused and partition_count(admin, topic) == 5

    tools.admin("kafka-topics", "--delete", "--topic", topic, line=line)
    wait_until(lambda: partition_count(admin, topic) is None, 15, what=f"{topic} gone from Metadata")
    assert topic not in tools.admin("kafka-topics", "--list", line=line).split()


# ---------------------------------------------------------------- kafka-configs

def test_kafka_configs_sets_and_removes_topic_and_broker_dynamic_configs(
        tools: KafkaTools, admin: AdminClient, tools_broker: BrokerProcess) -> None:
    topic = "configs-topic"
    create_topic(tools_broker.bootstrap, topic, 1)
    tools.admin("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
                "--add-config", "retention.ms=5000,max.message.bytes=65536")
    assert topic_configs(admin, topic)["max.message.bytes"] == ("65536", DYNAMIC_TOPIC)
    tools.admin("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
                "--delete-config", "retention.ms")
    out = tools.admin("kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", topic)
    assert lines_with(out, "max.message.bytes=65536", "DYNAMIC_TOPIC_CONFIG"), out
    assert not lines_with(out, "retention.ms=5000"), out
    assert topic_configs(admin, topic)["retention.ms"][1] == DEFAULT

    broker = str(tools_broker.broker_id)
    tools.admin("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-name", broker,
                "--add-config", "log.cleaner.min.cleanable.ratio=0.25")
    tools.admin("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-default",
                "--add-config", "log.retention.ms=7200000")
    out = tools.admin("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", broker)
    assert lines_with(out, "log.cleaner.min.cleanable.ratio=0.25", "DYNAMIC_BROKER_CONFIG"), out
    configs = broker_configs(admin, tools_broker.broker_id)
    assert configs["log.cleaner.min.cleanable.ratio"] == ("0.25", DYNAMIC_BROKER)
    assert configs["log.retention.ms"] == ("7200000", DYNAMIC_DEFAULT_BROKER)
    # A topic without its own retention.ms follows the cluster-wide default.
    assert topic_configs(admin, topic)["retention.ms"] == ("7200000", DYNAMIC_DEFAULT_BROKER)

    # A key Kafka reads only at start is refused in Kafka's words (an unknown key, as in Kafka,
    # is taken as a custom config).
    refused = tools.admin("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-name", broker,
                          "--add-config", "num.partitions=3", expect_failure=True)
    assert "Cannot update these configs dynamically: Set(num.partitions)" in refused, refused

    tools.admin("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-name", broker,
                "--delete-config", "log.cleaner.min.cleanable.ratio")
    tools.admin("kafka-configs", "--alter", "--entity-type", "brokers", "--entity-default",
                "--delete-config", "log.retention.ms")
    configs = broker_configs(admin, tools_broker.broker_id)
    assert configs["log.cleaner.min.cleanable.ratio"][1] == DEFAULT and configs["log.retention.ms"][1] == DEFAULT


def test_kafka_configs_adds_describes_and_deletes_scram_users(tools: KafkaTools, admin: AdminClient) -> None:
    tools.admin("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
                "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]")
    out = tools.admin("kafka-configs", "--describe", "--entity-type", "users", "--entity-name", "alice")
    if "SCRAM-SHA-256=iterations=8192" not in out or "SCRAM-SHA-512=iterations=4096" not in out:
        raise fail_with("kafka-configs --describe --entity-type users", out, "alice's credentials not shown")
    described = admin.describe_user_scram_credentials(["alice"])["alice"].result(10)
    assert {(i.mechanism, i.iterations) for i in described.scram_credential_infos} == {
        (ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 4096)}

    tools.admin("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", "alice",
                "--delete-config", "SCRAM-SHA-512")
    described = admin.describe_user_scram_credentials(["alice"])["alice"].result(10)
    assert [i.mechanism for i in described.scram_credential_infos] == [ScramMechanism.SCRAM_SHA_256]
    out = tools.admin("kafka-configs", "--describe", "--entity-type", "users")
    assert "SCRAM-SHA-512" not in out and "SCRAM-SHA-256=iterations=8192" in out, out


@pytest.mark.parametrize("line", ["3.9", "4"])
def test_kafka_configs_sets_describes_and_deletes_client_quotas(tools: KafkaTools, tools_broker: BrokerProcess,
                                                                line: str) -> None:
    user, client = f"quota-user-{line.replace('.', '')}", f"quota-app-{line.replace('.', '')}"
    tools.admin("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", user,
                "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152", line=line)
    tools.admin("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", user, "--entity-type",
                "clients", "--entity-name", client, "--add-config", "request_percentage=150", line=line)
    try:
        # A default quota applies to every client of the module's broker: it is taken away below.
        tools.admin("kafka-configs", "--alter", "--entity-type", "clients", "--entity-default",
                    "--add-config", "producer_byte_rate=1073741824", line=line)
        out = tools.admin("kafka-configs", "--describe", "--entity-type", "users", "--entity-name", user, line=line)
        assert f"Quota configs for user-principal '{user}' are consumer_byte_rate=2097152.0, " \
               "producer_byte_rate=1048576.0" in out, out
        out = tools.admin("kafka-configs", "--describe", "--entity-type", "users", "--entity-name", user,
                          "--entity-type", "clients", "--entity-name", client, line=line)
        assert f"Quota configs for user-principal '{user}', client-id '{client}' are request_percentage=150.0" \
            in out, out
        out = tools.admin("kafka-configs", "--describe", "--entity-type", "clients", "--entity-default", line=line)
        assert "Quota configs for the default client-id are producer_byte_rate=1.073741824E9" in out, out
        # What the tool wrote is what the broker holds, read back with kafka-python's encoder.
        assert describe_client_quotas(tools_broker.address, [("user", 0, user)]) == {
            (("user", user),): {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
            (("client-id", client), ("user", user)): {"request_percentage": 150.0}}

        tools.admin("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", user,
                    "--delete-config", "consumer_byte_rate", line=line)
        out = tools.admin("kafka-configs", "--describe", "--entity-type", "users", "--entity-name", user, line=line)
        assert f"Quota configs for user-principal '{user}' are producer_byte_rate=1048576.0" in out, out
        refused = tools.admin("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", user,
                              "--add-config", "producer_byte_rate=1.5", line=line, expect_failure=True)
        assert "InvalidRequestException: Configuration producer_byte_rate must be a Long value" in refused, refused
    finally:
        tools.admin("kafka-configs", "--alter", "--entity-type", "clients", "--entity-default",
                    "--delete-config", "producer_byte_rate", line=line)
    tools.admin("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", user, "--entity-type",
                "clients", "--entity-name", client, "--delete-config", "request_percentage", line=line)
    tools.admin("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", user,
                "--delete-config", "producer_byte_rate", line=line)
    assert describe_client_quotas(tools_broker.address, []) == {}


# ---------------------------------------------------------------- kafka-log-dirs, kafka-reassign-partitions

def _fill(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    for partition in range(partitions):
        confluent_produce(bootstrap, topic, ((None, bytes(size)) for _ in range(records)), partition=partition)


def _future_bytes(broker: BrokerProcess, name: str) -> int:
    return sum(f.stat().st_size for d in broker.log_dirs for f in d.glob(f"{name}.*-future/*.log"))


@pytest.mark.parametrize("line", ["3.9", "4"])
def test_kafka_reassign_partitions_moves_replicas_between_the_dirs_of_the_broker(
        tools: KafkaTools, tools_broker: BrokerProcess, line: str) -> None:
    topic = f"moved-{line.replace('.', '')}"
    create_topic(tools_broker.bootstrap, topic, 2)
    _fill(tools_broker.bootstrap, topic, 2, 200, 1000)
    dirs = [str(d) for d in tools_broker.log_dirs]

    before = log_dirs_of(tools.admin("kafka-log-dirs", "--describe", "--topic-list", topic, line=line))
    assert set(before) == {(1, f"{topic}-0"), (1, f"{topic}-1")}
    assert all(len(places) == 1 and not places[0][1] and places[0][0] in dirs for places in before.values())
    # Each replica goes to the dir it is not in.
    targets = {p: next(d for d in dirs if d != before[(1, f"{topic}-{p}")][0][0]) for p in range(2)}

    topics_file = tools_broker.root / f"{topic}-topics.json"
    topics_file.write_text(f'{{"version": 1, "topics": [{{"topic": "{topic}"}}]}}')
    generated = tools.admin("kafka-reassign-partitions", "--generate", "--topics-to-move-json-file",
                            str(topics_file), "--broker-list", "1", line=line)
    current = json_line(generated)
    # Kafka 4's tool asks each replica's dir (DescribeReplicaLogDirs); 3.9's writes "any".
    assert {(p["partition"], p["log_dirs"][0]) for p in current["partitions"]} == {
        (p, before[(1, f"{topic}-{p}")][0][0] if line == "4" else "any") for p in range(2)}, generated

    plan = tools_broker.root / f"{topic}-plan.json"
    plan.write_text(reassignment_json([(topic, p, [1], [targets[p]]) for p in range(2)]))
    out = tools.admin("kafka-reassign-partitions", "--execute", "--reassignment-json-file", str(plan),
                      "--replica-alter-log-dirs-throttle", "50000000", line=line)
    assert "The replica-alter-dir throttle limit was set to 50000000 B/s" in out, out
    assert broker_configs(AdminClient({"bootstrap.servers": tools.bootstrap}), 1)[
        "replica.alter.log.dirs.io.max.bytes.per.second"] == ("50000000", DYNAMIC_BROKER)

    def verified() -> bool:
        out = tools.admin("kafka-reassign-partitions", "--verify", "--reassignment-json-file", str(plan), line=line)
        return all(f"Reassignment of replica {topic}-{p}-1 completed successfully" in out for p in range(2))
    wait_until(verified, 60, interval=0.5, what="--verify reporting both moves completed")

    after = log_dirs_of(tools.admin("kafka-log-dirs", "--describe", "--topic-list", topic, line=line))
    assert after == {(1, f"{topic}-{p}"): [(targets[p], False)] for p in range(2)}
    assert {p: str(d) for p, d in ((p, tools_broker.partition_dirs()[f"{topic}-{p}"]) for p in range(2))} == targets
    # --verify that saw the moves done lifted the throttle it had set.
    assert broker_configs(AdminClient({"bootstrap.servers": tools.bootstrap}), 1)[
        "replica.alter.log.dirs.io.max.bytes.per.second"][1] == DEFAULT


def test_kafka_reassign_partitions_cancels_a_move_held_back_by_its_throttle(
        tools: KafkaTools, tools_broker: BrokerProcess) -> None:
    topic = "cancelled-move"
    create_topic(tools_broker.bootstrap, topic, 1)
    _fill(tools_broker.bootstrap, topic, 1, 2000, 1000)
    source = tools_broker.partition_dirs()[f"{topic}-0"]
    target = next(d for d in tools_broker.log_dirs if d != source)
    plan = tools_broker.root / f"{topic}-plan.json"
    plan.write_text(reassignment_json([(topic, 0, [1], [str(target)])]))
    # 2 MB at 20 kB/s: the move is still copying when --cancel comes.
    tools.admin("kafka-reassign-partitions", "--execute", "--reassignment-json-file", str(plan),
                "--replica-alter-log-dirs-throttle", "20000")
    wait_until(lambda: _future_bytes(tools_broker, f"{topic}-0") > 0, 30, what="the future replica started")
    out = tools.admin("kafka-reassign-partitions", "--verify", "--reassignment-json-file", str(plan),
                      "--preserve-throttles")
    assert f"Reassignment of replica {topic}-0-1 is still in progress" in out, out

    out = tools.admin("kafka-reassign-partitions", "--cancel", "--reassignment-json-file", str(plan))
    assert f"Successfully started moving log directory to {source} for replica {topic}-0 with broker 1" in out, out
    wait_until(lambda: _future_bytes(tools_broker, f"{topic}-0") == 0 and
               not list(target.glob(f"{topic}-0.*-future")), 30, what="the future replica removed")
    assert tools_broker.partition_dirs()[f"{topic}-0"] == source
    assert log_dirs_of(tools.admin("kafka-log-dirs", "--describe", "--topic-list", topic)) == {
        (1, f"{topic}-0"): [(str(source), False)]}
    assert broker_configs(AdminClient({"bootstrap.servers": tools.bootstrap}), 1)[
        "replica.alter.log.dirs.io.max.bytes.per.second"][1] == DEFAULT


# ---------------------------------------------------------------- kafka-leader-election, kafka-delete-records,
# ---------------------------------------------------------------- kafka-get-offsets

def test_kafka_leader_election_finds_every_partition_led_already(tools: KafkaTools, tools_broker: BrokerProcess) -> None:
    topic = "elected"
    create_topic(tools_broker.bootstrap, topic, 2)
    for election in ("preferred", "unclean"):
        out = tools.admin("kafka-leader-election", "--election-type", election, "--topic", topic, "--partition", "1")
        assert f"Valid replica already elected for partitions {topic}-1" in out, out
    refused = tools.admin("kafka-leader-election", "--election-type", "preferred", "--topic", "no-such-topic",
                          "--partition", "0", expect_failure=True)
    assert "UnknownTopicOrPartitionException" in refused


def test_kafka_delete_records_and_kafka_get_offsets(tools: KafkaTools, tools_broker: BrokerProcess) -> None:
    topic = "trimmed"
    create_topic(tools_broker.bootstrap, topic, 2)
    _fill(tools_broker.bootstrap, topic, 2, 50, 10)
    plan = tools_broker.root / f"{topic}-delete.json"
    plan.write_text(f'{{"version": 1, "partitions": [{{"topic": "{topic}", "partition": 0, "offset": 20}},'
                    f'{{"topic": "{topic}", "partition": 1, "offset": -1}}]}}')
    out = tools.admin("kafka-delete-records", "--offset-json-file", str(plan))
    assert f"partition: {topic}-0\tlow_watermark: 20" in out and f"partition: {topic}-1\tlow_watermark: 50" in out, out

    earliest = tools.admin("kafka-get-offsets", "--topic", topic, "--time", "-2")
    latest = tools.admin("kafka-get-offsets", "--topic", topic, "--time", "-1")
    assert earliest.split() == [f"{topic}:0:20", f"{topic}:1:50"], earliest
    assert latest.split() == [f"{topic}:0:50", f"{topic}:1:50"], latest
    consumer = Consumer({"bootstrap.servers": tools.bootstrap, "group.id": "tools-watermarks"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (20, 50)
        assert consumer.get_watermark_offsets(TopicPartition(topic, 1), timeout=10) == (50, 50)
    finally:
        consumer.close()


# ---------------------------------------------------------------- perf tests, kafka-consumer-groups

def test_perf_tests_and_kafka_consumer_groups(tools: KafkaTools, admin: AdminClient,
                                              tools_broker: BrokerProcess) -> None:
    topic, group = "perf", "perf-group"
    create_topic(tools_broker.bootstrap, topic, 2)
    out = tools.run("kafka-producer-perf-test", "--topic", topic, "--num-records", "5000", "--record-size", "100",
                    "--throughput", "-1", "--producer-props", f"bootstrap.servers={tools.bootstrap}", "acks=all").stdout
    assert re.search(r"^5000 records sent", out, re.M), out
    out = tools.run("kafka-consumer-perf-test", "--bootstrap-server", tools.bootstrap, "--topic", topic,
                    "--messages", "5000", "--group", group, "--timeout", "60000").stdout
    row = out.strip().splitlines()[-1].split(", ")
    assert row[4] == "5000", out  # data.consumed.in.nMsg
    ends = {p: n for p, n in enumerate(_end_offsets(tools.bootstrap, topic, 2))}
    assert sum(ends.values()) == 5000

    assert group in tools.admin("kafka-consumer-groups", "--list").split()
    out = tools.admin("kafka-consumer-groups", "--describe", "--group", group)
    rows = {int(r.split()[2]): r.split() for r in lines_with(out, group, topic)}
    assert {p: (int(r[3]), int(r[4]), int(r[5])) for p, r in rows.items()} == {p: (e, e, 0) for p, e in ends.items()}, out

    tools.admin("kafka-consumer-groups", "--group", group, "--reset-offsets", "--topic", f"{topic}:0",
                "--to-offset", "7", "--execute")
    out = tools.admin("kafka-consumer-groups", "--group", group, "--reset-offsets", "--topic", f"{topic}:1",
                      "--to-earliest", "--execute")
    assert lines_with(out, group, topic, "1", "0"), out
    committed = _committed(admin, group, topic, 2)
    assert committed == {0: 7, 1: 0}
    out = tools.admin("kafka-consumer-groups", "--describe", "--group", group)
    assert {int(r.split()[2]): int(r.split()[5]) for r in lines_with(out, group, topic)} == {
        0: ends[0] - 7, 1: ends[1]}, out

    out = tools.admin("kafka-consumer-groups", "--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out, out
    assert group not in tools.admin("kafka-consumer-groups", "--list").split()
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tools-watermarks"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        consumer.close()


def _committed(admin: AdminClient, group: str, topic: str, partitions: int) -> dict[int, int]:
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])]
    (future,) = admin.list_consumer_group_offsets(request).values()
    return {tp.partition: tp.offset for tp in future.result(10).topic_partitions}


# ---------------------------------------------------------------- kafka-acls

@pytest.mark.parametrize("line", ["3.9", "4"])
def test_kafka_acls_adds_lists_and_removes(tools: KafkaTools, admin: AdminClient, line: str) -> None:
    topic, principal = f"acl-topic-{line.replace('.', '')}", f"User:acl-user-{line.replace('.', '')}"
    tools.admin("kafka-acls", "--add", "--allow-principal", principal, "--operation", "Read",
                "--operation", "Describe", "--topic", topic, line=line)
    tools.admin("kafka-acls", "--add", "--deny-principal", principal, "--operation", "Write",
                "--topic", "acl-", "--resource-pattern-type", "prefixed", line=line)
    out = tools.admin("kafka-acls", "--list", "--principal", principal, line=line)
    assert lines_with(out, principal, "operation=READ", "permissionType=ALLOW"), out
    assert lines_with(out, principal, "operation=WRITE", "permissionType=DENY"), out
    assert f"name={topic}, patternType=LITERAL" in out and "name=acl-, patternType=PREFIXED" in out, out

    bindings = _acls(admin, principal)
    assert bindings == {(topic, ResourcePatternType.LITERAL, AclOperation.READ, AclPermissionType.ALLOW),
                        (topic, ResourcePatternType.LITERAL, AclOperation.DESCRIBE, AclPermissionType.ALLOW),
                        ("acl-", ResourcePatternType.PREFIXED, AclOperation.WRITE, AclPermissionType.DENY)}

    tools.admin("kafka-acls", "--remove", "--force", "--allow-principal", principal, "--operation", "Read",
                "--topic", topic, line=line)
    assert _acls(admin, principal) == {
        (topic, ResourcePatternType.LITERAL, AclOperation.DESCRIBE, AclPermissionType.ALLOW),
        ("acl-", ResourcePatternType.PREFIXED, AclOperation.WRITE, AclPermissionType.DENY)}
    # Without --operation the tool removes the ACLs of operation All only, which matches neither.
    tools.admin("kafka-acls", "--remove", "--force", "--allow-principal", principal, "--topic", topic, line=line)
    assert len(_acls(admin, principal)) == 2
    tools.admin("kafka-acls", "--remove", "--force", "--allow-principal", principal, "--operation", "Describe",
                "--topic", topic, line=line)
    tools.admin("kafka-acls", "--remove", "--force", "--deny-principal", principal, "--operation", "Write",
                "--topic", "acl-", "--resource-pattern-type", "prefixed", line=line)
    assert _acls(admin, principal) == set()


def _acls(admin: AdminClient, principal: str) -> set[tuple[str, object, object, object]]:
    found = admin.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
        AclOperation.ANY, AclPermissionType.ANY)).result(10)
    return {(b.name, b.resource_pattern_type, b.operation, b.permission_type) for b in found}


# ---------------------------------------------------------------- kafka-transactions

def test_kafka_transactions_lists_and_describes(tools: KafkaTools, tools_broker: BrokerProcess) -> None:
    topic, transactional_id = "transactional", "tools-txn"
    create_topic(tools_broker.bootstrap, topic, 1)
    tools.run("kafka-producer-perf-test", "--topic", topic, "--num-records", "300", "--record-size", "10",
              "--throughput", "-1", "--producer-props", f"bootstrap.servers={tools.bootstrap}",
              "--transactional-id", transactional_id, "--transaction-duration-ms", "100")
    listed = [line.split() for line in tools.admin("kafka-transactions", "list").splitlines()]
    assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], listed
    (row,) = [r for r in listed if r[0] == transactional_id]
    assert row[1] == "1" and row[3] == "CompleteCommit", listed
    out = tools.admin("kafka-transactions", "describe", "--transactional-id", transactional_id)
    header, values = (line.split("\t") for line in out.strip().splitlines())
    described = {h.strip(): v.strip() for h, v in zip(header, values, strict=False)}
    assert described["TransactionalId"] == transactional_id and described["ProducerId"] == row[2], out
    assert described["TransactionState"] == "CompleteCommit" and described["CoordinatorId"] == "1", out
    # Every record the committed transactions wrote is readable by a read_committed consumer.
    consumer = Consumer({"bootstrap.servers": tools.bootstrap, "group.id": "tools-txn-check",
                         "isolation.level": "read_committed"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    assert high - low >= 300  # the records and the transaction markers

    # DescribeProducers (KIP-664): the producer of the committed transactions, none left open.
    out = tools.admin("kafka-transactions", "describe-producers", "--topic", topic, "--partition", "0")
    header, *producers = (line.split("\t") for line in out.strip().splitlines())
    shown = [{h.strip(): v.strip() for h, v in zip(header, values, strict=False)} for values in producers]
    (producer,) = [p for p in shown if p["ProducerId"] == row[2]] or [None]
    if producer is None or producer["CurrentTransactionStartOffset"] != "None" or int(producer["LastSequence"]) < 0:
        raise fail_with("kafka-transactions describe-producers", out, f"producer {row[2]} not shown as committed")
    out = tools.admin("kafka-transactions", "find-hanging", "--broker-id", "1")
    assert out.split() == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                           "LastTimestamp", "Duration(min)"], out  # the header alone: nothing hangs

