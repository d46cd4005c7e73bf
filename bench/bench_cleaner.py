"""The log cleaner's throughput, and what it costs producers (part of `make bench`).

Starts its own broker (temporary log dirs, free ports; always stopped at the end). Each run:

1. fills a compacted topic with ``--dirty-mib`` of 1 KiB updates of ``--keys`` keys, with
   min.compaction.lag.ms at a day so nothing is cleaned yet (the dirty log);
2. produces 1 KiB records to another topic (acks=1) for ``--seconds``: the broker not cleaning;
3. sets min.compaction.lag.ms to 0 (IncrementalAlterConfigs): the cleaner starts at once; while
   it cleans, produces as in 2 (the broker cleaning; stops when the clean is done);
4. reads the clean's own report (MiB of dirty log read, seconds) from the broker's log.

Prints a markdown table of each run and the medians: cleaner MiB/s, produce MiB/s without and
while cleaning, and their ratio.

Usage: .venv/bin/python bench/bench_cleaner.py [--dirty-mib M] [--keys K] [--seconds S] [--repeat R]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import confluent_kafka  # noqa: E402
from kafka.admin import ConfigResource, ConfigResourceType  # noqa: E402

from tests.integration.broker_process import BrokerProcess, wait_until  # noqa: E402
from tests.integration.clients import create_topic  # noqa: E402
from tests.system.observe import alter_configs  # noqa: E402

MiB = 1024 * 1024
RECORD = bytes(1024)
CLEANED = re.compile(r"cleaned (?P<name>\S+) in \S+: (?P<mib>[0-9.]+) MiB of dirty log compacted in "
                     r"(?P<seconds>[0-9.]+) s.*longest swap (?P<swap>[0-9.]+) ms")


def produce_for(bootstrap: str, topic: str, seconds: float, until: Callable[[], bool] = lambda: False) -> float:
    """MiB/s acknowledged (acks=1) while producing for ``seconds``, or until ``until()``."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                                         "queue.buffering.max.kbytes": 64 * 1024})
    acked = [0]

    def on_delivery(err, _msg) -> None:
        if err is None:
            acked[0] += 1
    producer.list_topics(topic, timeout=10)
    started = checked = time.perf_counter()
    while time.perf_counter() - started < seconds:
        try:
            producer.produce(topic, value=RECORD, partition=0, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
        if time.perf_counter() - checked > 0.1:
            checked = time.perf_counter()
            if until():
                break
    producer.flush(120)
    return acked[0] * len(RECORD) / MiB / (time.perf_counter() - started)


def fill(bootstrap: str, topic: str, mib: int, keys: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20,
                                         "batch.size": 1 << 20, "queue.buffering.max.kbytes": 256 * 1024,
                                         "message.max.bytes": 9 * MiB})
    for i in range(mib * MiB // len(RECORD)):
        while True:
            try:
                producer.produce(topic, key=b"key-%07d" % (i % keys), value=RECORD, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    producer.produce(topic, key=b"roll", value=bytes(8 * MiB - 1024), partition=0)  # seals the last segment
    assert producer.flush(300) == 0


def one_run(broker: BrokerProcess, run: int, args: argparse.Namespace) -> tuple[float, float, float, float, float]:
    dirty = f"dirty-{run}"
    create_topic(broker.bootstrap, dirty, 1, {"cleanup.policy": "compact", "segment.bytes": str(64 * MiB),
                                             "min.compaction.lag.ms": str(86_400_000),
                                             "min.cleanable.dirty.ratio": "0.01", "max.message.bytes": str(9 * MiB)})
    fill(broker.bootstrap, dirty, args.dirty_mib, args.keys)
    create_topic(broker.bootstrap, f"idle-{run}", 1)
    create_topic(broker.bootstrap, f"busy-{run}", 1)
    idle = produce_for(broker.bootstrap, f"idle-{run}", args.seconds)

    def cleaned() -> list[re.Match[str]]:
        return [m for m in CLEANED.finditer(broker.stderr_text(1 << 20)) if m["name"] == f"{dirty}-0"]
    alter_configs(broker.bootstrap, ConfigResource(ConfigResourceType.TOPIC, dirty,
                                                   configs={"min.compaction.lag.ms": "0"}))
    busy = produce_for(broker.bootstrap, f"busy-{run}", args.seconds, until=lambda: bool(cleaned()))
    found = wait_until(cleaned, 600, interval=0.5, what=f"the clean of {dirty}")
    mib, seconds = float(found[0]["mib"]), float(found[0]["seconds"])
    return mib, mib / seconds, idle, busy, float(found[0]["swap"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dirty-mib", type=int, default=256, help="MiB of updates in the dirty log")
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys of the updates")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long a produce phase lasts at most")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-cleaner-") as tmp:
        broker = BrokerProcess(Path(tmp), overrides={"log.cleaner.backoff.ms": "200", "log.segment.delete.delay.ms": "0",
                                                     "message.max.bytes": str(9 * MiB)}, ready_timeout=60)
        try:
            broker.start()
            for run in range(args.repeat):
                rows.append(one_run(broker, run, args))
        finally:
            broker.close()
    print(f"{args.dirty_mib} MiB of 1 KiB updates of {args.keys} keys, one partition; produce phases of "
          f"{args.seconds:.0f} s, 1 KiB records, acks=1\n")
    print("| run | dirty MiB cleaned | cleaner MiB/s | produce MiB/s, idle | produce MiB/s, cleaning | ratio | "
          "longest swap ms |")
    print("|---|---|---|---|---|---|---|")
    for i, (mib, rate, idle, busy, swap) in enumerate(rows):
        print(f"| {i + 1} | {mib:.0f} | {rate:.1f} | {idle:.1f} | {busy:.1f} | {busy / idle:.2f} | {swap:.1f} |")
    median = [statistics.median(column) for column in zip(*rows, strict=True)]
    ratio = statistics.median(busy / idle for _, _, idle, busy, _ in rows)
    print(f"| median | {median[0]:.0f} | {median[1]:.1f} | {median[2]:.1f} | {median[3]:.1f} | {ratio:.2f} | "
          f"{median[4]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
