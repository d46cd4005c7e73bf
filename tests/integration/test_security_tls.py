"""TLS listeners with real clients: confluent-kafka, kafka-python and kcat over SSL with and
without client certificates; an untrusted or expired certificate, a missing one where it is
required, and a plaintext client on a TLS port are refused, each logged once, while the other
connections go on."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from tests.integration.broker_process import HOST, BrokerProcess, KafkaWire, free_port, wait_until
from tests.integration.clients import (
    confluent_consume,
    confluent_produce,
    kafka_python_consume,
    kafka_python_produce,
)
from tests.integration.security import Certs, confluent_refusal, confluent_tls, kafka_python_tls, kcat_args

pytestmark = pytest.mark.integration


class TlsBroker:
    def __init__(self, broker: BrokerProcess, certs: Certs, ports: dict[str, int]) -> None:
        self.broker, self.certs = broker, certs
        self.tls = f"{HOST}:{ports['SSL']}"  # SSL, no client certificate asked for
        self.mtls = f"{HOST}:{ports['MTLS']}"  # SSL with ssl.client.auth=required
        self.inline = f"{HOST}:{ports['INLINE']}"  # key and trust stores given inline, TLS 1.2 only

    def log(self) -> str:
        return Path(self.broker.stderr_path).read_text()


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    root = tmp_path_factory.mktemp("tls")
    certs = Certs(root / "certs").make("broker", "client")
    Certs(root / "certs").make("expired", days=0)
    Certs(root / "other-ca").make("stranger")
    ports = {name: free_port() for name in ("SSL", "MTLS", "INLINE")}
    broker = BrokerProcess(root / "broker", overrides={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,INLINE:SSL",
        "ssl.keystore.location": certs.keystore("broker"),
        "ssl.truststore.location": certs.ca,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.inline.ssl.keystore.location": "",
        "listener.name.inline.ssl.keystore.certificate.chain": Path(certs.cert("broker")).read_text(),
        "listener.name.inline.ssl.keystore.key": Path(certs.key("broker")).read_text(),
        "listener.name.inline.ssl.truststore.location": "",
        "listener.name.inline.ssl.truststore.certificates": Path(certs.ca).read_text(),
        "listener.name.inline.ssl.client.auth": "required",
        "listener.name.inline.ssl.enabled.protocols": "TLSv1.2",
        "listener.name.inline.ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    })
    broker.overrides["listeners"] += "".join(f",{name}://{HOST}:{port}" for name, port in ports.items())
    broker.start()
    try:
        yield TlsBroker(broker, certs, ports)
    finally:
        broker.close()


def _records(tag: str, count: int = 200) -> list[tuple[bytes, bytes]]:
    return [(f"{tag}-{i}".encode(), f"{tag} {i} ".encode() * 20) for i in range(count)]


def test_clients_produce_and_consume_over_tls_without_a_client_certificate(tls: TlsBroker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=tls.tls, **kafka_python_tls(tls.certs))
    try:
        admin.create_topics({"tls-orders": {"num_partitions": 2, "replication_factor": 1}})
    finally:
        admin.close()
    sent = _records("confluent")
    acked = confluent_produce(tls.tls, "tls-orders", sent, **confluent_tls(tls.certs))
    read = kafka_python_consume(tls.tls, "tls-orders", [0, 1], **kafka_python_tls(tls.certs))
    assert sorted((r.partition, r.offset, r.key, r.value) for r in read) == sorted(
        (p, o, k, v) for (k, v), (p, o) in zip(sent, acked, strict=True))
    if shutil.which("kcat"):
        listing = subprocess.run(["kcat", "-b", tls.tls, *kcat_args(confluent_tls(tls.certs)), "-L", "-t",
                                  "tls-orders"], capture_output=True, text=True, timeout=30)
        assert "2 partitions" in listing.stdout, listing.stderr


def test_a_required_client_certificate(tls: TlsBroker) -> None:
    sent = _records("mtls", 50)
    acked = kafka_python_produce(tls.mtls, "mtls-orders", sent, **kafka_python_tls(tls.certs, "client"))
    read = confluent_consume(tls.mtls, "mtls-orders", [0], **confluent_tls(tls.certs, "client"))
    assert [(r.offset, r.value) for r in read] == [(o, v) for (_, v), (_, o) in zip(sent, acked, strict=True)]
    confluent_refusal(tls.mtls, confluent_tls(tls.certs))
    wait_until(lambda: "client certificate missing: this listener requires one (ssl.client.auth=required)"
               in tls.log(), 10, what="the missing certificate logged in words")


@pytest.mark.parametrize("who", ["expired", "stranger"])
def test_an_expired_or_untrusted_client_certificate_is_refused(tls: TlsBroker, who: str) -> None:
    certs = tls.certs if who == "expired" else Certs(tls.certs.dir.parent / "other-ca")
    before = tls.log().count("client certificate refused")
    confluent_refusal(tls.mtls, {**confluent_tls(tls.certs), "ssl.certificate.location": certs.cert(who),
                                 "ssl.key.location": certs.key(who)})
    reason = "certificate has expired" if who == "expired" else "unable to get local issuer certificate"
    wait_until(lambda: tls.log().count("client certificate refused") > before and reason in tls.log(), 10,
               what=f"the {who} certificate's refusal logged")


def test_a_plaintext_client_on_a_tls_port_is_closed_and_the_others_go_on(tls: TlsBroker) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": tls.tls, **confluent_tls(tls.certs)})
    try:
        producer.produce("tls-goes-on", b"before")
        assert producer.flush(30) == 0
        before = tls.log().count("not a TLS client")
        for _ in range(3):
            with KafkaWire(tls.broker.address[:1] + (int(tls.tls.rsplit(":", 1)[1]),), timeout=10) as wire:
                with pytest.raises((ConnectionError, OSError, ValueError)):
                    wire.api_versions()
        wait_until(lambda: tls.log().count("not a TLS client") == before + 3, 10, what="three refusals logged")
        producer.produce("tls-goes-on", b"after")
        assert producer.flush(30) == 0
    finally:
        producer.flush(5)
    read = confluent_consume(tls.tls, "tls-goes-on", [0], **confluent_tls(tls.certs))
    assert [r.value for r in read] == [b"before", b"after"]
    assert tls.broker.is_running()


def test_key_and_trust_stores_given_inline_and_tls_settings_per_listener(tls: TlsBroker) -> None:
    """ssl.keystore.certificate.chain / ssl.keystore.key and ssl.truststore.certificates for one
    listener, which takes TLS 1.2 with one cipher suite only."""
    conf = {**confluent_tls(tls.certs, "client"), "ssl.cipher.suites": "ECDHE-ECDSA-AES256-GCM-SHA384"}
    acked = confluent_produce(tls.inline, "inline-orders", [(b"k", b"inline")], **conf)
    assert [r.value for r in confluent_consume(tls.inline, "inline-orders", [0], **conf)] == [b"inline"]
    assert acked == [(0, 0)]
    confluent_refusal(tls.inline, {**conf, "ssl.cipher.suites": "ECDHE-ECDSA-AES128-GCM-SHA256"})
    confluent_refusal(tls.inline, confluent_tls(tls.certs))  # no client certificate


def test_the_tools_say_what_a_tls_listener_wants(tls: TlsBroker, tmp_path: Path) -> None:
    """minikafka's tools name the missing setting: no certificate where one is required, no TLS
    on a TLS listener, an authority that does not sign the broker's certificate."""
    def ping(address: str, *settings: str) -> subprocess.CompletedProcess[str]:
        config = tmp_path / "client.properties"
        config.write_text("".join(f"{line}\n" for line in settings))
        return subprocess.run([sys.executable, "-m", "minikafka", "ping", "--bootstrap-server", address,
                               "--command-config", str(config)], capture_output=True, text=True, timeout=60)

    trusted = ("security.protocol=SSL", f"ssl.truststore.location={tls.certs.ca}")
    no_certificate = ping(tls.mtls, *trusted)
    assert no_certificate.returncode == 1, no_certificate.stderr
    assert "requires a client certificate" in no_certificate.stderr and "ssl.keystore.location" in no_certificate.stderr
    with_certificate = ping(tls.mtls, *trusted, f"ssl.keystore.location={tls.certs.keystore('client')}")
    assert with_certificate.returncode == 0, with_certificate.stderr
    plaintext = ping(tls.tls, "security.protocol=PLAINTEXT")
    assert plaintext.returncode == 1 and "a TLS listener (SSL, SASL_SSL) needs security.protocol" in plaintext.stderr
    stranger = Certs(tmp_path / "other-ca").make("nobody")
    untrusted = ping(tls.tls, "security.protocol=SSL", f"ssl.truststore.location={stranger.ca}")
    assert untrusted.returncode == 1 and "the broker's certificate is not trusted" in untrusted.stderr
