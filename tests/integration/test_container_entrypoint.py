"""What the Docker image runs, outside Docker: `minikafka serve --from-env` takes its settings from
KAFKA_* variables, and `minikafka ping` (the image's HEALTHCHECK) tells a serving broker from a
port with nothing behind it. tests/docker runs the same through a real engine, where one can start.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.broker_process import HOST, KafkaWire, free_port, wait_until

pytestmark = pytest.mark.integration


def _minikafka(*args: str) -> list[str]:
    return [sys.executable, "-m", "minikafka", *args]


def _ping(port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_minikafka("ping", "--bootstrap-server", f"{HOST}:{port}", "--timeout", "2"),
                          capture_output=True, text=True, timeout=30, check=False)


def test_a_broker_configured_by_kafka_variables_answers_the_health_check(tmp_path: Path) -> None:
    port = free_port()
    assert _ping(port).returncode == 1  # nothing listens yet
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    environment = dict(os.environ, KAFKA_BROKER_ID="7", KAFKA_LISTENERS=f"PLAINTEXT://{HOST}:{port}",
                       KAFKA_LOG_DIRS=",".join(map(str, dirs)), KAFKA_METRICS_PORT="-1",
                       KAFKA_HEAP_OPTS="-Xmx1G")  # a JVM variable of the Kafka images, not a setting
    with open(tmp_path / "broker.stderr", "wb") as stderr:
        broker = subprocess.Popen(_minikafka("serve", "--from-env"), cwd=tmp_path, env=environment,
                                  stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr)
    try:
        wait_until(lambda: broker.poll() is not None or _ping(port).returncode == 0, 30, interval=0.2,
                   what="the broker answering ping")
        assert broker.poll() is None, (tmp_path / "broker.stderr").read_text()
        with KafkaWire((HOST, port)) as wire:
            assert [b.node_id for b in wire.metadata([]).brokers] == [7]
        assert all((d / "meta.properties").exists() for d in dirs)
    finally:
        broker.terminate()
        try:
            broker.wait(20)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait(10)
    assert broker.returncode == 0, (tmp_path / "broker.stderr").read_text()
    assert "heap.opts" not in (tmp_path / "broker.stderr").read_text()


def test_a_bad_kafka_variable_names_its_key_and_starts_nothing(tmp_path: Path) -> None:
    environment = dict(os.environ, KAFKA_LISTENERS=f"PLAINTEXT://{HOST}:{free_port()}",
                       KAFKA_LOG_DIRS=str(tmp_path / "d1"), KAFKA_NUM_PARTITIONS="many")
    result = subprocess.run(_minikafka("serve", "--from-env"), cwd=tmp_path, env=environment,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    assert "num.partitions" in result.stderr and "many" in result.stderr
    assert not (tmp_path / "d1").exists()
