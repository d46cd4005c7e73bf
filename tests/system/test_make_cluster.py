"""`make cluster` as the README shows it: ZooKeeper and three brokers from config/ that Metadata
shows with their controller, "cluster up" once all of them serve, and Ctrl-C stops them one at a
time, the controller last, each after its controlled shutdown, with no error logged. Run in a copy
of the checkout whose fixed ports are changed to free ones."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.broker_process import ctrl_c_as_in_a_terminal, free_port, wait_until
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
    log = checkout / "make-cluster.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(["make", "cluster"], cwd=checkout, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                   start_new_session=True, preexec_fn=ctrl_c_as_in_a_terminal)
    bootstrap = (checkout / "bootstrap").read_text()
    try:
        wait_until(lambda: "cluster up:" in log.read_text(errors="replace") or process.poll() is not None, 120,
                   interval=0.5, what="make cluster saying cluster up")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        metadata = admin.list_topics(timeout=10)
        assert len(metadata.brokers) == 3 and metadata.controller_id in (1, 2, 3)  # as soon as it says so
        # Leaderships on every broker, for the stop to move: a replicated topic with records.
        for future in admin.create_topics([NewTopic("spread", 6, 3)]).values():
            future.result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(60):
            producer.produce("spread", b"v%d" % i, partition=i % 6)
        assert producer.flush(60) == 0
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in the terminal
        try:
            process.wait(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            left = _kill_left_behind(checkout)
            pytest.fail(f"make cluster did not stop within 240 s of Ctrl-C (killed what it left: {left}); "
                        "its log ends:\n" + log.read_text(errors="replace")[-6000:])
    text = log.read_text(errors="replace")
    lines = text.splitlines()
    for broker in (1, 2, 3):
        assert f"broker {broker} stopped cleanly" in text, text[-3000:]
    up = _first(lines, lambda line: "cluster up:" in line)
    for broker in (1, 2, 3):
        serving = _first(lines, lambda line: line.startswith(f"[broker-{broker}]")  # noqa: B023
                         and f"minikafka broker {broker} " in line and " serving on " in line)  # noqa: B023
        assert serving < up, "cluster up printed before every broker served"
    # One at a time: each broker has stopped before the next is told to; the controller goes last.
    stopping = [int(m.group(1)) for m in (re.match(r"stopping broker-(\d)", line) for line in lines) if m]
    assert sorted(stopping) == [1, 2, 3], lines[-60:]
    for first, then in zip(stopping, stopping[1:], strict=False):
        stopped = _first(lines, lambda line: f"broker {first} stopped cleanly" in line)  # noqa: B023
        told = _first(lines, lambda line: line.startswith(f"stopping broker-{then}"))  # noqa: B023
        assert stopped < told, f"broker-{then} was told to stop before broker-{first} had stopped"
    controller = int(re.search(r"\(controller: broker (\d)\)", text).group(1))
    assert stopping[-1] == controller
    assert not any("SLF4J:" in line for line in lines)
    errors = [line for line in lines if " ERROR " in line or "controlled shutdown request failed" in line]
    assert errors == [], errors
    # Each broker but the last handed its leaderships over: none was left without a leader.
    handed = [line for line in lines if "is shutting down: moved" in line]
    assert len(handed) == 3 and all(line.endswith("it still leads 0 partition(s)") for line in handed[:2]), handed
    left = _kill_left_behind(checkout)
    assert left == [], f"processes left behind (killed): {left}"


def _kill_left_behind(checkout: Path) -> list[str]:
    """SIGKILL every process whose command line names the checkout: ZooKeeper and the brokers run
    in sessions of their own, which a kill of make's process group does not reach."""
    found = subprocess.run(["pgrep", "-a", "-f", str(checkout)], capture_output=True, text=True).stdout.splitlines()
    for line in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[0]), signal.SIGKILL)
    return found


def _first(lines: list[str], wanted: Callable[[str], bool]) -> int:
    found = [i for i, line in enumerate(lines) if wanted(line)]
    assert found, "\n".join(lines[-80:])
    return found[0]
