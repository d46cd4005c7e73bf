"""docker-compose.yml for real: the images built from the Dockerfile, ZooKeeper and three brokers
brought up by docker-compose with a real Docker engine, an RF 3 topic produced to with acks=all
and consumed from the host, broker-2 stopped under load with ``docker-compose stop``, nothing
acknowledged lost, and everything brought down with no container, volume or daemon left; and
docker-compose.embedded.yml, the single broker, keeping its records on its two volumes across a
new container; and docker-compose.secure.yml, the cluster with TLS, SCRAM and ACLs.

The engine here has no networking of its own, so the containers use the host's network: the tests
run the repository's compose files with their published ports removed and ``network_mode: host``
added, their ports and hosts set through the variables the files read (free ports, 127.0.0.1),
and the ZooKeeper service on the Debian stand-in image (tests/docker/engine.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from confluent_kafka.admin import NewTopic as ConfluentNewTopic
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from tests.docker.engine import PYTHON_BASE, ZOOKEEPER_BASE, DockerEngine, EngineFailed, engine_unavailable
from tests.integration.broker_process import HOST, REPO_ROOT, KafkaWire, free_port, wait_until
from tests.integration.clients import confluent_produce, kafka_python_consume
from tests.integration.security import (
    Certs,
    confluent_refusal,
    confluent_sasl,
    confluent_tls,
    kafka_python_sasl,
    kcat_args,
)
from tests.system.load import (
    ConsumerRun,
    ProducerRun,
    assert_consumed_once,
    assert_exactly_once,
    read_all,
    wait_acked,
)

pytestmark = pytest.mark.docker
IMAGE = "minikafka:compose-test"
PROJECT = "minikafka-compose-test"
TOPIC = "orders"
BROKERS = (1, 2, 3)


@contextlib.contextmanager
def phase(what: str) -> Iterator[None]:
    """Prints how long a step took (where a slow run spends its time; never asserted)."""
    started = time.monotonic()
    try:
        yield
    finally:
        print(f"docker test: {what} {time.monotonic() - started:.1f}s", flush=True)


@pytest.fixture(scope="module")
def engine() -> Iterator[DockerEngine]:
    if (why := engine_unavailable()) is not None:
        pytest.skip(why)
    made = DockerEngine(Path(tempfile.mkdtemp(prefix="minikafka-docker-")))
    try:
        with phase("engine start"):
            made.start()
    except EngineFailed as exc:
        made.close()
        pytest.skip(f"a Docker engine cannot start on this machine: {exc}")
    try:
        yield made
    finally:
        with phase("engine stop and removal"):
            made.close()


@pytest.fixture(scope="module")
def image(engine: DockerEngine) -> Iterator[str]:
    """The broker image built from the Dockerfile on the stand-in base; prints how long that took."""
    started = time.monotonic()
    build_args = ["--build-arg", f"BASE_IMAGE={PYTHON_BASE}"]
    if os.environ.get("PIP_CERT"):  # the machine reaches PyPI through a proxy with its own authority
        build_args += ["--build-arg", "PIP_CERT=/etc/ssl/certs/ca-certificates.crt"]
    with engine.importing_base_images(first=PYTHON_BASE), phase("broker image built"):
        engine.run("build", "--network", "host", *build_args, "-t", IMAGE, str(REPO_ROOT))
    print(f"docker test: base images and broker image ready in {time.monotonic() - started:.0f}s"
          f" ({engine.storage_driver} storage{' in memory' if engine.in_memory else ''})")
    yield IMAGE


class Compose:
    """docker-compose (or the compose plugin) on the test's engine, with the test's variables."""

    def __init__(self, engine: DockerEngine, file: Path, variables: dict[str, str]) -> None:
        self.engine = engine
        self.file = file
        self.logs_dir = file.parent / "container-logs"  # beside the test's other files, in its tmp dir
        self.env = {**engine.env, **variables}
        binary = shutil.which("docker-compose")
        self.command = [binary] if binary else ["docker", "compose"]

    def __call__(self, *args: str, timeout: float = 600) -> str:
        with phase(f"compose {' '.join(args)}"):
            result = subprocess.run([*self.command, "-p", PROJECT, "-f", str(self.file), *args], env=self.env,
                                    capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT)
        assert result.returncode == 0, f"compose {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
        return result.stdout + result.stderr

    def down(self) -> None:
        """Everything down, volumes too; nothing of the project may be left on the engine. Called
        from a test's ``finally``. Every service's whole log is kept first, one file per service in
        ``logs_dir`` (a container that never turned healthy says why there), and when the test
        is failing its failure names that dir; the last lines are printed too, for pytest to show."""
        failing = sys.exc_info()[1]
        with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
            print(self.keep_logs())
        if failing is not None:
            failing.add_note(f"every service's docker logs are kept in {self.logs_dir}")
        self("down", "-v", "--remove-orphans")
        assert self.engine.run("ps", "-aq").stdout.strip() == "", "containers left behind"
        assert self.engine.run("volume", "ls", "-q").stdout.strip() == "", "volumes left behind"

    def keep_logs(self, tail: int = 200) -> str:
        """Writes each service's log to ``logs_dir``; returns the last ``tail`` lines of each. Read
        with the docker CLI straight from the project's containers (found by compose's labels):
        one docker-compose command per service took about 3 s, the docker CLI a fraction of one."""
        self.logs_dir.mkdir(exist_ok=True)
        listing = self.engine.run("ps", "-a", "--filter", f"label=com.docker.compose.project={PROJECT}",
                                  "--format", '{{.Label "com.docker.compose.service"}} {{.ID}}').stdout
        logs: dict[str, str] = {}
        for service, container in (line.split() for line in listing.splitlines()):
            # One pipe for both streams keeps the container's lines in the order it wrote them.
            read = subprocess.run(["docker", "logs", container], env=self.engine.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, errors="replace", timeout=120)
            logs[service] = logs.get(service, "") + read.stdout
        tails = []
        for service, text in sorted(logs.items()):
            (self.logs_dir / f"{service}.log").write_text(text)
            tails += [f"--- {service}, last {tail} lines:", *text.splitlines()[-tail:]]
        return "\n".join(tails)


def host_network_compose(tmp: Path, file: str, zookeeper_port: int = 0,
                         environment: dict[str, str] | None = None) -> Path:
    """A compose file of the repository, run on the host's network (see the module's docstring);
    ``environment`` is added to every minikafka service."""
    document: dict[str, Any] = yaml.safe_load((REPO_ROOT / file).read_text())
    document = {key: value for key, value in document.items() if not key.startswith("x-")}
    for name, service in document["services"].items():
        service.pop("ports", None)
        service["network_mode"] = "host"
        if name != "zookeeper":
            service["environment"] = {**service.get("environment", {}), **(environment or {})}
        else:
            (tmp / "zookeeper").mkdir()
            (tmp / "zookeeper" / "zoo.cfg").write_text(
                f"tickTime=200\ninitLimit=10\nsyncLimit=5\ndataDir=/tmp/zookeeper-data\n"
                f"clientPort={zookeeper_port}\nclientPortAddress={HOST}\nadmin.enableServer=false\n"
                f"4lw.commands.whitelist=srvr\n")
            # What `zkServer.sh status` asks (srvr: serving, standalone), asked by bash itself: the
            # script starts a JVM for it, a CPU-second every check on this 2-core machine.
            srvr = f"exec 3<>/dev/tcp/{HOST}/{zookeeper_port} && echo srvr >&3 && grep -q '^Mode: standalone' <&3"
            service.update({
                "image": ZOOKEEPER_BASE, "volumes": [f"{tmp / 'zookeeper'}:/cfg:ro"],
                "command": ["/usr/share/zookeeper/bin/zkServer.sh", "start-foreground", "/cfg/zoo.cfg"],
                "healthcheck": {"test": ["CMD", "bash", "-c", srvr], "interval": "1s", "timeout": "10s",
                                "retries": 120}})
    path = tmp / f"{Path(file).stem}.host-network.json"
    path.write_text(json.dumps(document, indent=1))
    return path


@pytest.mark.timeout(1800)
def test_compose_cluster_keeps_every_acknowledged_record_when_a_broker_stops(engine: DockerEngine, image: str,
                                                                             tmp_path: Path) -> None:
    started = time.monotonic()
    zookeeper_port = free_port()
    ports = {b: (free_port(), free_port(), free_port()) for b in BROKERS}  # client, internal, metrics
    variables = {"MINIKAFKA_IMAGE": image, "ZOOKEEPER_CONNECT": f"{HOST}:{zookeeper_port}/minikafka"}
    for b, (client, internal, metrics) in ports.items():
        variables |= {f"MINIKAFKA_PORT_{b}": str(client), f"MINIKAFKA_INTERNAL_PORT_{b}": str(internal),
                      f"MINIKAFKA_METRICS_PORT_{b}": str(metrics), f"MINIKAFKA_INTERNAL_HOST_{b}": HOST}
    compose = Compose(engine, host_network_compose(tmp_path, "docker-compose.yml", zookeeper_port), variables)
    bootstrap = ",".join(f"{HOST}:{ports[b][0]}" for b in BROKERS)
    try:
        compose("up", "-d", "--no-build")
        # Every broker healthy (its HEALTHCHECK: it answers ApiVersions), all three in Metadata.
        with phase("every broker healthy"):
            wait_until(lambda: all(_health(engine, f"broker-{b}") == "healthy" for b in BROKERS), 180,
                       interval=1, what="every broker container healthy")
        wait_until(lambda: len(_metadata(ports[1][0]).brokers) == 3, 60, interval=0.5, what="three brokers")
        kcat = subprocess.run(["kcat", "-b", f"{HOST}:{ports[1][0]}", "-L"], capture_output=True, text=True,
                              timeout=30)
        assert kcat.returncode == 0 and "3 brokers:" in kcat.stdout, kcat.stdout + kcat.stderr
        broker_1 = _container(engine, "broker-1")
        assert engine.run("exec", broker_1, "id", "-un").stdout.strip() == "minikafka"
        for _, internal, metrics in ports.values():
            # Each internal listener answers from inside a container (broker-1's); each metrics port is published.
            engine.run("exec", broker_1, "minikafka", "ping", "--bootstrap-server", f"{HOST}:{internal}")
            with urllib.request.urlopen(f"http://{HOST}:{metrics}/metrics", timeout=10) as response:
                assert "kafka_log_LogManager_OfflineLogDirectoryCount 0.0" in response.read().decode()

        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.create_topics([NewTopic(TOPIC, 3, 3, topic_configs={"min.insync.replicas": "2"})])
        finally:
            admin.close()
        runs = [ProducerRun("confluent", bootstrap, TOPIC, 3).start(),
                ProducerRun("kafka-python", bootstrap, TOPIC, 3, pace_s=0.005).start()]
        consumer = ConsumerRun(bootstrap, TOPIC, 3).start()
        try:
            with phase("first acknowledgements"):
                wait_acked(runs, {}, timeout=120)
            compose("stop", "broker-2")
            with phase("acknowledged without broker-2"):
                wait_acked(runs, {r.client: len(r.acked) for r in runs}, timeout=120)
            compose("start", "broker-2")
            with phase("broker-2 back in every ISR"):
                wait_until(lambda: all(len(p.isr_nodes) == 3 for t in _metadata(ports[1][0], [TOPIC]).topics
                                       for p in t.partitions), 120, interval=0.5, what="broker-2 back in every ISR")
            with phase("acknowledged with broker-2 back"):
                wait_acked(runs, {r.client: len(r.acked) for r in runs}, timeout=120)
        finally:
            with phase("producers stopped"):
                for run in runs:
                    run.stop()
        with phase("every record read"):
            stored = read_all(bootstrap, TOPIC, 3)
        assert_exactly_once(runs, stored)
        assert_consumed_once(consumer, stored)
    finally:
        compose.down()
    print(f"docker test: the cluster's test took {time.monotonic() - started:.0f}s")


@pytest.mark.timeout(1200)
def test_secure_compose_cluster_takes_only_authenticated_authorized_clients(engine: DockerEngine, image: str,
                                                                         tmp_path: Path) -> None:
    """docker-compose.secure.yml: the certificates made with config/secure/make-certs.sh, three
    brokers on SASL_SSL (SCRAM) replicating over SASL_SSL, ACLs on. The super user admin makes a
    user and its ACLs; that user produces and reads (confluent-kafka, kafka-python, kcat) while a
    broker is stopped and started; a client without credentials is refused."""
    started = time.monotonic()
    certs = Certs(tmp_path / "secrets").make(*(f"broker-{b}" for b in BROKERS))
    zookeeper_port = free_port()
    ports = {b: (free_port(), free_port(), free_port()) for b in BROKERS}  # client, internal, metrics
    variables = {"MINIKAFKA_IMAGE": image, "ZOOKEEPER_CONNECT": f"{HOST}:{zookeeper_port}/minikafka",
                 "MINIKAFKA_SECRETS": str(certs.dir), "MINIKAFKA_ADMIN_PASSWORD": "compose-admin-secret"}
    for b, (client, internal, metrics) in ports.items():
        variables |= {f"MINIKAFKA_PORT_{b}": str(client), f"MINIKAFKA_INTERNAL_PORT_{b}": str(internal),
                      f"MINIKAFKA_METRICS_PORT_{b}": str(metrics), f"MINIKAFKA_INTERNAL_HOST_{b}": HOST}
    compose = Compose(engine, host_network_compose(tmp_path, "docker-compose.secure.yml", zookeeper_port), variables)
    bootstrap = ",".join(f"{HOST}:{ports[b][0]}" for b in BROKERS)
    admin_settings = confluent_sasl("SCRAM-SHA-512", "admin", "compose-admin-secret", certs)
    alice = confluent_sasl("SCRAM-SHA-256", "alice", "alice-secret", certs)
    try:
        compose("up", "-d", "--no-build")
        with phase("every broker healthy"):
            wait_until(lambda: all(_health(engine, f"broker-{b}") == "healthy" for b in BROKERS), 180,
                       interval=1, what="every broker container healthy")
        admin = AdminClient({"bootstrap.servers": bootstrap, **admin_settings})
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 60, interval=0.5, what="three brokers")
        for future in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret")]).values():
            future.result(30)
        grants = [AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*", operation,
                             AclPermissionType.ALLOW) for operation in (AclOperation.WRITE, AclOperation.READ)]
        grants.append(AclBinding(ResourceType.GROUP, "*", ResourcePatternType.LITERAL, "User:alice", "*",
                                 AclOperation.READ, AclPermissionType.ALLOW))
        for future in admin.create_acls(grants).values():
            future.result(30)
        for future in admin.create_topics([ConfluentNewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})
                                           ]).values():
            future.result(30)
        # Without credentials (TLS alone) a client is refused; with a wrong password too.
        anonymous = AdminClient({"bootstrap.servers": bootstrap, **confluent_tls(certs)})
        with pytest.raises(KafkaException):
            anonymous.list_topics(timeout=5)  # its Metadata request closes its connection
        confluent_refusal(bootstrap, confluent_sasl("SCRAM-SHA-256", "alice", "wrong", certs))
        acked = confluent_produce(bootstrap, TOPIC, [(b"k%d" % i, b"before %d" % i) for i in range(300)], **alice)
        compose("stop", "broker-2")
        acked += confluent_produce(bootstrap, TOPIC, [(b"k%d" % i, b"during %d" % i) for i in range(300, 600)],
                                   **alice)
        compose("start", "broker-2")
        with phase("broker-2 back in every ISR"):
            wait_until(lambda: all(len(p.isrs) == 3 for p in admin.list_topics(TOPIC, timeout=5).topics[TOPIC]
                                   .partitions.values()), 120, interval=0.5, what="broker-2 back in every ISR")
        read = kafka_python_consume(bootstrap, TOPIC, range(3), **kafka_python_sasl(
            "SCRAM-SHA-256", "alice", "alice-secret", certs))
        assert sorted((r.partition, r.offset) for r in read) == sorted(acked)
        kcat = subprocess.run(["kcat", "-b", bootstrap, *kcat_args(alice), "-C", "-t", TOPIC, "-e", "-q",
                               "-o", "beginning"], capture_output=True, text=True,
                              timeout=120)
        assert kcat.returncode == 0 and kcat.stdout.count("during") == 300, kcat.stderr[-2000:]
    finally:
        compose.down()
    print(f"docker test: the secure cluster's test took {time.monotonic() - started:.0f}s")


@pytest.mark.timeout(600)
def test_embedded_compose_keeps_its_records_on_its_two_volumes(engine: DockerEngine, image: str,
                                                              tmp_path: Path) -> None:
    port, metrics = free_port(), free_port()
    listener = f"PLAINTEXT://{HOST}:{port}"
    environment = {"KAFKA_LISTENERS": listener, "KAFKA_ADVERTISED_LISTENERS": listener,
                   "KAFKA_METRICS_PORT": str(metrics), "MINIKAFKA_HEALTHCHECK_SERVER": f"{HOST}:{port}"}
    compose = Compose(engine, host_network_compose(tmp_path, "docker-compose.embedded.yml",
                                                    environment=environment), {"MINIKAFKA_IMAGE": image})
    bootstrap = f"{HOST}:{port}"
    try:
        compose("up", "-d", "--no-build")
        with phase("the broker healthy"):
            wait_until(lambda: _health(engine, "broker") == "healthy", 120, interval=1, what="the broker healthy")
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.create_topics([NewTopic(TOPIC, 4, 1)])
        finally:
            admin.close()
        run = ProducerRun("confluent", bootstrap, TOPIC, 4).start()
        try:
            wait_acked([run], {run.client: 500}, timeout=60)
        finally:
            run.stop()
        assert not run.failed, list(run.failed.items())[:3]
        # The topic spreads over both volumes, and a new container finds it there.
        container = _container(engine, "broker")
        for log_dir in ("/var/lib/minikafka/d1", "/var/lib/minikafka/d2"):
            listing = engine.run("exec", container, "ls", log_dir).stdout.split()
            assert sum(name.startswith(f"{TOPIC}-") for name in listing) == 2, (log_dir, listing)
        compose("down")
        compose("up", "-d", "--no-build")
        assert _container(engine, "broker") != container
        with phase("the new broker healthy"):
            wait_until(lambda: _health(engine, "broker") == "healthy", 120, interval=1, what="the new broker healthy")
        assert_exactly_once([run], read_all(bootstrap, TOPIC, 4))
    finally:
        compose.down()


def _container(engine: DockerEngine, service: str) -> str:
    found = engine.run("ps", "-aq", "--filter", f"label=com.docker.compose.service={service}",
                       "--filter", f"label=com.docker.compose.project={PROJECT}").stdout.split()
    return found[0] if found else ""


def _health(engine: DockerEngine, service: str) -> str:
    container = _container(engine, service)
    if not container:
        return "missing"
    return engine.run("inspect", "--format", "{{.State.Health.Status}}", container, check=False).stdout.strip()


def _metadata(port: int, topics: list[str] | None = None) -> Any:
    with KafkaWire((HOST, port), timeout=5.0) as wire:
        return wire.metadata(topics, version=8)
