"""``minikafka topics``, ``configs``, ``acls`` and ``consumer-groups`` against a real broker, each
checked with a real client library (confluent-kafka's or kafka-python's admin) as the oracle, and
bad input answered with a clear message, the documented exit code and nothing changed: 0 done,
1 failed (a broker refused), 2 usage (nothing sent), 4 authentication failed."""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka import errors as kafka_errors

from minikafka.tools import configs as configs_tool
from tests.integration.broker_process import HOST, REPO_ROOT, BrokerProcess, free_port
from tests.integration.clients import confluent_produce, create_topic, describe_client_quotas
from tests.integration.security import PLAIN_MODULE, confluent_sasl, jaas, kafka_python_sasl
from tests.readme import block_containing

pytestmark = pytest.mark.integration
USERS = {"admin": "admin-secret", "alice": "alice-secret"}


def tool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minikafka", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=90, input=stdin)


def admin_of(bootstrap: str, **conf: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **conf})


def described_configs(bootstrap: str, kind: str, name: str) -> dict[str, str]:
    admin = admin_of(bootstrap)  # kept while its future is pending: a dropped client fails them
    (future,) = admin.describe_configs([ConfigResource(kind, name)]).values()
    return {key: entry.value for key, entry in future.result(20).items()}


def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    return described_configs(bootstrap, "topic", topic)


def topics_of(bootstrap: str) -> dict[str, int]:
    metadata = admin_of(bootstrap).list_topics(timeout=20)
    return {name: len(t.partitions) for name, t in metadata.topics.items()}


# ---------------------------------------------------------------- topics

def test_topics_create_describe_alter_delete(module_broker: BrokerProcess) -> None:
    server = module_broker.bootstrap
    made = tool("topics", "--bootstrap-server", server, "--create", "--topic", "orders", "--partitions", "3",
                "--config", "cleanup.policy=compact", "--config", "segment.ms=60000")
    assert made.returncode == 0 and "Created topic orders." in made.stdout, made.stderr
    assert topics_of(server)["orders"] == 3
    configs = topic_configs(server, "orders")
    assert configs["cleanup.policy"] == "compact" and configs["segment.ms"] == "60000"

    listed = tool("topics", "--bootstrap-server", server, "--list")
    assert listed.returncode == 0 and "orders" in listed.stdout.split(), listed.stderr

    described = tool("topics", "--bootstrap-server", server, "--describe", "--topic", "orders")
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0].startswith("Topic: orders\tTopicId: ") and "PartitionCount: 3\tReplicationFactor: 1" in lines[0]
    assert "Configs: cleanup.policy=compact,segment.ms=60000" in lines[0]
    assert lines[1:] == [f"\tTopic: orders\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1" for p in range(3)]

    altered = tool("topics", "--bootstrap-server", server, "--alter", "--topic", "orders", "--partitions", "5")
    assert altered.returncode == 0, altered.stderr
    assert topics_of(server)["orders"] == 5
    fewer = tool("topics", "--bootstrap-server", server, "--alter", "--topic", "orders", "--partitions", "2")
    assert fewer.returncode == 1 and "INVALID_PARTITIONS" in fewer.stderr, fewer.stderr
    assert topics_of(server)["orders"] == 5

    again = tool("topics", "--bootstrap-server", server, "--create", "--topic", "orders")
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    quiet = tool("topics", "--bootstrap-server", server, "--create", "--topic", "orders", "--if-not-exists")
    assert quiet.returncode == 0 and quiet.stderr == ""

    deleted = tool("topics", "--bootstrap-server", server, "--delete", "--topic", "orders")
    assert deleted.returncode == 0 and "Deleted topic orders." in deleted.stdout, deleted.stderr
    assert "orders" not in topics_of(server)


