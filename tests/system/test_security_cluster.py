"""Three brokers replicating over SASL_SSL: the inter-broker listener is TLS with SCRAM-SHA-512,
each broker logging in to the others with its own credentials (put in ZooKeeper beforehand in
Kafka's format, as kafka-configs.sh --zookeeper writes them), with ACL authorization on. A
leader is killed under acks=all load and nothing acknowledged is lost; an ACL and a SCRAM user
made through one broker are in force on every broker within a second; a controller request from
a principal that is not a broker is refused."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from minikafka.net.client import BrokerClient
from minikafka.security import scram
from minikafka.security.client import ClientSecurity
from minikafka.security.sasl import SaslLogin
from tests.integration.broker_process import HOST, KafkaWire, wait_until
from tests.integration.security import SCRAM_MODULE, Certs, confluent_refusal, confluent_sasl, jaas
from tests.system.cluster import Cluster
from tests.system.load import ProducerRun, assert_exactly_once, read_all, wait_acked
from tests.system.zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.system
CHROOT = "/minikafka"
TOPIC = "orders"
PARTITIONS = 3
UPDATE_METADATA = 6


class SecureCluster:
    def __init__(self, cluster: Cluster, certs: Certs) -> None:
        self.cluster, self.certs = cluster, certs
        self._admin = AdminClient({"bootstrap.servers": self.internal(1), **self.sasl("admin", "admin-secret")})

    def internal(self, broker_id: int) -> str:
        return f"{HOST}:{self.cluster.internal_ports[broker_id]}"

    def sasl(self, user: str, password: str) -> dict[str, str]:
        return confluent_sasl("SCRAM-SHA-512", user, password, self.certs)

    def admin(self) -> AdminClient:
        return self._admin


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    root = tmp_path_factory.mktemp("secure-cluster")
    certs = Certs(root / "certs").make("broker")
    zookeeper = ZooKeeperProcess(root / "zookeeper").start()
    cluster: Cluster | None = None
    try:
        _put_scram_user_in_zookeeper(zookeeper.connect, "admin", "admin-secret")
        cluster = Cluster(root, zookeeper, chroot=CHROOT, overrides={
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.internal.scram-sha-512.sasl.jaas.config":
                jaas(SCRAM_MODULE, username="admin", password="admin-secret"),
            "ssl.keystore.location": certs.keystore("broker"),
            "ssl.truststore.location": certs.ca,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
            # The PLAINTEXT clients of the load (User:ANONYMOUS) may use what no ACL names.
            "allow.everyone.if.no.acl.found": "true",
        })
        cluster.start()
        made = SecureCluster(cluster, certs)
        # An ACL on the cluster resource: from now on only admin may act on it.
        _wait(made.admin().create_acls([AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                                                   "User:admin", "*", AclOperation.ALL, AclPermissionType.ALLOW)]))
        yield made
    finally:
        if cluster is not None:
            cluster.close()
        zookeeper.close()


def _put_scram_user_in_zookeeper(connect: str, user: str, password: str) -> None:
    credential = scram.new_credential(scram.SCRAM_SHA_512, password, 4096)
    zk = KazooClient(hosts=connect)
    zk.start(timeout=10)
    try:
        zk.create(f"{CHROOT}/config/users/{user}", json.dumps(
            {"version": 1, "config": {"SCRAM-SHA-512": credential.encode()}}).encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()


def _wait(futures: dict) -> None:
    for future in futures.values():
        future.result(30)


def test_a_leader_killed_under_load_loses_nothing_replicating_over_sasl_ssl(secure: SecureCluster) -> None:
    cluster = secure.cluster
    _wait(secure.admin().create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})]))
    cluster.wait_for_leaders(TOPIC, PARTITIONS, isr_size=3)
    runs = [ProducerRun("confluent", cluster.bootstrap, TOPIC, PARTITIONS).start(),
            ProducerRun("kafka-python", cluster.bootstrap, TOPIC, PARTITIONS, pace_s=0.005).start()]
    try:
        wait_acked(runs, {})
        victim = cluster.leader(TOPIC, 0)
        before = {r.client: len(r.acked) for r in runs}
        cluster.brokers[victim].kill9()
        survivor = next(b for b in cluster.brokers.values() if b.is_running())
        wait_until(lambda: all(p.leader_id not in (victim, -1) for p in cluster.partitions(TOPIC, survivor).values()),
                   30, interval=0.1, what=f"new leaders after kill -9 of broker {victim}")
        wait_acked(runs, before)
        cluster.brokers[victim].start()
        # Back in every ISR: it caught up over SASL_SSL, logging in with its own credentials.
        cluster.wait_for_leaders(TOPIC, PARTITIONS, isr_size=3, timeout=60)
        wait_acked(runs, {r.client: len(r.acked) for r in runs})
    finally:
        for run in runs:
            run.stop()
    assert_exactly_once(runs, read_all(cluster.bootstrap, TOPIC, PARTITIONS))
    assert "SaslLoginFailed" not in cluster.stderr()


def test_acl_and_user_changes_reach_every_broker_within_a_second(secure: SecureCluster) -> None:
    cluster = secure.cluster
    _wait(secure.admin().create_topics([NewTopic("private", 1, 3)]))
    cluster.wait_for_leaders("private", 1, isr_size=3)
    # A user and ACLs made through broker 1...
    _wait(secure.admin().alter_user_scram_credentials([UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret")]))
    _wait(secure.admin().create_acls([
        AclBinding(ResourceType.TOPIC, "private", ResourcePatternType.LITERAL, "User:alice", "*", operation,
                   AclPermissionType.ALLOW) for operation in (AclOperation.WRITE, AclOperation.READ)]))
    changed = time.monotonic()
    # ... are in force on brokers 2 and 3 within a second: User:ANONYMOUS no longer sees the topic,
    # and alice logs in and writes.
    for broker_id in (2, 3):
        def hidden(broker: int = broker_id) -> bool:
            with KafkaWire(cluster.brokers[broker].address) as wire:
                return "private" not in [t.name for t in wire.metadata(None).topics]
        wait_until(hidden, 5, interval=0.02, what=f"the topic hidden from ANONYMOUS on broker {broker_id}")
        assert time.monotonic() - changed < 1.0, f"broker {broker_id} took over a second to apply the ACLs"
    for broker_id in (2, 3):
        def alice_writes(broker: int = broker_id) -> bool:
            producer = confluent_kafka.Producer({"bootstrap.servers": secure.internal(broker), "acks": "all",
                                                 "message.timeout.ms": 2000, **secure.sasl("alice", "alice-secret")})
            producer.produce("private", b"from alice")
            return producer.flush(3) == 0
        wait_until(alice_writes, 10, interval=0.05, what=f"alice writing through broker {broker_id}")
    refusal = confluent_refusal(secure.internal(3), secure.sasl("alice", "wrong"))
    assert "Authentication failed" in refusal
    # Kafka's layout, as Kafka's own tools would read it.
    zk = KazooClient(hosts=cluster.zookeeper.connect)
    zk.start(timeout=10)
    try:
        acls = json.loads(zk.get(f"{CHROOT}/kafka-acl/Topic/private")[0])
        assert {"principal": "User:alice", "permissionType": "Allow", "operation": "Write", "host": "*"} \
            in acls["acls"] and acls["version"] == 1
        assert all(c.startswith("acl_changes_") for c in zk.get_children(f"{CHROOT}/kafka-acl-changes"))
        user = json.loads(zk.get(f"{CHROOT}/config/users/alice")[0])
        assert re.fullmatch(r"salt=\S+,stored_key=\S+,server_key=\S+,iterations=4096", user["config"]["SCRAM-SHA-512"])
        # A prefixed deny, made through broker 1, beats alice's allow on broker 3.
        _wait(secure.admin().create_acls([AclBinding(
            ResourceType.TOPIC, "priv", ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.WRITE,
            AclPermissionType.DENY)]))
        assert zk.exists(f"{CHROOT}/kafka-acl-extended/prefixed/Topic/priv")
        assert zk.get_children(f"{CHROOT}/kafka-acl-extended-changes")
    finally:
        zk.stop()
        zk.close()
    producer = confluent_kafka.Producer({"bootstrap.servers": secure.internal(3), "acks": "all", "retries": 0,
                                         "message.timeout.ms": 3000, **secure.sasl("alice", "alice-secret")})

    def denied() -> bool:
        outcome: list[object] = []
        producer.produce("private", b"denied?", on_delivery=lambda err, _msg: outcome.append(err))
        producer.flush(10)
        return bool(outcome) and outcome[0] is not None and "TOPIC_AUTHORIZATION_FAILED" in str(outcome[0])
    wait_until(denied, 10, interval=0.05, what="the deny in force on broker 3")


def test_a_controller_request_from_a_principal_that_is_no_broker_is_refused(secure: SecureCluster) -> None:
    _wait(secure.admin().alter_user_scram_credentials([UserScramCredentialUpsertion(
        "mallory", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"mallory-secret")]))
    port = secure.cluster.internal_ports[2]

    async def update_metadata(user: str, password: str) -> int:
        tls = Certs(secure.certs.dir).client_context()
        client = BrokerClient(HOST, port, "not-the-controller",
                              security=ClientSecurity(tls, SaslLogin("SCRAM-SHA-512", user, password)))
        try:
            response = await client.request(UPDATE_METADATA, 7, {
                "controller_id": 1, "controller_epoch": 99, "broker_epoch": -1, "topic_states": [],
                "live_brokers": []}, 10)
            return int(response.error_code)
        finally:
            client.close()

    # Once broker 2 knows mallory (she logs in), her UpdateMetadata is refused.
    refused = wait_until(lambda: asyncio.run(update_metadata("mallory", "mallory-secret")), 10,
                         what="mallory logged in on broker 2")
    assert refused == 31  # CLUSTER_AUTHORIZATION_FAILED
    # A broker's principal gets past authorization (and then fails the broker epoch check).
    assert asyncio.run(update_metadata("admin", "admin-secret")) == 77  # STALE_BROKER_EPOCH
    assert Path(secure.cluster.brokers[2].stderr_path).read_text().count("may not act as a broker") >= 1


def test_a_topic_config_an_acl_and_a_user_changed_across_a_session_expiry_take_effect(secure: SecureCluster) -> None:
    """A broker's ZooKeeper session expires for real (the broker is stopped past its session
    timeout); a topic config, an ACL and a SCRAM user are changed while it is away, and again
    once it is back. Each takes effect on that broker, and no task of its dies unheard of."""
    cluster = secure.cluster
    victim = next(b for b in (3, 2, 1) if b != cluster.controller_id())
    topic = "across-expiry"
    _wait(secure.admin().create_topics([NewTopic(topic, 3, 1)]))  # one partition on each broker
    cluster.wait_for_leaders(topic, 3)
    (led,) = [index for index, p in cluster.partitions(topic).items() if p.leader_id == victim]
    zk = KazooClient(hosts=cluster.zookeeper.connect + CHROOT)
    zk.start(timeout=10)
    registration = f"/brokers/ids/{victim}"
    bob = {"bootstrap.servers": secure.internal(victim), "acks": "all", "retries": 0, "message.timeout.ms": 3000,
           **secure.sasl("bob", "bob-secret")}

    def produced(size: int) -> str | None:
        """The error of one record of ``size`` bytes that bob writes through the victim (None: written)."""
        outcome: list[object] = []
        producer = confluent_kafka.Producer(bob)
        producer.produce(topic, b"x" * size, partition=led, on_delivery=lambda err, _msg: outcome.append(err))
        producer.flush(10)
        return "no answer" if not outcome else None if outcome[0] is None else str(outcome[0])

    def set_max_message_bytes(value: int) -> None:
        _wait(secure.admin().incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("max.message.bytes", str(value), incremental_operation=AlterConfigOpType.SET)])]))

    try:
        cluster.pause(victim)
        try:
            wait_until(lambda: zk.exists(registration) is None, 30, interval=0.1,
                       what=f"broker {victim}'s session expired")
            set_max_message_bytes(1000)
            _wait(secure.admin().alter_user_scram_credentials([UserScramCredentialUpsertion(
                "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bob-secret")]))
            _wait(secure.admin().create_acls([AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                                                         "User:bob", "*", AclOperation.WRITE,
                                                         AclPermissionType.ALLOW)]))
        finally:
            cluster.resume(victim)
        wait_until(lambda: zk.exists(registration) is not None, 30, interval=0.1,
                   what=f"broker {victim} registered again")
        # What changed while it was away: bob logs in and writes (his credentials and his ACL),
        # User:ANONYMOUS no longer sees the topic (an ACL names it now), and the topic takes no
        # record over 1000 bytes.
        wait_until(lambda: produced(100) is None, 15, interval=0.1, what=f"bob writing through broker {victim}")

        def hidden() -> bool:
            with KafkaWire(cluster.brokers[victim].address) as wire:
                return topic not in [t.name for t in wire.metadata(None).topics]
        wait_until(hidden, 15, interval=0.1, what=f"the topic hidden from ANONYMOUS on broker {victim}")
        refused = wait_until(lambda: produced(5000), 15, interval=0.1,
                             what=f"max.message.bytes=1000 in force on broker {victim}")
        assert "MSG_SIZE_TOO_LARGE" in refused, refused
        # And what changes after it is back.
        set_max_message_bytes(100_000)
        wait_until(lambda: produced(5000) is None, 15, interval=0.1,
                   what=f"max.message.bytes=100000 in force on broker {victim}")
    finally:
        zk.stop()
        zk.close()
    logged = Path(cluster.brokers[victim].stderr_path).read_text()
    assert "ZooKeeper session expired" in logged
    assert "was never retrieved" not in logged, logged[-6000:]
    # Nothing read in the session that was gone: a controller event failing on it read as a fault.
    assert "controller event failed" not in logged, logged[-6000:]
