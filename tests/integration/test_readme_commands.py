"""The README's commands, run as written in a copy of the checkout.

The copy has the Makefile, config/, the sources and a `.venv` that is the virtualenv running these
tests (its install stamp is newer than the copied pyproject.toml, so make installs nothing). Only
fixed ports are changed, to free ones: the README's example port, and make run's metrics port,
so that a broker the user runs meanwhile is not in the way.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from importlib import metadata
from pathlib import Path

import pytest

from minikafka.config.broker import DEFINITIONS
from tests.integration.broker_process import free_port
from tests.readme import block_containing, copy_checkout, prose

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _make_env() -> dict[str, str]:
    """This environment, less what an outer make (e.g. make test VENV=...) would pass to the inner one."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VENV", "ARGS", "PYTHON")}
    env["PYTHONPATH"] = str(ROOT)  # the virtualenv's minikafka command runs this tree's code
    return env


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return copy_checkout(tmp_path)


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=_make_env(), capture_output=True, text=True,
                          timeout=120, check=False)


def test_make_run_takes_overrides_and_logs_where_it_serves_and_its_metrics(checkout: Path):
    [command] = [line for line in block_containing("sh", "make run ARGS=").splitlines() if line.strip()]
    port = free_port()
    command = command.replace(":19092", f":{port}")
    properties = checkout / "config" / "embedded.properties"
    properties.write_text(properties.read_text().replace("metrics.port=9404", "metrics.port=0"))
    output = checkout / "make-run.log"
    with open(output, "wb") as sink:
        make = subprocess.Popen(["bash", "-c", command], cwd=checkout, env=_make_env(), stdin=subprocess.DEVNULL,
                                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        serving = f"serving on PLAINTEXT://127.0.0.1:{port}"
        metrics = None
        log = ""
        # The metrics line comes first: a look between the two found the first alone.
        while not (metrics and serving in log) and time.monotonic() < deadline and make.poll() is None:
            time.sleep(0.1)
            log = output.read_text()
            metrics = re.search(r"metrics on (http://\S+/metrics)", log)
        assert metrics is not None, log
        assert serving in log
        with urllib.request.urlopen(metrics.group(1), timeout=10) as response:
            assert b"minikafka_log_dir_bytes" in response.read()
        assert (checkout / "data" / "d1" / "meta.properties").exists()
        os.killpg(make.pid, signal.SIGINT)  # Ctrl-C, as the README says
        make.wait(30)
        assert "stopped cleanly" in output.read_text()
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait(10)


def test_the_minikafka_command_is_where_the_readme_says(checkout: Path):
    lines = [line.split("#")[0].strip() for line in block_containing("sh", ".venv/bin/minikafka --version")
             .splitlines() if line.strip()]
    outputs = {}
    for line in lines:
        result = _run(line, checkout)
        assert result.returncode == 0, (line, result.stderr)
        outputs[line.split()[-1]] = result.stdout
    assert outputs["--version"].strip() == f"minikafka {metadata.version('minikafka')}"
    assert "minikafka config-keys" in " ".join(outputs["--help"].split())
    listed = re.findall(r"^(\S+)=", outputs["config-keys"], flags=re.M)
    assert listed == list(DEFINITIONS)


def test_the_readmes_pip_lines_install_from_the_checkout(checkout: Path):
    lines = re.findall(r"`(\.venv/bin/pip install [^`]+)`", prose())
    assert len(lines) >= 2, lines
    for line in lines:
        # --dry-run: resolve what the line would install, change nothing in the shared virtualenv
        result = _run(f"{line} --dry-run", checkout)
        assert result.returncode == 0, (line, result.stdout[-2000:], result.stderr[-2000:])
        assert "Would install minikafka-" in result.stdout, result.stdout[-2000:]


def test_make_clean_keeps_data_and_says_so(tmp_path: Path):
    shutil.copy2(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / "data" / "d1").mkdir(parents=True)
    (tmp_path / "data" / "d1" / "meta.properties").write_text("version=0\n")

    cleaned = _run("make clean", tmp_path)
    assert cleaned.returncode == 0, cleaned.stderr
    assert not (tmp_path / ".venv").exists()
    assert (tmp_path / "data" / "d1" / "meta.properties").exists()
    assert "make clean-data" in cleaned.stdout

    deleted = _run("make clean-data", tmp_path)
    assert deleted.returncode == 0, deleted.stderr
    assert not (tmp_path / "data").exists()