def test_topics_bad_input_is_refused_and_changes_nothing(module_broker: BrokerProcess) -> None:
    server = module_broker.bootstrap
    create_topic(server, "kept", 1)
    before = topics_of(server)

    bad_config = tool("topics", "--bootstrap-server", server, "--create", "--topic", "fresh",
                      "--config", "retention.mss=1000")
    assert bad_config.returncode == 1, bad_config.stderr
    assert "topic fresh was not created: INVALID_CONFIG" in bad_config.stderr and "retention.mss" in bad_config.stderr
    bad_value = tool("topics", "--bootstrap-server", server, "--create", "--topic", "fresh",
                     "--config", "retention.ms=soon")
    assert bad_value.returncode == 1 and "retention.ms" in bad_value.stderr, bad_value.stderr

    for action in (["--describe"], ["--delete"], ["--alter", "--partitions", "4"]):
        unknown = tool("topics", "--bootstrap-server", server, *action, "--topic", "nope")
        assert unknown.returncode == 1, (action, unknown.stderr)
        assert "error: topic 'nope' does not exist" in unknown.stderr
        assert tool("topics", "--bootstrap-server", server, *action, "--topic", "nope",
                    "--if-exists").returncode == 0

    for args, message in [
        (["--create"], "--create needs --topic"),
        (["--create", "--topic", "fresh", "--partitions", "0"], "--partitions: must be at least 1"),
        (["--create", "--topic", "fresh", "--config", "retention.ms"], "is not KEY=VALUE"),
        (["--describe", "--config", "a=b"], "--config goes with --create or --alter"),
        (["--list", "--partitions", "x"], "invalid int value"),
        ([], "no action"),
    ]:
        run = tool("topics", "--bootstrap-server", server, *args)
        assert run.returncode == 2 and message in run.stderr, (args, run.stderr)
    no_server = tool("topics", "--list")
    assert no_server.returncode == 2 and "--bootstrap-server HOST:PORT is required" in no_server.stderr
    unreachable = tool("topics", "--bootstrap-server", f"{HOST}:{free_port()}", "--list")
    assert unreachable.returncode == 1 and "cannot connect" in unreachable.stderr

    assert topics_of(server) == before


# ---------------------------------------------------------------- configs

def test_configs_of_topics_and_brokers(module_broker: BrokerProcess) -> None:
    server = module_broker.bootstrap
    create_topic(server, "tuned", 1)
    altered = tool("configs", "--bootstrap-server", server, "--entity-type", "topics", "--entity-name", "tuned",
                   "--alter", "--add-config", "retention.ms=3600000,cleanup.policy=[compact,delete]")
    assert altered.returncode == 0 and "Completed updating config for topic tuned." in altered.stdout, altered.stderr
    configs = topic_configs(server, "tuned")
    assert configs["retention.ms"] == "3600000" and configs["cleanup.policy"] == "compact,delete"
    described = tool("configs", "--bootstrap-server", server, "--entity-type", "topics", "--entity-name", "tuned",
                     "--describe")
    assert described.returncode == 0, described.stderr
    assert described.stdout.startswith("Dynamic configs for topic tuned are:\n")
    assert "  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000" \
        in described.stdout
    removed = tool("configs", "--bootstrap-server", server, "--topic", "tuned", "--alter",
                   "--delete-config", "retention.ms")
    assert removed.returncode == 0, removed.stderr
    assert topic_configs(server, "tuned")["retention.ms"] == "604800000"

    # The command of the README's disk balancer section.
    balancer = tool("configs", "--bootstrap-server", server, "--entity-type", "brokers", "--entity-name", "1",
                    "--alter", "--add-config", "log.dirs.balancer.enable=true")
    assert balancer.returncode == 0 and "Completed updating config for broker 1." in balancer.stdout, balancer.stderr
    assert described_configs(server, "broker", "1")["log.dirs.balancer.enable"] == "true"
    shown = tool("configs", "--bootstrap-server", server, "--entity-type", "brokers", "--entity-name", "1",
                 "--describe")
    assert "  log.dirs.balancer.enable=true sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:" in shown.stdout
    every = tool("configs", "--bootstrap-server", server, "--broker", "1", "--describe", "--all")
    assert every.stdout.startswith("All configs for broker 1 are:\n") and "  num.partitions=" in every.stdout
    off = tool("configs", "--bootstrap-server", server, "--entity-type", "brokers", "--entity-name", "1",
               "--alter", "--delete-config", "log.dirs.balancer.enable")
    assert off.returncode == 0, off.stderr

    default = tool("configs", "--bootstrap-server", server, "--entity-type", "brokers", "--entity-default",
                   "--alter", "--add-config", "log.cleaner.io.max.bytes.per.second=1048576")
    assert default.returncode == 0, default.stderr
    listed = tool("configs", "--bootstrap-server", server, "--entity-type", "brokers", "--entity-default",
                  "--describe")
    assert "Default configs for brokers in the cluster are:\n  log.cleaner.io.max.bytes.per.second=1048576" \
        in listed.stdout, listed.stdout
    assert tool("configs", "--bootstrap-server", server, "--entity-type", "brokers", "--entity-default", "--alter",
                "--delete-config", "log.cleaner.io.max.bytes.per.second").returncode == 0


