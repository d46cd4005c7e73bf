"""ACL authorization on the embedded broker with real clients, Kafka's AclAuthorizer keys and
APIs: a user without ACLs gets *_AUTHORIZATION_FAILED on produce, fetch, group join, create and
delete topic, alter configs and reassignments, and sees no topic in Metadata; granted (by a super
user, with confluent-kafka's ACL APIs) it succeeds; a deny beats an allow; a TLS client's principal
is its mapped certificate subject; ACLs survive a restart."""

from __future__ import annotations

from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kafka_errors
from kafka.admin import ACL, ACLOperation, ACLPermissionType, ConfigResource, ConfigResourceType, NewTopic
from kafka.admin import ResourcePattern as KpResourcePattern
from kafka.admin import ResourceType as KpResourceType

from tests.integration.broker_process import HOST, BrokerProcess, KafkaWire, free_port
from tests.integration.clients import confluent_consume, kafka_python_consume
from tests.integration.security import (
    PLAIN_MODULE,
    Certs,
    confluent_sasl,
    confluent_tls,
    jaas,
    kafka_python_sasl,
)

pytestmark = pytest.mark.integration
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
TOPIC = "secured"


class AclBroker:
    def __init__(self, broker: BrokerProcess, certs: Certs, sasl_port: int, mtls_port: int) -> None:
        self.broker, self.certs = broker, certs
        self.sasl = f"{HOST}:{sasl_port}"
        self.mtls = f"{HOST}:{mtls_port}"
        self._admin = AdminClient({"bootstrap.servers": self.sasl, **confluent_sasl("PLAIN", "admin", "admin-secret")})

    def admin(self) -> AdminClient:
        """The super user's admin client (kept: its futures die with it)."""
        return self._admin

    def alice(self) -> dict[str, object]:
        return {"bootstrap_servers": self.sasl, **kafka_python_sasl("PLAIN", "alice", "alice-secret"),
                "request_timeout_ms": 10_000}

    def grant(self, *bindings: AclBinding) -> None:
        for future in self.admin().create_acls(list(bindings)).values():
            future.result(20)

    def revoke(self, *filters: AclBindingFilter) -> list[AclBinding]:
        deleted: list[AclBinding] = []
        for future in self.admin().delete_acls(list(filters)).values():
            deleted += future.result(20)
        return deleted


@pytest.fixture(scope="module")
def acls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    root = tmp_path_factory.mktemp("acls")
    certs = Certs(root / "certs").make("broker", "client")
    sasl_port, mtls_port = free_port(), free_port()
    broker = BrokerProcess(root / "broker", overrides={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,MTLS:SSL",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            jaas(PLAIN_MODULE, **{f"user_{u}": p for u, p in USERS.items()}),
        "ssl.keystore.location": certs.keystore("broker"),
        "ssl.truststore.location": certs.ca,
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*)$/tls-$1/L,DEFAULT",
        "offsets.topic.num.partitions": "2",
        "group.initial.rebalance.delay.ms": "0",
    })
    broker.overrides["listeners"] += f",SASL_PLAINTEXT://{HOST}:{sasl_port},MTLS://{HOST}:{mtls_port}"
    broker.start()
    try:
        made = AclBroker(broker, certs, sasl_port, mtls_port)
        for future in made.admin().create_topics([confluent_kafka.admin.NewTopic(TOPIC, 1, 1)]).values():
            future.result(20)
        yield made
    finally:
        broker.close()


def topic_acl(operation: AclOperation, principal: str = "User:alice", name: str = TOPIC,
              permission: AclPermissionType = AclPermissionType.ALLOW,
              pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", operation, permission)


def _produce(acls: AclBroker, topic: str = TOPIC) -> None:
    producer = KafkaProducer(**acls.alice(), max_block_ms=10_000, retries=0, enable_idempotence=False)
    try:
        producer.send(topic, b"from alice").get(timeout=20)
    finally:
        producer.close(5)


def _join(acls: AclBroker, group: str) -> None:
    consumer = KafkaConsumer(TOPIC, group_id=group, auto_offset_reset="earliest", consumer_timeout_ms=15_000,
                             **acls.alice())
    try:
        assert next(iter(consumer)).value is not None
    finally:
        consumer.close()


def test_a_user_without_acls_is_refused_everything_and_sees_nothing(acls: AclBroker) -> None:
    with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
        _produce(acls)
    with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
        kafka_python_consume(acls.sasl, TOPIC, [0], timeout=10, **kafka_python_sasl("PLAIN", "alice", "alice-secret"))
    with pytest.raises(kafka_errors.GroupAuthorizationFailedError):
        _join(acls, "alice-group")
    admin = KafkaAdminClient(**acls.alice())
    try:
        assert TOPIC not in admin.list_topics()
        with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
            admin.create_topics([NewTopic("alice-new", 1, 1)])
        with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
            admin.delete_topics([TOPIC])
        denied = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, {"retention.ms": "1000"})],
                                     raise_on_unknown=False)
        assert "TopicAuthorizationFailedError" in denied["topic"][TOPIC]
        denied = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1", {"log.retention.ms": "1000"})],
                                     raise_on_unknown=False)
        assert "ClusterAuthorizationFailedError" in denied["broker"]["1"]
        with pytest.raises(kafka_errors.ClusterAuthorizationFailedError):
            admin.alter_partition_reassignments({TopicPartition(TOPIC, 0): [1]})
        # CreateAcls itself needs ALTER on the cluster.
        created = admin.create_acls([ACL("User:alice", "*", ACLOperation.ALL, ACLPermissionType.ALLOW,
                                         KpResourcePattern(KpResourceType.TOPIC, TOPIC))])
        assert created["failed"] and created["failed"][0] is kafka_errors.ClusterAuthorizationFailedError
    finally:
        admin.close()
    # An unauthenticated PLAINTEXT client is User:ANONYMOUS: no topic for it either.
    with KafkaWire(acls.broker.address) as wire:
        assert [t.name for t in wire.metadata(None).topics] == []


