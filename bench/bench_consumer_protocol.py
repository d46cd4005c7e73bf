"""Rebalance time when one member of ten leaves: KIP-848's consumer protocol against the classic
protocol (part of `make bench`).

Ten confluent-kafka members share a 100-partition topic; once every partition has an owner,
one member closes (it leaves the group). Measured: the wall seconds from its close() until
every partition has an owner again among the nine left, and how many partitions the nine
gave up on the way (eager assignors give up everything, cooperative and KIP-848 members
nothing). Both protocols heartbeat every 500 ms (classic heartbeat.interval.ms,
group.consumer.heartbeat.interval.ms). Starts its own broker (temporary log dirs, free ports;
always stopped at the end). Prints a markdown table of medians.

Usage: .venv/bin/python bench/bench_consumer_protocol.py [--repeat R]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import confluent_kafka  # noqa: E402

from tests.integration.broker_process import BrokerProcess  # noqa: E402
from tests.integration.clients import create_topic  # noqa: E402

TOPIC = "leave-bench"
PARTITIONS = 100
MEMBERS = 10
HEARTBEAT_MS = 500
# (label, consumer settings)
VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("classic, roundrobin (eager)", {"group.protocol": "classic", "partition.assignment.strategy": "roundrobin",
                                     "heartbeat.interval.ms": HEARTBEAT_MS, "session.timeout.ms": 10_000}),
    ("classic, cooperative-sticky", {"group.protocol": "classic",
                                     "partition.assignment.strategy": "cooperative-sticky",
                                     "heartbeat.interval.ms": HEARTBEAT_MS, "session.timeout.ms": 10_000}),
    ("consumer (KIP-848), uniform", {"group.protocol": "consumer"}),
]
_group_ids = itertools.count()


class Member:
    """One consumer polling in its own thread; `owned` follows its assign/revoke callbacks."""

    def __init__(self, bootstrap: str, group: str, settings: dict[str, Any]) -> None:
        self.config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest",
                       "enable.auto.commit": False, **settings}
        self.owned: set[int] = set()
        self.revoked_after: float = float("inf")
        self.revoked = 0  # partitions given up since `revoked_after`
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.closed_at: float | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _assign(self, consumer: Any, partitions: list[Any]) -> None:
        with self.lock:
            self.owned |= {p.partition for p in partitions}

    def _revoke(self, consumer: Any, partitions: list[Any]) -> None:
        with self.lock:
            self.owned -= {p.partition for p in partitions}
            if time.monotonic() >= self.revoked_after:
                self.revoked += len(partitions)

    def _run(self) -> None:
        try:
            consumer = confluent_kafka.Consumer(self.config)
            consumer.subscribe([TOPIC], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)
            try:
                while not self.stopping.is_set():
                    consumer.poll(0.05)
            finally:
                self.closed_at = time.monotonic()
                consumer.close()
        except BaseException as exc:
            self.error = exc

    def owned_now(self) -> set[int]:
        with self.lock:
            return set(self.owned)


def _wait(condition: Any, members: list[Member], timeout: float = 120.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            if m.error is not None:
                raise RuntimeError(f"consumer failed: {m.error!r}")
        if condition():
            return time.monotonic()
        time.sleep(0.005)  # polling the members' callbacks; they are the measurement
    raise RuntimeError(f"the group did not settle in time; partitions owned: {[len(m.owned_now()) for m in members]}")


def one_leaves(bootstrap: str, settings: dict[str, Any]) -> tuple[float, int]:
    group = f"bench-leave-{next(_group_ids)}"
    members = [Member(bootstrap, group, settings) for _ in range(MEMBERS)]
    for m in members:
        m.thread.start()
    try:
        def shared(group: list[Member]) -> bool:
            owned = [m.owned_now() for m in group]
            return all(owned) and len(set().union(*owned)) == PARTITIONS == sum(len(o) for o in owned)
        _wait(lambda: shared(members), members)
        leaver, staying = members[0], members[1:]
        start = time.monotonic()
        for m in staying:
            m.revoked_after = start
        leaver.stopping.set()
        leaver.thread.join(30)
        settled = _wait(lambda: shared(staying), staying)
        return settled - start, sum(m.revoked for m in staying)
    finally:
        for m in members:
            m.stopping.set()
        for m in members:
            m.thread.join(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    results: dict[str, list[tuple[float, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="minikafka-kip848-bench-") as tmp:
        broker = BrokerProcess(Path(tmp), overrides={"group.initial.rebalance.delay.ms": "0",
                                                     "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
                                                     "offsets.topic.num.partitions": "10"})
        try:
            broker.start()
            create_topic(broker.bootstrap, TOPIC, PARTITIONS)
            for _, (label, settings) in itertools.product(range(args.repeat), VARIANTS):
                results.setdefault(label, []).append(one_leaves(broker.bootstrap, settings))
        except BaseException:
            print(broker.stderr_text(5000), file=sys.stderr)
            raise
        finally:
            broker.close()
    print("| protocol, assignor | runs | seconds until every partition is owned again (median) | min-max "
          "| partitions the others gave up (median) |")
    print("|---|---:|---:|---:|---:|")
    for label, runs in results.items():
        seconds = [s for s, _ in runs]
        print(f"| {label} | {len(runs)} | {statistics.median(seconds):.2f} | {min(seconds):.2f}-{max(seconds):.2f} "
              f"| {statistics.median(r for _, r in runs):.0f} |")
    print(f"\n{MEMBERS} confluent-kafka {confluent_kafka.version()} members, {PARTITIONS} partitions, one member "
          "closes; heartbeats every 500 ms in both protocols.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