def test_configs_bad_input_is_refused_and_changes_nothing(module_broker: BrokerProcess) -> None:
    server = module_broker.bootstrap
    create_topic(server, "steady", 1, {"retention.ms": "7200000"})
    bad_name = tool("configs", "--bootstrap-server", server, "--entity-type", "topics", "--entity-name", "steady",
                    "--alter", "--add-config", "retention.ms=1000,retention.mss=5")
    assert bad_name.returncode == 1 and "INVALID_CONFIG" in bad_name.stderr and "retention.mss" in bad_name.stderr
    assert topic_configs(server, "steady")["retention.ms"] == "7200000"  # the good key was not taken either
    static = tool("configs", "--bootstrap-server", server, "--entity-type", "brokers", "--entity-name", "1",
                  "--alter", "--add-config", "broker.id=7")
    assert static.returncode == 1 and "broker.id" in static.stderr, static.stderr
    unknown = tool("configs", "--bootstrap-server", server, "--entity-type", "topics", "--entity-name", "nope",
                   "--describe")
    assert unknown.returncode == 1 and "topic 'nope' does not exist" in unknown.stderr
    for args, message in [
        (["--entity-type", "brokers", "--entity-name", "one", "--describe"], "a broker is named by its id"),
        (["--entity-type", "brokers", "--entity-name", "9", "--describe"], "broker 9 is not in the cluster"),
        (["--entity-type", "topics", "--alter", "--add-config", "a=b"], "--alter needs --entity-name"),
        (["--entity-type", "topics", "--entity-name", "steady", "--alter"], "--add-config and/or --delete-config"),
        (["--entity-type", "topics", "--entity-name", "steady", "--alter", "--add-config", "x"], "is not KEY=VALUE"),
        (["--entity-type", "topics", "--entity-default", "--describe"], "--entity-default goes with"),
        (["--entity-type", "hosts", "--describe"], "invalid choice"),
    ]:
        run = tool("configs", "--bootstrap-server", server, *args)
        assert run.returncode == 2 and message in run.stderr, (args, run.stderr)
    assert topic_configs(server, "steady")["retention.ms"] == "7200000"


