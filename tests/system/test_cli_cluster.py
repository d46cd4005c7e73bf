"""``minikafka topics``, ``configs`` and ``consumer-groups`` against a three-broker cluster through
one bootstrap broker: a replicated topic created, described and grown, another broker's config
changed at that broker, a group found at its coordinator wherever it is, and bad input refused
with nothing changed."""

from __future__ import annotations

import subprocess
import sys

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.integration.broker_process import REPO_ROOT, wait_until
from tests.integration.clients import confluent_produce
from tests.system.cluster import Cluster


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minikafka", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120)


def test_the_admin_commands_against_a_cluster(cluster: Cluster) -> None:
    one = cluster.brokers[1].bootstrap  # every command through broker 1 alone
    made = tool("topics", "--bootstrap-server", one, "--create", "--topic", "shared", "--partitions", "3",
                "--replication-factor", "3", "--config", "min.insync.replicas=2")
    assert made.returncode == 0, made.stderr
    cluster.wait_for_leaders("shared", 3, isr_size=3)
    described = tool("topics", "--bootstrap-server", one, "--describe", "--topic", "shared")
    assert "ReplicationFactor: 3\tConfigs: min.insync.replicas=2" in described.stdout, described.stdout
    rows = [line for line in described.stdout.splitlines() if line.startswith("\tTopic: shared\tPartition:")]
    assert len(rows) == 3 and all(len(row.split("Replicas: ")[1].split("\t")[0].split(",")) == 3 for row in rows)
    grown = tool("topics", "--bootstrap-server", one, "--alter", "--topic", "shared", "--partitions", "4")
    assert grown.returncode == 0, grown.stderr
    wait_until(lambda: len(cluster.partitions("shared", cluster.brokers[3])) == 4, 30, what="4 partitions on broker 3")

    # Broker 3's own config, changed by asking broker 3 (found through broker 1's Metadata).
    changed = tool("configs", "--bootstrap-server", one, "--entity-type", "brokers", "--entity-name", "3", "--alter",
                   "--add-config", "log.dirs.balancer.enable=true")
    assert changed.returncode == 0, changed.stderr
    shown = tool("configs", "--bootstrap-server", one, "--entity-type", "brokers", "--entity-name", "3", "--describe")
    assert "  log.dirs.balancer.enable=true sensitive=false" in shown.stdout, shown.stdout + shown.stderr
    other = tool("configs", "--bootstrap-server", one, "--entity-type", "brokers", "--entity-name", "2", "--describe")
    assert "log.dirs.balancer.enable" not in other.stdout
    bad = tool("configs", "--bootstrap-server", one, "--entity-type", "topics", "--entity-name", "shared", "--alter",
               "--add-config", "min.insync.replicas=3,no.such.key=1")
    assert bad.returncode == 1 and "no.such.key" in bad.stderr, bad.stderr
    assert "min.insync.replicas=2" in tool("topics", "--bootstrap-server", one, "--describe", "--topic",
                                           "shared").stdout

    # A group whose coordinator may be any broker.
    confluent_produce(cluster.bootstrap, "shared", [(b"k%d" % i, b"v") for i in range(40)])
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id="auditors", enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition("shared", p): OffsetAndMetadata(1, "", -1) for p in range(4)})
    finally:
        consumer.close()
    listed = tool("consumer-groups", "--bootstrap-server", one, "--list")
    assert "auditors" in listed.stdout.split(), listed.stderr
    lag = tool("consumer-groups", "--bootstrap-server", one, "--describe", "--group", "auditors")
    assert lag.returncode == 0, lag.stderr
    rows = [line.split() for line in lag.stdout.splitlines() if line.startswith("auditors ")]
    assert len(rows) == 4 and all(r[3] == "1" for r in rows) and sum(int(r[5]) for r in rows) == 40 - 4
    reset = tool("consumer-groups", "--bootstrap-server", one, "--reset-offsets", "--group", "auditors",
                 "--all-topics", "--to-latest", "--execute")
    assert reset.returncode == 0, reset.stderr
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        committed = admin.list_group_offsets("auditors")["auditors"]
    finally:
        admin.close()
    assert sum(meta.offset for meta in committed.values()) == 40
    assert tool("consumer-groups", "--bootstrap-server", one, "--delete", "--group", "auditors").returncode == 0

    gone = tool("topics", "--bootstrap-server", one, "--delete", "--topic", "shared")
    assert gone.returncode == 0, gone.stderr
    unknown = tool("topics", "--bootstrap-server", one, "--describe", "--topic", "shared")
    assert unknown.returncode == 1 and "topic 'shared' does not exist" in unknown.stderr
