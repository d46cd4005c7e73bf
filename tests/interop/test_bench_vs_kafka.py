"""bench/vs_kafka.py (make bench) prints its table and leaves nothing behind, run to its end or
stopped by Ctrl-C. Both runs are tiny: a smoke test of the bench, no figure is judged here."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tests.integration.broker_process import ctrl_c_as_in_a_terminal
from tests.interop.kafka import kafka

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH = REPO_ROOT / "bench" / "vs_kafka.py"
TINY = ["--quick", "--only", "produce-rf1", "--records", "2000"]


def start_bench(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    kafka("3.9")  # the jars fetched before the bench's clock matters
    # The bench's temporary dir (ZooKeeper's data, every log dir) goes under tmp_path, so what it
    # leaves behind, files or processes naming them, can be found.
    env = dict(os.environ, TMPDIR=str(tmp_path))
    return subprocess.Popen([sys.executable, str(BENCH), *TINY, *args], cwd=REPO_ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=ctrl_c_as_in_a_terminal)


@contextlib.contextmanager
def stopped_at_the_end(bench: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """A failed assertion must not leave the bench running: SIGINT (its own cleanup), then SIGKILL."""
    try:
        yield bench
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGINT)
            try:
                bench.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(bench.pid, signal.SIGKILL)
                bench.wait(10)


def processes_naming(path: Path) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(path) in command:
                found.append(f"{entry}: {command[:300]}")
    return found


def test_the_bench_prints_the_table_and_leaves_no_process_nor_file(tmp_path: Path) -> None:
    with stopped_at_the_end(start_bench(tmp_path)) as bench:
        stdout, stderr = bench.communicate(timeout=300)
    assert bench.returncode == 0, stderr[-5000:]
    rows = [line for line in stdout.splitlines() if line.startswith("| produce, 3 partitions, RF 1, acks=1")]
    assert len(rows) == 1, stdout
    assert "MiB/s" in rows[0] and "**" in rows[0], rows[0]
    assert processes_naming(tmp_path) == []
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_stops_every_process_and_removes_the_data(tmp_path: Path) -> None:
    with stopped_at_the_end(start_bench(tmp_path, "--repeat", "50")) as bench:
        interrupt(bench, tmp_path)
    assert bench.returncode != 0
    assert processes_naming(tmp_path) == []
    assert list(tmp_path.iterdir()) == []


def interrupt(bench: subprocess.Popen[str], tmp_path: Path) -> None:
    """Ctrl-C once the first measured run on minikafka is over (both kinds and ZooKeeper running)."""
    stream = bench.stderr
    assert stream is not None
    lines: list[str] = []

    def read() -> None:
        for line in stream:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    # Interrupted mid-measure: every broker of both kinds and ZooKeeper are running then.
    deadline = time.monotonic() + 240
    while not any("produce-rf1 run 0 on minikafka" in line for line in list(lines)):
        assert bench.poll() is None, "".join(lines)[-5000:]
        assert time.monotonic() < deadline, "no measured run within 240 s:\n" + "".join(lines)[-5000:]
        time.sleep(0.1)
    assert processes_naming(tmp_path), "the bench's processes were not found while it ran"
    # What a terminal's Ctrl-C does: SIGINT to the whole foreground process group.
    os.killpg(bench.pid, signal.SIGINT)
    bench.wait(120)
    reader.join(10)