def test_configs_of_client_quotas(module_broker: BrokerProcess) -> None:
    server = module_broker.bootstrap
    parser = argparse.ArgumentParser()
    configs_tool.add_arguments(parser)

    def configs(*args: str) -> subprocess.CompletedProcess[str]:
        """The tool's work in this process (the command line is run once below, as users run it)."""
        out, err = io.StringIO(), io.StringIO()
        code = configs_tool.run(parser.parse_args(["--bootstrap-server", server, *args]), out, err)
        return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())

    done = tool("configs", "--bootstrap-server", server, "--entity-type", "clients", "--entity-name", "cli-app",
                "--alter", "--add-config", "producer_byte_rate=1048576,request_percentage=50")
    assert done.returncode == 0 and "Completed updating config for client-id 'cli-app'." in done.stdout, done.stderr
    assert configs("--user", "cli-user", "--client", "cli-app", "--alter",
                   "--add-config", "consumer_byte_rate=2048").returncode == 0
    assert configs("--user-defaults", "--alter", "--add-config", "consumer_byte_rate=1073741824").returncode == 0
    out = configs("--entity-type", "clients", "--describe").stdout
    assert "Quota configs for client-id 'cli-app' are producer_byte_rate=1048576.0, request_percentage=50.0" in out
    out = configs("--user", "cli-user", "--client", "cli-app", "--describe").stdout
    assert out == "Quota configs for user-principal 'cli-user', client-id 'cli-app' are consumer_byte_rate=2048.0\n"
    out = configs("--entity-type", "users", "--describe").stdout
    assert "Quota configs for the default user-principal are consumer_byte_rate=1073741824.0" in out, out
    assert describe_client_quotas(module_broker.address, [("client-id", 0, "cli-app")], strict=True) == {
        (("client-id", "cli-app"),): {"producer_byte_rate": 1048576.0, "request_percentage": 50.0}}

    fractional = configs("--entity-type", "clients", "--entity-name", "cli-app", "--alter",
                         "--add-config", "producer_byte_rate=1.5")
    assert fractional.returncode == 1 and "must be a Long value" in fractional.stderr, fractional.stderr
    for args, message in [
        (["--entity-type", "clients", "--entity-name", "cli-app", "--alter", "--add-config", "fetch=1"],
         "fetch is not a client quota"),
        (["--entity-type", "users", "--entity-name", "u", "--alter", "--add-config",
          "producer_byte_rate=5,SCRAM-SHA-256=[password=x]"], "in two commands"),
        (["--entity-type", "clients", "--alter", "--add-config", "producer_byte_rate=5"], "--alter needs --entity-name"),
        (["--user", "u", "--entity-type", "users", "--describe"], "give one form"),
    ]:
        run = configs(*args)
        assert run.returncode == 2 and message in run.stderr, (args, run.stderr)

    assert configs("--entity-type", "clients", "--entity-name", "cli-app", "--alter",
                   "--delete-config", "producer_byte_rate,request_percentage").returncode == 0
    assert configs("--user", "cli-user", "--client", "cli-app", "--alter",
                   "--delete-config", "consumer_byte_rate").returncode == 0
    assert configs("--user-defaults", "--alter", "--delete-config", "consumer_byte_rate").returncode == 0
    assert configs("--entity-type", "clients", "--describe").stdout == ""
    assert describe_client_quotas(module_broker.address, []) == {}


# ---------------------------------------------------------------- consumer groups

