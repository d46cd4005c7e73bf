"""Settings that must stop `minikafka serve` before it listens or writes anything.

Each case runs the real command; it must exit with status 2 and one error line naming what is
wrong, and leave the log dirs it was given untouched (not even created).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.broker_process import HOST, free_port

pytestmark = pytest.mark.integration


def _serve(cwd: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "minikafka", "serve", "--override", "metrics.port=-1"]
    for override in overrides:
        command += ["--override", override]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def _error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if " ERROR " in line]


@pytest.mark.parametrize("listener,key", [("SSL", "ssl.keystore.location"),
                                          ("SASL_PLAINTEXT", "sasl.enabled.mechanisms"),
                                          ("SASL_SSL", "ssl.keystore.location")])
def test_a_listener_the_broker_cannot_secure_stops_it_naming_the_key(tmp_path: Path, listener: str, key: str) -> None:
    """A TLS listener without its key store, a SASL one without a mechanism minikafka has (Kafka's
    default is GSSAPI): one error naming the key, before any dir is written."""
    address = f"{listener}://{HOST}:{free_port()}"
    result = _serve(tmp_path, f"listeners={address}", f"inter.broker.listener.name={listener}",
                    f"log.dirs={tmp_path / 'd1'}")
    assert result.returncode == 2, result.stderr
    [error] = _error_lines(result)
    assert f"'{key}'" in error and listener in error
    assert not (tmp_path / "d1").exists()


def test_a_log_dir_listed_twice_is_one_error_before_any_dir_is_written(tmp_path: Path) -> None:
    existing = tmp_path / "disk1"
    existing.mkdir()
    (tmp_path / "disk1-link").symlink_to(existing)
    dirs = [existing, tmp_path / "disk2", tmp_path / "disk1-link"]
    result = _serve(tmp_path, f"listeners=PLAINTEXT://{HOST}:{free_port()}",
                    "log.dirs=" + ",".join(str(d) for d in dirs))
    assert result.returncode == 2, result.stderr
    [error] = _error_lines(result)
    assert "log.dirs" in error and "same directory" in error
    assert list(existing.iterdir()) == [] and not (tmp_path / "disk2").exists()


def test_a_replica_selector_minikafka_does_not_have_is_one_error_naming_the_key(tmp_path: Path) -> None:
    result = _serve(tmp_path, f"listeners=PLAINTEXT://{HOST}:{free_port()}", f"log.dirs={tmp_path / 'd1'}",
                    "replica.selector.class=com.example.NearestReplicaSelector")
    assert result.returncode == 2, result.stderr
    [error] = _error_lines(result)
    assert "'replica.selector.class'" in error and "org.apache.kafka.common.replica.RackAwareReplicaSelector" in error
    assert not (tmp_path / "d1").exists()