def test_granted_acls_let_the_user_in(acls: AclBroker) -> None:
    acls.grant(topic_acl(AclOperation.WRITE), topic_acl(AclOperation.READ),
               AclBinding(ResourceType.GROUP, "alice-", ResourcePatternType.PREFIXED, "User:alice", "*",
                          AclOperation.READ, AclPermissionType.ALLOW),
               topic_acl(AclOperation.CREATE, name="alice-", pattern=ResourcePatternType.PREFIXED),
               topic_acl(AclOperation.DELETE, name="alice-", pattern=ResourcePatternType.PREFIXED),
               topic_acl(AclOperation.ALTER_CONFIGS),
               AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                          AclOperation.ALTER, AclPermissionType.ALLOW))
    _produce(acls)
    assert [r.value for r in kafka_python_consume(acls.sasl, TOPIC, [0], **kafka_python_sasl(
        "PLAIN", "alice", "alice-secret"))][-1] == b"from alice"
    _join(acls, "alice-group")
    admin = KafkaAdminClient(**acls.alice())
    try:
        assert TOPIC in admin.list_topics()
        admin.create_topics([NewTopic("alice-new", 1, 1)])
        admin.delete_topics(["alice-new"])
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, {"retention.ms": "86400000"})])
        assert admin.alter_partition_reassignments({TopicPartition(TOPIC, 0): [1]}) == {
            TopicPartition(TOPIC, 0): None}
    finally:
        admin.close()


def test_a_deny_beats_an_allow_and_acls_are_described_and_deleted(acls: AclBroker) -> None:
    acls.grant(topic_acl(AclOperation.WRITE, principal="User:*"), topic_acl(AclOperation.READ, principal="User:*"))
    deny = topic_acl(AclOperation.WRITE, name="sec", permission=AclPermissionType.DENY,
                     pattern=ResourcePatternType.PREFIXED)
    acls.grant(deny)
    with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
        _produce(acls)
    kafka_python_consume(acls.sasl, TOPIC, [0], **kafka_python_sasl("PLAIN", "alice", "alice-secret"))
    matching = AclBindingFilter(ResourceType.TOPIC, TOPIC, ResourcePatternType.MATCH, "User:alice", None,
                                AclOperation.ANY, AclPermissionType.DENY)
    assert acls.admin().describe_acls(matching).result(20) == [deny]
    assert acls.revoke(matching) == [deny]
    _produce(acls)


def test_a_tls_client_is_its_mapped_certificate_subject(acls: AclBroker) -> None:
    tls = confluent_tls(acls.certs, "client")
    with pytest.raises((TimeoutError, RuntimeError, confluent_kafka.KafkaException)):
        confluent_consume(acls.mtls, TOPIC, [0], timeout=5, **tls)
    acls.grant(topic_acl(AclOperation.READ, principal="User:tls-client"),
               AclBinding(ResourceType.GROUP, "tests-never-committed", ResourcePatternType.LITERAL,
                          "User:tls-client", "*", AclOperation.READ, AclPermissionType.ALLOW))
    assert confluent_consume(acls.mtls, TOPIC, [0], **tls)


def test_acls_survive_a_restart(acls: AclBroker) -> None:
    acls.grant(topic_acl(AclOperation.WRITE, name="restart-"), topic_acl(AclOperation.CREATE, name="restart-"))
    acls.broker.restart()
    _produce(acls, "restart-")
    described = acls.admin().describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY,
        AclPermissionType.ANY)).result(20)
    assert topic_acl(AclOperation.WRITE, name="restart-") in described


def test_a_transactional_producer_needs_write_on_its_transactional_id(acls: AclBroker) -> None:
    def producer() -> confluent_kafka.Producer:
        return confluent_kafka.Producer({"bootstrap.servers": acls.sasl, "transactional.id": "alice-tx",
                                         "transaction.timeout.ms": 10_000,
                                         **confluent_sasl("PLAIN", "alice", "alice-secret")})

    with pytest.raises(confluent_kafka.KafkaException, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
        producer().init_transactions(10)
    acls.grant(topic_acl(AclOperation.WRITE),
               AclBinding(ResourceType.TRANSACTIONAL_ID, "alice-", ResourcePatternType.PREFIXED, "User:alice", "*",
                          AclOperation.WRITE, AclPermissionType.ALLOW))
    granted = producer()
    granted.init_transactions(20)
    granted.begin_transaction()
    granted.produce(TOPIC, b"in a transaction")
    granted.commit_transaction(20)