def test_consumer_groups_describes_a_consumer_protocol_group(module_broker: BrokerProcess) -> None:
    """A KIP-848 group (confluent-kafka, group.protocol=consumer): described through ConsumerGroupDescribe,
    deleted only once its member has left."""
    server = module_broker.bootstrap
    create_topic(server, "kip848-events", 2)
    confluent_produce(server, "kip848-events", [(b"k%d" % i, b"v") for i in range(10)])
    consumer = confluent_kafka.Consumer({"bootstrap.servers": server, "group.id": "kip848-billing",
                                         "group.protocol": "consumer", "client.id": "kip848-app",
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["kip848-events"])
    try:
        read = 0
        for _ in range(200):
            message = consumer.poll(0.1)
            read += message is not None and message.error() is None
            if read == 10:
                break
        assert read == 10
        consumer.commit(asynchronous=False)
        described = tool("consumer-groups", "--bootstrap-server", server, "--describe", "--group", "kip848-billing")
        assert described.returncode == 0, described.stderr
        rows = [line.split() for line in described.stdout.splitlines() if line.startswith("kip848-billing ")]
        assert sorted(row[2] for row in rows) == ["0", "1"] and {row[8] for row in rows} == {"kip848-app"}, rows
        busy = tool("consumer-groups", "--bootstrap-server", server, "--delete", "--group", "kip848-billing")
        assert busy.returncode == 1 and "still has members" in busy.stderr, busy.stderr
    finally:
        consumer.close()
    deleted = tool("consumer-groups", "--bootstrap-server", server, "--delete", "--group", "kip848-billing")
    assert deleted.returncode == 0, deleted.stderr


def test_consumer_groups_describe_reset_and_delete(module_broker: BrokerProcess) -> None:
    server = module_broker.bootstrap
    create_topic(server, "events", 2)
    confluent_produce(server, "events", [(b"k%d" % i, b"v") for i in range(40)])
    consumer = KafkaConsumer("events", bootstrap_servers=server, group_id="billing", auto_offset_reset="earliest",
                             enable_auto_commit=False, client_id="billing-app")
    try:
        read = 0
        for _ in range(60):
            read += sum(len(records) for records in consumer.poll(500).values())
            if read >= 40:
                break
        assert read == 40
        consumer.commit({KpTopicPartition("events", p): _offset_meta(5 + p) for p in range(2)})

        described = tool("consumer-groups", "--bootstrap-server", server, "--describe", "--group", "billing")
        assert described.returncode == 0, described.stderr
        rows = [line.split() for line in described.stdout.splitlines() if line.startswith("billing ")]
        ends = {p: int(row[4]) for p, row in ((int(r[2]), r) for r in rows)}
        assert sum(ends.values()) == 40
        for row in rows:
            partition = int(row[2])
            assert row[:4] == ["billing", "events", str(partition), str(5 + partition)]
            assert int(row[5]) == ends[partition] - 5 - partition  # the lag
            assert row[6] != "-" and row[8] == "billing-app"  # the member holding it

        busy = tool("consumer-groups", "--bootstrap-server", server, "--reset-offsets", "--group", "billing",
                    "--topic", "events", "--to-earliest", "--execute")
        assert busy.returncode == 1 and "only be reset while it has no members" in busy.stderr, busy.stderr
        assert _committed(server, "billing") == {0: 5, 1: 6}
        not_empty = tool("consumer-groups", "--bootstrap-server", server, "--delete", "--group", "billing")
        assert not_empty.returncode == 1 and "still has members" in not_empty.stderr
    finally:
        consumer.close()

    listed = tool("consumer-groups", "--bootstrap-server", server, "--list")
    assert listed.returncode == 0 and "billing" in listed.stdout.split(), listed.stderr
    dry = tool("consumer-groups", "--bootstrap-server", server, "--reset-offsets", "--group", "billing",
               "--topic", "events:1", "--to-offset", "2")
    assert dry.returncode == 0 and "Dry run" in dry.stdout, dry.stderr
    assert _committed(server, "billing") == {0: 5, 1: 6}
    done = tool("consumer-groups", "--bootstrap-server", server, "--reset-offsets", "--group", "billing",
                "--topic", "events:1", "--to-offset", "2", "--execute")
    assert done.returncode == 0, done.stderr
    assert _committed(server, "billing") == {0: 5, 1: 2}
    shifted = tool("consumer-groups", "--bootstrap-server", server, "--reset-offsets", "--group", "billing",
                   "--all-topics", "--shift-by", "-100", "--execute")
    assert shifted.returncode == 0 and "outside the log" in shifted.stderr, shifted.stderr
    assert _committed(server, "billing") == {0: 0, 1: 0}
    latest = tool("consumer-groups", "--bootstrap-server", server, "--reset-offsets", "--group", "billing",
                  "--topic", "events", "--to-latest", "--execute")
    assert latest.returncode == 0, latest.stderr
    assert sum(_committed(server, "billing").values()) == 40

    deleted = tool("consumer-groups", "--bootstrap-server", server, "--delete", "--group", "billing")
    assert deleted.returncode == 0 and "Deleted consumer group 'billing'." in deleted.stdout, deleted.stderr
    gone = tool("consumer-groups", "--bootstrap-server", server, "--describe", "--group", "billing")
    assert gone.returncode == 1 and "consumer group 'billing' does not exist" in gone.stderr
    for args, message in [
        (["--describe"], "--group GROUP (or --all-groups) is required"),
        (["--reset-offsets", "--group", "g", "--topic", "events"], "needs where to"),
        (["--reset-offsets", "--group", "g", "--to-earliest"], "needs --topic or --all-topics"),
        (["--reset-offsets", "--group", "g", "--topic", "events:x", "--to-earliest"], "is not TOPIC or"),
        (["--describe", "--group", "g", "--to-earliest"], "go with --reset-offsets"),
        (["--reset-offsets", "--group", "g", "--topic", "events", "--to-datetime", "yesterday"],
         "is not a date and time"),
    ]:
        run = tool("consumer-groups", "--bootstrap-server", server, *args)
        assert run.returncode == 2 and message in run.stderr, (args, run.stderr)
    unknown_topic = tool("consumer-groups", "--bootstrap-server", server, "--reset-offsets", "--group", "g",
                         "--topic", "nope", "--to-earliest", "--execute")
    assert unknown_topic.returncode == 1 and "topic 'nope' does not exist" in unknown_topic.stderr


def _offset_meta(offset: int) -> object:
    from kafka.structs import OffsetAndMetadata

    return OffsetAndMetadata(offset, "", -1)


def _committed(server: str, group: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=server)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items()}


