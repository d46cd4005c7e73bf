"""`make cluster` as the README shows it: ZooKeeper and three brokers from config/ that Metadata
shows with their controller, and Ctrl-C stops every one of them. Run in a copy of the checkout whose
fixed ports are changed to free ones."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.integration.broker_process import free_port, wait_until
from tests.readme import copy_checkout, prose

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    copy = copy_checkout(tmp_path)
    ports: dict[str, str] = {}
    for config in sorted((copy / "config").glob("*.properties")):
        text = re.sub(r"(?<=127\.0\.0\.1:)(\d{4})\b", lambda m: ports.setdefault(m.group(1), str(free_port())),
                      config.read_text())
        text = re.sub(r"(?m)^(clientPort|metrics\.port)=(\d+)$",
                      lambda m: f"{m.group(1)}={ports.setdefault(m.group(2), str(free_port()))}", text)
        config.write_text(text)
    (copy / "bootstrap").write_text(",".join(f"127.0.0.1:{ports[p]}" for p in ("9092", "9093", "9094")))
    return copy


def test_make_cluster_starts_three_brokers_and_ctrl_c_stops_them(checkout: Path) -> None:
    assert "make cluster" in prose()
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VENV", "ARGS")}
    env["PYTHONPATH"] = str(ROOT)
    process = subprocess.Popen(["make", "cluster"], cwd=checkout, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    bootstrap = (checkout / "bootstrap").read_text()
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 90, interval=0.5,
                   what="three brokers in Metadata")
        assert admin.list_topics(timeout=5).controller_id in (1, 2, 3)
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in the terminal
        output, _ = process.communicate(timeout=120)
    text = output.decode(errors="replace")
    for broker in (1, 2, 3):
        assert f"broker {broker} stopped cleanly" in text, text[-3000:]
    leftover = subprocess.run(["pgrep", "-f", str(checkout)], capture_output=True, text=True)
    assert leftover.stdout == "", f"processes left behind: {leftover.stdout}"
