"""SASL with real clients: PLAIN (users of the listener's JAAS config) and SCRAM-SHA-256/512
(users created, changed and deleted with KIP-554's APIs by confluent-kafka's and kafka-python's
admin clients) over SASL_PLAINTEXT and SASL_SSL, with confluent-kafka, kafka-python and kcat; a
wrong password is refused (and counted) while other connections go on; nothing but the handshake
passes before authentication; sessions re-authenticate (KIP-368) or are closed; a fuzzed exchange
never authenticates and never takes the broker down."""

from __future__ import annotations

import concurrent.futures
import json
import random
import re
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaAdminClient, KafkaProducer
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from minikafka.security.sasl import SaslLogin
from tests.integration.broker_process import HOST, BrokerProcess, KafkaWire, free_port, wait_until
from tests.integration.clients import (
    confluent_consume,
    confluent_produce,
    kafka_python_consume,
)
from tests.integration.security import (
    PLAIN_MODULE,
    Certs,
    confluent_refusal,
    confluent_sasl,
    jaas,
    kafka_python_sasl,
    kcat_args,
)

pytestmark = pytest.mark.integration
PLAIN_USERS = {"alice": "alice-secret", "admin": "admin-secret"}
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
REAUTH_MS = 1500


class SaslBroker:
    def __init__(self, broker: BrokerProcess, certs: Certs, ports: dict[str, int]) -> None:
        self.broker, self.certs = broker, certs
        self.sasl = f"{HOST}:{ports['SASL_PLAINTEXT']}"
        self.sasl_ssl = f"{HOST}:{ports['SASL_SSL']}"
        self.reauth = f"{HOST}:{ports['REAUTH']}"

    def address(self, bootstrap: str) -> tuple[str, int]:
        host, port = bootstrap.rsplit(":", 1)
        return host, int(port)

    def counter(self, name: str, listener: str, mechanism: str) -> float:
        pattern = rf'^minikafka_{name}_total\{{listener="{listener}",mechanism="{mechanism}"\}} (\S+)$'
        found = re.search(pattern, self.broker.metrics_text(), re.M)
        return float(found.group(1)) if found else 0.0


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    root = tmp_path_factory.mktemp("sasl")
    certs = Certs(root / "certs").make("broker")
    ports = {name: free_port() for name in ("SASL_PLAINTEXT", "SASL_SSL", "REAUTH")}
    plain = jaas(PLAIN_MODULE, **{f"user_{u}": p for u, p in PLAIN_USERS.items()})
    broker = BrokerProcess(root / "broker", overrides={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
                                          "REAUTH:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": MECHANISMS,
        "ssl.keystore.location": certs.keystore("broker"),
        **{f"listener.name.{name.lower()}.plain.sasl.jaas.config": plain for name in ports},
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
    })
    broker.overrides["listeners"] += "".join(f",{name}://{HOST}:{port}" for name, port in ports.items())
    broker.start()
    try:
        yield SaslBroker(broker, certs, ports)
    finally:
        broker.close()


def _records(tag: str, count: int = 100) -> list[tuple[bytes, bytes]]:
    return [(f"{tag}-{i}".encode(), f"{tag} {i} ".encode() * 10) for i in range(count)]


def _round_trip(read: list, sent: list[tuple[bytes, bytes]], acked: list[tuple[int, int]]) -> None:
    assert sorted((r.offset, r.key, r.value) for r in read) == sorted(
        (o, k, v) for (k, v), (_, o) in zip(sent, acked, strict=True))


def test_plain_with_every_client(sasl: SaslBroker) -> None:
    sent = _records("plain")
    acked = confluent_produce(sasl.sasl_ssl, "plain-orders", sent,
                              **confluent_sasl("PLAIN", "alice", "alice-secret", sasl.certs))
    read = kafka_python_consume(sasl.sasl, "plain-orders", [0], **kafka_python_sasl("PLAIN", "alice", "alice-secret"))
    _round_trip(read, sent, acked)
    if shutil.which("kcat"):
        listing = subprocess.run(["kcat", "-b", sasl.sasl, *kcat_args(confluent_sasl("PLAIN", "alice", "alice-secret")),
                                  "-L", "-t", "plain-orders"], capture_output=True, text=True, timeout=30)
        assert "1 partitions" in listing.stdout, listing.stderr