# ---------------------------------------------------------------- ACLs, on a broker with an authorizer

@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str, Path]]:
    root = tmp_path_factory.mktemp("cli-acls")
    sasl_port = free_port()
    broker = BrokerProcess(root / "broker", overrides={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            jaas(PLAIN_MODULE, **{f"user_{u}": p for u, p in USERS.items()}),
        "offsets.topic.num.partitions": "2",
    })
    broker.overrides["listeners"] += f",SASL_PLAINTEXT://{HOST}:{sasl_port}"
    broker.start()
    admin_properties = root / "admin.properties"
    admin_properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                                f"sasl.jaas.config={jaas(PLAIN_MODULE, username='admin', password='admin-secret')}\n")
    try:
        yield broker, f"{HOST}:{sasl_port}", admin_properties
    finally:
        broker.close()


def acl_tool(secured: tuple[BrokerProcess, str, Path], *args: str, stdin: str | None = None
             ) -> subprocess.CompletedProcess[str]:
    _, sasl, admin_properties = secured
    return tool("acls", "--bootstrap-server", sasl, "--command-config", str(admin_properties), *args, stdin=stdin)


def described_acls(sasl: str) -> list[str]:
    admin = admin_of(sasl, **confluent_sasl("PLAIN", "admin", "admin-secret"))
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    return sorted(f"{b.restype.name}:{b.name}:{b.resource_pattern_type.name}:{b.principal}:{b.host}:"
                  f"{b.operation.name}:{b.permission_type.name}" for b in admin.describe_acls(every).result(20))


def test_acls_add_list_remove(secured: tuple[BrokerProcess, str, Path]) -> None:
    _, sasl, _ = secured
    admin = admin_of(sasl, **confluent_sasl("PLAIN", "admin", "admin-secret"))
    for future in admin.create_topics([confluent_kafka.admin.NewTopic("payments", 1, 1)]).values():
        future.result(20)
    added = acl_tool(secured, "--add", "--allow-principal", "User:alice", "--producer", "--topic", "payments")
    assert added.returncode == 0, added.stderr
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=payments, patternType=LITERAL)`" \
        in added.stdout
    assert described_acls(sasl) == [f"TOPIC:payments:LITERAL:User:alice:*:{op}:ALLOW"
                                     for op in ("CREATE", "DESCRIBE", "WRITE")]
    producer = KafkaProducer(bootstrap_servers=sasl, **kafka_python_sasl("PLAIN", "alice", "alice-secret"),
                             max_block_ms=10_000, enable_idempotence=False)
    try:
        producer.send("payments", b"from alice").get(timeout=20)
    finally:
        producer.close(5)

    prefixed = acl_tool(secured, "--add", "--deny-principal", "User:alice", "--operation", "Read",
                        "--topic", "pay", "--resource-pattern-type", "prefixed")
    assert prefixed.returncode == 0, prefixed.stderr
    listed = acl_tool(secured, "--list", "--topic", "payments", "--resource-pattern-type", "match")
    assert listed.returncode == 0, listed.stderr
    assert "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=pay, patternType=PREFIXED)`" \
        in listed.stdout
    assert "(principal=User:alice, host=*, operation=READ, permissionType=DENY)" in listed.stdout
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in listed.stdout

    declined = acl_tool(secured, "--remove", "--deny-principal", "User:alice", "--operation", "Read", "--topic",
                        "pay", "--resource-pattern-type", "prefixed", stdin="n\n")
    assert declined.returncode == 1 and "nothing removed" in declined.stderr
    assert len(described_acls(sasl)) == 4
    removed = acl_tool(secured, "--remove", "--force", "--deny-principal", "User:alice", "--operation", "Read",
                       "--topic", "pay", "--resource-pattern-type", "prefixed")
    assert removed.returncode == 0 and "Removed ACL" in removed.stdout, removed.stderr
    everything = acl_tool(secured, "--remove", "--topic", "payments", stdin="y\n")
    assert everything.returncode == 0 and everything.stdout.count("Removed ACL") == 3, everything.stdout
    assert described_acls(sasl) == []


