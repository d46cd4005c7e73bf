"""py-spy profiles of a broker for the bench reports: start a broker under ``py-spy record``
(attaching to a running process needs ptrace rights a shared machine may not give) and sum up
a speedscope profile as the functions that took the most samples.

The broker is then the child of py-spy: ``broker_pid`` finds it, and ``stop_profiling`` makes
py-spy write its profile (SIGINT), which ends the broker too.
"""

from __future__ import annotations

import json
import signal
import sys
from collections import Counter
from pathlib import Path

from tests.integration.broker_process import BrokerProcess

PY_SPY = Path(sys.executable).parent / "py-spy"


def profile_next_start(broker: BrokerProcess, output: Path, rate: int = 200, idle: bool = True) -> None:
    """Make the next ``broker.start()`` run the broker under py-spy, writing ``output``; with
    ``idle``, samples are taken whether the thread runs or waits (wall time), else only while
    it runs (CPU time, a write blocked in the kernel left out)."""
    plain = type(broker).command.__get__(broker)
    broker.command = lambda: [  # type: ignore[method-assign]
        str(PY_SPY), "record", *(["--idle"] if idle else []), "--rate", str(rate), "--format", "speedscope",
        "--output", str(output), "--", *plain()]


def stop_profiling(broker: BrokerProcess) -> None:
    """Have py-spy write its profile; the broker under it stops too. The next start is plain."""
    if broker.process is not None:
        broker.process.send_signal(signal.SIGINT)
        broker.process.wait(60)
    broker.close()
    del broker.command  # type: ignore[method-assign]


def broker_pid(broker: BrokerProcess) -> int:
    """The broker's own process: the child of py-spy when profiled."""
    assert broker.process is not None
    pid = broker.process.pid
    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
        if Path(cmdline.read().split(b"\0")[0].decode()).name != PY_SPY.name:
            return pid
    with open(f"/proc/{pid}/task/{pid}/children") as children:
        return int(children.read().split()[0])


def summary(path: Path, top: int = 12) -> list[str]:
    """Markdown lines: the functions of the event loop's thread with the most samples (their own,
    then with callees). uvloop's own C code (socket reads and writes, and under --idle the wait
    for events) shows as ``Runner.run``."""
    data = json.loads(path.read_text())
    frames = data["shared"]["frames"]
    own: Counter[int] = Counter()
    inclusive: Counter[int] = Counter()
    total = 0
    loop = {i for i, frame in enumerate(frames) if frame["name"] == "serve_command"}
    for profile in data["profiles"]:
        if not any(loop.intersection(stack) for stack in profile["samples"]):
            continue  # the event loop's thread only; the others (ZooKeeper, metrics) mostly wait
        for stack, weight in zip(profile["samples"], profile["weights"], strict=True):
            total += weight
            if stack:
                own[stack[-1]] += weight
            for frame in set(stack):
                inclusive[frame] += weight
    if not total:
        return ["(no samples)"]

    def name(index: int) -> str:
        frame = frames[index]
        where = str(frame.get("file", "")).split("site-packages/")[-1].split("/python3.11/")[-1]
        for root in (str(Path(__file__).resolve().parents[1]) + "/",):
            where = where.removeprefix(root)
        return f"`{frame['name']}` ({where}:{frame.get('line', '')})"

    lines = [f"{total:.1f} s of samples of the event loop's thread (py-spy, {path.name}); own time, then with "
             "callees:\n",
             "| own | function |", "|---:|---|"]
    lines += [f"| {100 * w / total:.1f}% | {name(i)} |" for i, w in own.most_common(top)]
    lines += ["", "| with callees | function |", "|---:|---|"]
    lines += [f"| {100 * w / total:.1f}% | {name(i)} |" for i, w in inclusive.most_common(top * 2)]
    return lines