def _upsert(admin: AdminClient, user: str, mechanism: ScramMechanism, password: str, iterations: int = 4096) -> None:
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism, iterations), password.encode())])
    futures[user].result(20)


def test_scram_users_made_with_the_admin_apis_log_in_with_every_client(sasl: SaslBroker) -> None:
    admin = AdminClient({"bootstrap.servers": sasl.broker.bootstrap})
    _upsert(admin, "sam", ScramMechanism.SCRAM_SHA_256, "sam-secret", 8192)
    _upsert(admin, "sue", ScramMechanism.SCRAM_SHA_512, "sue-secret")
    described = {user: future.result(20)
                 for user, future in admin.describe_user_scram_credentials(["sam", "sue"]).items()}
    assert [(i.mechanism, i.iterations) for i in described["sam"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)]
    assert [(i.mechanism, i.iterations) for i in described["sue"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 4096)]
    with pytest.raises(confluent_kafka.KafkaException, match="RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(20)

    sent = _records("scram")
    acked = confluent_produce(sasl.sasl_ssl, "scram-orders", sent,
                              **confluent_sasl("SCRAM-SHA-256", "sam", "sam-secret", sasl.certs))
    read = kafka_python_consume(sasl.sasl, "scram-orders", [0],
                                **kafka_python_sasl("SCRAM-SHA-512", "sue", "sue-secret"))
    _round_trip(read, sent, acked)
    if shutil.which("kcat"):
        listing = subprocess.run(["kcat", "-b", sasl.sasl_ssl, *kcat_args(confluent_sasl(
            "SCRAM-SHA-512", "sue", "sue-secret", sasl.certs)), "-L"], capture_output=True, text=True, timeout=30)
        assert "scram-orders" in listing.stdout, listing.stderr

    # Stored salted and hashed, in Kafka's form, never the password.
    for log_dir in sasl.broker.log_dirs:
        text = (log_dir / "minikafka-metadata.json").read_text()
        assert "sam-secret" not in text and "sue-secret" not in text
        users = json.loads(text)["users"]
        assert users["sam"]["SCRAM-SHA-256"].startswith("salt=") and "stored_key=" in users["sam"]["SCRAM-SHA-256"]

    # A changed password: the old one is refused, the new one works; a deleted credential is refused.
    kp_admin = KafkaAdminClient(bootstrap_servers=sasl.broker.bootstrap)
    try:
        from kafka.admin import ScramMechanism as KpMechanism
        from kafka.admin import UserScramCredentialDeletion as KpDeletion
        from kafka.admin import UserScramCredentialUpsertion as KpUpsertion

        assert kp_admin.alter_user_scram_credentials([KpUpsertion("sam", KpMechanism.SCRAM_SHA_256, "new-secret")]) \
            == {"sam": None}
        confluent_refusal(sasl.sasl, confluent_sasl("SCRAM-SHA-256", "sam", "sam-secret"))
        confluent_produce(sasl.sasl, "scram-orders", [(b"k", b"new password")],
                          **confluent_sasl("SCRAM-SHA-256", "sam", "new-secret"))
        assert kp_admin.alter_user_scram_credentials([KpDeletion("sue", KpMechanism.SCRAM_SHA_512)]) == {"sue": None}
    finally:
        kp_admin.close()
    confluent_refusal(sasl.sasl, confluent_sasl("SCRAM-SHA-512", "sue", "sue-secret"))
    futures = admin.alter_user_scram_credentials([UserScramCredentialDeletion("sue", ScramMechanism.SCRAM_SHA_512)])
    with pytest.raises(confluent_kafka.KafkaException, match="does not exist"):
        futures["sue"].result(20)


def test_a_wrong_password_is_refused_counted_and_the_others_go_on(sasl: SaslBroker) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": sasl.sasl,
                                        **confluent_sasl("PLAIN", "alice", "alice-secret")})
    try:
        producer.produce("goes-on", b"before")
        assert producer.flush(30) == 0
        before = sasl.counter("failed_authentications", "SASL_PLAINTEXT", "PLAIN")
        error = confluent_refusal(sasl.sasl, confluent_sasl("PLAIN", "alice", "wrong"))
        assert "Authentication failed" in error
        error = confluent_refusal(sasl.sasl, confluent_sasl("PLAIN", "mallory", "alice-secret"))
        assert "Authentication failed" in error
        assert sasl.counter("failed_authentications", "SASL_PLAINTEXT", "PLAIN") >= before + 2
        producer.produce("goes-on", b"after")
        assert producer.flush(30) == 0
    finally:
        producer.flush(5)
    assert [r.value for r in confluent_consume(sasl.broker.bootstrap, "goes-on", [0])] == [b"before", b"after"]


