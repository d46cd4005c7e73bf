"""README's Security section as written: its certificates command, its broker settings (TLS,
SASL and ACL blocks together), its --command-config file and minikafka configs commands, and its
kcat, confluent-kafka and kafka-python client settings, against a real broker. Only the ports are
changed, to free ones."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minikafka.config.broker import read_properties
from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.security import MAKE_CERTS
from tests.readme import block_containing, code_blocks

pytestmark = pytest.mark.integration
README_PORTS = ("9092", "9093", "9094")


def _commands(block: str) -> list[list[str]]:
    """The commands of a sh block (comments dropped, continuations joined)."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [shlex.split(line.split(" #")[0]) for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def test_the_security_section_as_written(tmp_path: Path) -> None:
    [make_certs] = _commands(block_containing("sh", "config/secure/make-certs.sh secrets broker client"))
    subprocess.run([str(MAKE_CERTS), *make_certs[1:]], cwd=tmp_path, check=True, capture_output=True)
    broker = BrokerProcess(tmp_path)  # runs in tmp_path: the README's relative paths are from there
    ports = {"9092": str(broker.port), "9093": str(free_port()), "9094": str(free_port())}

    def ours(text: str) -> str:
        return re.sub(r"127\.0\.0\.1:(909[234])", lambda m: f"127.0.0.1:{ports[m.group(1)]}", text)

    tls = read_properties(ours(block_containing("properties", "ssl.client.auth=required")))
    sasl = read_properties(ours(block_containing("properties", "sasl.enabled.mechanisms=PLAIN")))
    acls = read_properties(block_containing("properties", "authorizer.class.name=kafka.security"))
    broker.overrides.update({**tls, **sasl, **acls, "listeners": f"{tls['listeners']},{sasl['listeners']}"})
    (tmp_path / "admin.properties").write_text(block_containing("properties", "security.protocol=SASL_SSL\n"))
    broker.start()
    try:
        # The SCRAM user, then the topic orders and the ACL that lets alice read it (the snippet
        # below subscribes to it; alice may not create it, so kafka-python would be answered
        # TOPIC_AUTHORIZATION_FAILED if it did not exist).
        commands = [*_commands(ours(block_containing("sh", "minikafka configs --bootstrap-server"))),
                    *_commands(ours(block_containing("sh", "--operation Read --operation Describe --topic orders")))]
        printed = ""
        for command in commands:
            done = subprocess.run([sys.executable, "-m", "minikafka", *command[1:]], cwd=tmp_path,
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            printed += done.stdout
        assert "SCRAM-SHA-512=iterations=8192" in printed, printed
        assert "principal=User:alice, host=*, operation=READ, permissionType=ALLOW" in printed, printed
        if shutil.which("kcat"):
            for command in _commands(ours(block_containing("sh", "kcat -b 127.0.0.1:9094 -X security.protocol"))):
                listed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=30)
                assert listed.returncode == 0 and "1 brokers" in listed.stdout, listed.stderr
        [snippet] = [b for b in code_blocks("python") if "sasl_plain_username" in b]
        namespace: dict[str, object] = {}
        with _cwd(tmp_path):
            exec(ours(snippet), namespace)  # noqa: S102 - the README's own example
            assert namespace["producer"].list_topics(timeout=10).brokers  # type: ignore[attr-defined]
            assert namespace["consumer"].topics() == {"orders"}  # type: ignore[attr-defined]
            namespace["consumer"].close()  # type: ignore[attr-defined]
    finally:
        broker.close()
    assert all(port not in ports.values() for port in README_PORTS)


class _cwd:
    def __init__(self, path: Path) -> None:
        self.path, self.before = path, Path.cwd()

    def __enter__(self) -> None:
        import os

        os.chdir(self.path)

    def __exit__(self, *exc: object) -> None:
        import os

        os.chdir(self.before)
