"""Rebalance time of a 3-member consumer group on a real minikafka broker (part of `make bench`).

Measures the wall seconds from the last member's join (its subscribe() call) until every
member is consuming again: it got its assignment of the new generation and read a record
from it. Two scenarios, each with eager (roundrobin) and cooperative (cooperative-sticky)
librdkafka consumers:

- cold start: three members of a new group subscribe together; the broker holds the first
  rebalance back by group.initial.rebalance.delay.ms (Kafka's 3000 ms default, and 0);
- third joins: two members are consuming, a third subscribes; the group rebalances.

A background producer keeps every partition supplied. Starts its own broker (temporary log
dirs, free ports; always stopped at the end). Prints a markdown table of medians.

Usage: .venv/bin/python bench/bench_rebalance.py [--repeat R]
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

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import confluent_kafka  # noqa: E402

from tests.integration.broker_process import BrokerProcess  # noqa: E402
from tests.integration.clients import create_topic  # noqa: E402

TOPIC = "rebalance-bench"
PARTITIONS = 8
MEMBERS = 3
_group_ids = itertools.count()


class Member:
    """One consumer in its own thread. `consuming_at` is when it first read a record from an
    assignment it got at or after `since` (time.monotonic)."""

    def __init__(self, bootstrap: str, group: str, strategy: str) -> None:
        self.bootstrap, self.group, self.strategy = bootstrap, group, strategy
        self.since = float("inf")
        self.assigned_at: float | None = None
        self.consuming_at: float | None = None
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> float:
        """Subscribe now; returns the moment of the join."""
        joined = time.monotonic()
        self.since = joined
        self.thread.start()
        return joined

    def expect_rebalance(self, since: float) -> None:
        self.since, self.assigned_at, self.consuming_at = since, None, None

    def _on_assign(self, consumer: object, partitions: list[object]) -> None:
        now = time.monotonic()
        if now >= self.since and self.assigned_at is None:
            self.assigned_at = now

    def _run(self) -> None:
        try:
            consumer = confluent_kafka.Consumer({
                "bootstrap.servers": self.bootstrap, "group.id": self.group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "partition.assignment.strategy": self.strategy,
                "heartbeat.interval.ms": 500, "session.timeout.ms": 10_000})
            consumer.subscribe([TOPIC], on_assign=self._on_assign)
            try:
                while not self.stopping.is_set():
                    msg = consumer.poll(0.05)
                    if msg is None or msg.error() is not None:
                        continue
                    if self.assigned_at is not None and self.consuming_at is None:
                        self.consuming_at = time.monotonic()
            finally:
                consumer.close()
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)


def _wait_consuming(members: list[Member], timeout: float = 60.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            if m.error is not None:
                raise RuntimeError(f"consumer failed: {m.error!r}")
        if all(m.consuming_at is not None for m in members):
            return max(m.consuming_at for m in members if m.consuming_at is not None)
        time.sleep(0.01)  # polling the members' progress; the measurement is their own timestamps
    raise RuntimeError("the group did not settle in time")


def cold_start(bootstrap: str, strategy: str) -> float:
    group = f"bench-cold-{next(_group_ids)}"
    members = [Member(bootstrap, group, strategy) for _ in range(MEMBERS)]
    try:
        last_join = max(m.start() for m in members)
        return _wait_consuming(members) - last_join
    finally:
        for m in members:
            m.stop()


def third_joins(bootstrap: str, strategy: str) -> float:
    group = f"bench-third-{next(_group_ids)}"
    members = [Member(bootstrap, group, strategy) for _ in range(MEMBERS)]
    try:
        for m in members[:-1]:
            m.start()
        _wait_consuming(members[:-1])
        joined = time.monotonic()
        for m in members[:-1]:
            m.expect_rebalance(joined)
        members[-1].start()
        # Cooperative members keep consuming what they keep and are not re-assigned it: only the
        # newcomer has to wait (two rebalances: the others give partitions up, then it gets them).
        settling = members if strategy != "cooperative-sticky" else members[-1:]
        return _wait_consuming(settling) - joined
    finally:
        for m in members:
            m.stop()


class Feeder:
    """Keeps producing small records into every partition while the bench runs."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for i in itertools.count():
            if self.stopping.is_set():
                break
            self.producer.produce(TOPIC, value=b"x" * 100, partition=i % PARTITIONS)
            if i % 200 == 0:
                self.producer.poll(0.05)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)
        self.producer.flush(10)


def run(repeat: int, delay_ms: int) -> dict[tuple[str, str], list[float]]:
    timings: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="minikafka-rebalance-") as tmp:
        broker = BrokerProcess(Path(tmp), overrides={"group.initial.rebalance.delay.ms": str(delay_ms),
                                                     "offsets.topic.num.partitions": "10"})
        try:
            broker.start()
            create_topic(broker.bootstrap, TOPIC, PARTITIONS)
            feeder = Feeder(broker.bootstrap)
            try:
                for _, strategy in itertools.product(range(repeat), ("roundrobin", "cooperative-sticky")):
                    timings.setdefault(("cold start", strategy), []).append(cold_start(broker.bootstrap, strategy))
                    timings.setdefault(("third joins", strategy), []).append(third_joins(broker.bootstrap, strategy))
            finally:
                feeder.stop()
        except BaseException:
            print(broker.stderr_text(5000), file=sys.stderr)
            raise
        finally:
            broker.close()
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print("| scenario | assignor | group.initial.rebalance.delay.ms | runs | seconds (median) | min-max |")
    print("|---|---|---:|---:|---:|---:|")
    for delay_ms in (3000, 0):
        for (scenario, strategy), seconds in run(args.repeat, delay_ms).items():
            if scenario == "third joins" and delay_ms == 0:
                continue  # the initial delay plays no part once the group exists
            print(f"| {scenario} | {strategy} | {delay_ms} | {len(seconds)} | {statistics.median(seconds):.2f} | "
                  f"{min(seconds):.2f}-{max(seconds):.2f} |", flush=True)
    print(f"\n{MEMBERS} confluent-kafka {confluent_kafka.version()} members, {PARTITIONS} partitions; seconds from "
          "the last member's subscribe() until every member read a record of its new assignment (cooperative "
          "third-joins: until the newcomer reads, as the others keep consuming throughout).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