def _closed(wire: KafkaWire) -> bool:
    try:
        wire.metadata([])
    except (ConnectionError, OSError, ValueError, struct.error):
        return True
    return False


def _authenticate(wire: KafkaWire, mechanism: str, user: str, password: str) -> int:
    """A v1 handshake and SaslAuthenticate v1 exchange; the session lifetime the broker gave."""
    assert wire.request(SaslHandshakeRequest(mechanism=mechanism), 1, SaslHandshakeResponse).error_code == 0
    tokens = SaslLogin(mechanism, user, password).tokens()
    token: bytes | None = tokens.first()
    lifetime = 0
    while token is not None:
        answer = wire.request(SaslAuthenticateRequest(auth_bytes=token), 1, SaslAuthenticateResponse)
        assert answer.error_code == 0, answer.error_message
        lifetime = answer.session_lifetime_ms
        token = tokens.next(answer.auth_bytes)
    return lifetime


def test_nothing_but_the_handshake_passes_before_authentication(sasl: SaslBroker) -> None:
    with KafkaWire(sasl.address(sasl.sasl)) as wire:
        assert wire.api_versions().error_code == 0
        assert _closed(wire)
    with KafkaWire(sasl.address(sasl.sasl)) as wire:  # a frame over sasl.server.max.receive.size
        wire.send_raw(struct.pack(">i", 600_000) + b"\0" * 1024)
        with pytest.raises((ConnectionError, OSError)):
            wire.recv_frame()
    with KafkaWire(sasl.address(sasl.sasl)) as wire:  # v0: bare tokens after the handshake
        assert wire.request(SaslHandshakeRequest(mechanism="PLAIN"), 0, SaslHandshakeResponse).error_code == 0
        wire.send_raw(struct.pack(">i", 19) + b"\0alice\0alice-secret")
        assert wire.recv_exactly(4) == b"\0\0\0\0"
        assert wire.metadata([]).brokers
    with KafkaWire(sasl.address(sasl.sasl)) as wire:
        _authenticate(wire, "PLAIN", "admin", "admin-secret")
        assert wire.metadata([]).brokers


def test_sessions_re_authenticate_or_are_closed(sasl: SaslBroker) -> None:
    """kafka-python and confluent-kafka re-authenticate on their connections (KIP-368) and go on;
    a client that does not is closed at its next request once its session expired."""
    authentications = sasl.counter("authentications", "REAUTH", "PLAIN")
    producer = KafkaProducer(bootstrap_servers=sasl.reauth, **kafka_python_sasl("PLAIN", "alice", "alice-secret"))
    confluent = confluent_kafka.Producer({"bootstrap.servers": sasl.reauth,
                                         **confluent_sasl("PLAIN", "alice", "alice-secret")})
    try:
        deadline = time.monotonic() + 2.5 * REAUTH_MS / 1000
        sent = 0
        while time.monotonic() < deadline:
            producer.send("reauth", b"kafka-python %d" % sent).get(timeout=10)
            confluent.produce("reauth", b"confluent %d" % sent)
            assert confluent.flush(10) == 0
            sent += 1
            time.sleep(0.05)
    finally:
        producer.close(10)
        confluent.flush(5)
    # Each client connection authenticated at least three times (once and two re-authentications).
    assert sasl.counter("authentications", "REAUTH", "PLAIN") >= authentications + 6
    assert len(confluent_consume(sasl.broker.bootstrap, "reauth", [0])) == 2 * sent
    with KafkaWire(sasl.address(sasl.reauth)) as wire:
        assert _authenticate(wire, "PLAIN", "alice", "alice-secret") == REAUTH_MS
        assert wire.metadata([]).brokers
        time.sleep(REAUTH_MS / 1000 + 0.1)  # the session's lifetime passing is the point here
        assert _closed(wire)