def test_acls_malformed_is_refused_and_changes_nothing(secured: tuple[BrokerProcess, str, Path]) -> None:
    _, sasl, admin_properties = secured
    for args, message in [
        (["--add", "--allow-principal", "alice", "--operation", "Read", "--topic", "t"], "'alice' is not TYPE:NAME"),
        (["--add", "--allow-principal", "User:alice", "--operation", "Fly", "--topic", "t"], "'Fly' is not one of"),
        (["--add", "--allow-principal", "User:alice", "--operation", "IdempotentWrite", "--topic", "t"],
         "IdempotentWrite does not apply to a Topic"),
        (["--add", "--allow-principal", "User:alice", "--operation", "Read"], "name a resource"),
        (["--add", "--operation", "Read", "--topic", "t"], "--add needs --allow-principal or --deny-principal"),
        (["--add", "--allow-principal", "User:alice", "--topic", "t", "--resource-pattern-type", "match"],
         "--resource-pattern-type: 'match' is not one of literal, prefixed"),
        (["--add", "--allow-principal", "User:alice", "--consumer", "--topic", "t"], "--consumer needs --topic and"),
        (["--list", "--principal", "alice"], "'alice' is not TYPE:NAME"),
    ]:
        run = acl_tool(secured, *args)
        assert run.returncode == 2 and message in run.stderr, (args, run.stderr)
    assert described_acls(sasl) == []

    # Security: a wrong password has its own exit code; a SASL listener reached without a login says so.
    wrong = admin_properties.parent / "wrong.properties"
    wrong.write_text(admin_properties.read_text().replace("admin-secret", "not-it"))
    refused = tool("acls", "--bootstrap-server", sasl, "--command-config", str(wrong), "--list")
    assert refused.returncode == 4 and "Authentication failed" in refused.stderr, refused.stderr
    anonymous = tool("acls", "--bootstrap-server", sasl, "--list")
    assert anonymous.returncode == 1, anonymous.stderr
    assert "a SASL listener (SASL_PLAINTEXT, SASL_SSL) needs security.protocol, sasl.mechanism" in anonymous.stderr


def test_acls_without_an_authorizer_say_so(module_broker: BrokerProcess) -> None:
    run = tool("acls", "--bootstrap-server", module_broker.bootstrap, "--add", "--allow-principal", "User:alice",
               "--operation", "Read", "--topic", "t")
    assert run.returncode == 1 and "the broker has no authorizer" in run.stderr, run.stderr
    admin = KafkaAdminClient(bootstrap_servers=module_broker.bootstrap)
    try:
        with pytest.raises(kafka_errors.SecurityDisabledError):
            admin.describe_acls(_kp_every())
    finally:
        admin.close()


def _kp_every() -> object:
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ResourcePatternFilter
    from kafka.admin import ACLResourcePatternType as KpPattern
    from kafka.admin import ResourceType as KpResourceType

    return ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                     ResourcePatternFilter(KpResourceType.ANY, None, KpPattern.ANY))


# ---------------------------------------------------------------- the README's commands, as written

def test_the_readme_commands_run_as_written(secured: tuple[BrokerProcess, str, Path], tmp_path: Path) -> None:
    """Every line of the README's command-line block, in order, each exiting 0; only the address
    changes (to the secured broker's SASL listener, with the super user's client settings, which
    the README's acls lines name as admin.properties)."""
    _, sasl, admin_properties = secured
    block = block_containing("sh", "$M consumer-groups $B --reset-offsets")
    address = 'B="--bootstrap-server 127.0.0.1:9092"'
    assert block.startswith(f'M=".venv/bin/minikafka"; {address}\n')
    block = block.replace(address, f'B="--bootstrap-server {sasl} --command-config admin.properties"')
    (tmp_path / "admin.properties").write_text(admin_properties.read_text())
    (tmp_path / ".venv").symlink_to(sys.prefix)
    script = "set -e -o pipefail\n" + "".join(f"{line}\necho \"== $?\"\n" for line in block.splitlines()
                                              if not line.startswith("M="))
    run = subprocess.run(["bash", "-c", block.splitlines()[0] + "\n" + script], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("== 0") == len(block.splitlines()) - 1
    assert "Created topic orders." in run.stdout and "Deleted topic orders." in run.stdout
    assert "cleanup.policy=compact,delete" in run.stdout and "Deleted consumer group 'billing'." in run.stdout
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in run.stdout
