"""What the Docker image runs, outside Docker: `minikafka serve --from-env` takes its settings from
KAFKA_* variables, and `minikafka ping` (the image's HEALTHCHECK) tells a serving broker from a
port with nothing behind it. tests/docker runs the same through a real engine, where one can start.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.broker_process import HOST, BrokerProcess

pytestmark = pytest.mark.integration


class EnvironmentConfiguredBroker(BrokerProcess):
    """A broker started as the image starts it: its settings as KAFKA_* variables, none as arguments."""

    def command(self) -> list[str]:
        return [sys.executable, "-m", "minikafka", "serve", "--from-env"]

    def environment(self) -> dict[str, str]:
        # The images' naming: '_' for '.', '__' for '_', '___' for '-'.
        variables = {"KAFKA_" + key.replace("_", "__").replace("-", "___").replace(".", "_").upper(): value
                     for key, value in self.overrides.items()}
        # A JVM variable of the Kafka images, which is no setting.
        return {**super().environment(), **variables, "KAFKA_HEAP_OPTS": "-Xmx1G"}


def _ping(port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minikafka", "ping", "--bootstrap-server", f"{HOST}:{port}",
                           "--timeout", "2"], capture_output=True, text=True, timeout=30, check=False)


def test_a_broker_configured_by_kafka_variables_answers_the_health_check(tmp_path: Path) -> None:
    broker = EnvironmentConfiguredBroker(tmp_path, broker_id=7)
    assert _ping(broker.port).returncode == 1  # nothing listens yet
    try:
        broker.start()  # ready: its Metadata lists broker 7 on the port and dirs the variables named
        assert _ping(broker.port).returncode == 0
        assert all((d / "meta.properties").exists() for d in broker.log_dirs)
        assert broker.stop() == 0
    finally:
        broker.close()
    assert "heap.opts" not in broker.stderr_text()


def test_a_bad_kafka_variable_names_its_key_and_starts_nothing(tmp_path: Path) -> None:
    broker = EnvironmentConfiguredBroker(tmp_path, overrides={"num.partitions": "many"})
    result = subprocess.run(broker.command(), cwd=tmp_path, env=broker.environment(), capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    assert "num.partitions" in result.stderr and "many" in result.stderr
    assert not any(d.exists() for d in broker.log_dirs)