def _fuzzed_exchange(address: tuple[str, int], seed: int) -> bool:
    """One random SASL exchange; True if the broker then served a Metadata request."""
    rng = random.Random(seed)
    mechanism = rng.choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "", "PLAIN\0x"])
    valid = {"PLAIN": b"\0alice\0alice-secret"}.get(mechanism, b"n,,n=sam,r=" + bytes(rng.randrange(33, 127)
                                                                                      for _ in range(12)))
    try:
        with KafkaWire(address, timeout=5) as wire:
            version = rng.choice([0, 1])
            handshake = wire.request(SaslHandshakeRequest(mechanism=mechanism), version, SaslHandshakeResponse)
            if handshake.error_code != 0:
                return not _closed(wire)
            for _ in range(rng.randint(1, 3)):
                token = bytearray(valid)
                for _ in range(rng.randint(1, 4)):
                    if token and rng.random() < 0.7:
                        token[rng.randrange(len(token))] = rng.randrange(256)
                    else:
                        token += bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
                if mechanism == "PLAIN" and bytes(token) == valid:
                    token += b"x"
                if version == 0:
                    wire.send_raw(struct.pack(">i", len(token)) + bytes(token))
                    wire.recv_frame()
                else:
                    answer = wire.request(SaslAuthenticateRequest(auth_bytes=bytes(token)), 1,
                                          SaslAuthenticateResponse)
                    if answer.error_code != 0:
                        break
            return not _closed(wire)
    except (ConnectionError, OSError, ValueError, struct.error):
        return False


def test_a_fuzzed_sasl_exchange_never_authenticates(sasl: SaslBroker) -> None:
    address = sasl.address(sasl.sasl)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        authenticated = [seed for seed, served in zip(range(200), pool.map(
            lambda seed: _fuzzed_exchange(address, seed), range(200)), strict=True) if served]
    assert authenticated == []
    assert sasl.broker.is_running()
    with KafkaWire(address) as wire:
        _authenticate(wire, "PLAIN", "alice", "alice-secret")
        assert wire.metadata([]).brokers
    wait_until(lambda: "Traceback" not in Path(sasl.broker.stderr_path).read_text(), 1, what="no traceback")


def test_the_tools_reach_a_secured_listener_with_a_command_config(sasl: SaslBroker, tmp_path: Path) -> None:
    """minikafka configs (KIP-554 through a broker), ping and log-dirs with Kafka's client keys."""
    config = tmp_path / "admin.properties"
    config.write_text(f"security.protocol=SASL_SSL\nssl.truststore.location={sasl.certs.ca}\n"
                      "sasl.mechanism=PLAIN\nsasl.jaas.config=" + jaas(PLAIN_MODULE, username="admin",
                                                                        password="admin-secret") + "\n")

    def tool(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "minikafka", *args], capture_output=True, text=True,
                              timeout=60)

    made = tool("configs", "--bootstrap-server", sasl.sasl_ssl, "--command-config", str(config), "--entity-type",
                "users", "--entity-name", "carol", "--alter", "--add-config", "SCRAM-SHA-512=[password=carol-secret]")
    assert made.returncode == 0, made.stderr
    described = tool("configs", "--bootstrap-server", sasl.sasl_ssl, "--command-config", str(config),
                     "--entity-type", "users", "--entity-name", "carol", "--describe")
    assert "SCRAM-SHA-512=iterations=4096" in described.stdout, described.stderr
    confluent_produce(sasl.sasl, "tools", [(b"k", b"from carol")], **confluent_sasl("SCRAM-SHA-512", "carol",
                                                                                    "carol-secret"))
    assert tool("ping", "--bootstrap-server", sasl.sasl_ssl, "--command-config", str(config)).returncode == 0
    assert tool("ping", "--bootstrap-server", sasl.sasl_ssl).returncode == 1  # no TLS: no answer
    dirs = tool("log-dirs", "--bootstrap-server", sasl.sasl_ssl, "--command-config", str(config), "--describe")
    assert dirs.returncode == 0 and "tools" in dirs.stdout, dirs.stderr
    config.write_text(config.read_text().replace("admin-secret", "wrong"))
    refused = tool("ping", "--bootstrap-server", sasl.sasl_ssl, "--command-config", str(config))
    assert refused.returncode == 4 and "Authentication failed" in refused.stderr  # its own exit code
    bare = tool("ping", "--bootstrap-server", sasl.sasl_ssl)
    assert "a TLS listener (SSL, SASL_SSL) needs security.protocol and ssl.truststore.location" in bare.stderr
