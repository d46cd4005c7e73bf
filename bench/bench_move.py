"""Moves between log dirs (`make bench` runs it through bench/run.py): three figures, one run.

1. Move throughput of a 1 GiB partition against a plain os.copy_file_range of the same files,
   side by side on the same file system, interleaved, medians of three: the plain copy once as
   is (data left in the page cache) and once followed by an fsync of every file (what a move
   must do before it may delete the source).
2. Throttle accuracy: a move with replica.alter.log.dirs.io.max.bytes.per.second at 50 MB/s
   (set at run time through IncrementalAlterConfigs), bytes copied over time taken.
3. Produce throughput (confluent-kafka, acks=1, 1 KiB records) into another topic while the
   1 GiB partition is moved back and forth unthrottled, against the same producer with no move.

A move's time runs from the AlterReplicaLogDirs request until DescribeLogDirs shows the replica
in its new dir with no future replica left (polled every 5 ms; every 50 ms during figure 3).  Starts its own broker on
temporary dirs and free ports; prints a markdown report.

Usage: .venv/bin/python bench/bench_move.py [--gib 1.0] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import confluent_kafka  # noqa: E402
from kafka import KafkaAdminClient  # noqa: E402
from kafka.admin import ConfigResource, ConfigResourceType  # noqa: E402

from bench.run import produce  # noqa: E402
from minikafka.tools.client import ALTER_REPLICA_LOG_DIRS, Cluster  # noqa: E402
from tests.integration.broker_process import BrokerProcess  # noqa: E402
from tests.integration.clients import create_topic  # noqa: E402

MiB = 1 << 20
THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
SEGMENT_BYTES = 128 * MiB


def fill(bootstrap: str, topic: str, total_bytes: int, record_bytes: int = 64 << 10, partition: int = 0) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                                         "batch.size": 1_000_000, "compression.type": "none",
                                         "queue.buffering.max.kbytes": 512 * 1024})
    value = os.urandom(record_bytes)
    for _ in range(total_bytes // record_bytes):
        while True:
            try:
                producer.produce(topic, value=value, partition=partition)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(300):
        raise RuntimeError(f"could not fill {topic}")


def where(cluster: Cluster, topic: str) -> list[tuple[str, bool, int]]:
    return [(r.log_dir, p.is_future_key, p.partition_size) for r in cluster.describe(1)
            for t in r.topics if t.name == topic for p in t.partitions]


def move(cluster: Cluster, topic: str, target: str, timeout: float = 600, poll: float = 0.005) -> tuple[float, int]:
    """Move partition 0 of ``topic`` to ``target``; returns (seconds, bytes of the partition)."""
    started = time.perf_counter()
    _, response = cluster.connection(1).request(ALTER_REPLICA_LOG_DIRS, {"dirs": [
        {"path": target, "topics": [{"name": topic, "partitions": [0]}]}]})
    code = response.results[0].partitions[0].error_code
    if code:
        raise RuntimeError(f"AlterReplicaLogDirs refused with error {code}")
    while True:
        found = where(cluster, topic)
        if len(found) == 1 and found[0][0] == target and not found[0][1]:
            elapsed = time.perf_counter() - started
            # Served from the copy now; its dir gets its final name a moment later.
            while not (Path(target) / f"{topic}-0").is_dir():
                time.sleep(0.005)
            return elapsed, found[0][2]
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"the move of {topic} to {target} did not end in {timeout}s: {found}")
        time.sleep(poll)


def plain_copy(source_dir: Path, scratch: Path, fsync: bool) -> tuple[float, int]:
    """os.copy_file_range of every segment file of ``source_dir`` into ``scratch``."""
    scratch.mkdir()
    files = sorted(p for p in source_dir.iterdir() if p.suffix in (".log", ".index", ".timeindex"))
    total = 0
    started = time.perf_counter()
    for path in files:
        src = os.open(path, os.O_RDONLY)
        dst = os.open(scratch / path.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            size = os.fstat(src).st_size
            done = 0
            while done < size:
                n = os.copy_file_range(src, dst, size - done, done, done)
                if n == 0:
                    break
                done += n
            if fsync:
                os.fsync(dst)
            total += done
        finally:
            os.close(src)
            os.close(dst)
    elapsed = time.perf_counter() - started
    for path in scratch.iterdir():
        path.unlink()
    scratch.rmdir()
    return elapsed, total


def produce_for(bootstrap: str, topic: str, records: int, record_bytes: int = 1024) -> float:
    """MiB/s of ``records`` acks=1 records of ``record_bytes`` into ``topic`` (bench/run.py's producer)."""
    return produce(bootstrap, topic, 0, records, record_bytes, "1", timeout=120).mib_per_s


def set_throttle(bootstrap: str, value: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-move")
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1", configs={THROTTLE: str(value)})],
                            incremental=True)
    finally:
        admin.close()


def swap_pauses(text: str) -> list[float]:
    return [float(ms) for ms in re.findall(r"appends waited ([0-9.]+) ms for the swap", text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="size of the moved partition, GiB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--throttle-mb", type=float, default=50.0, help="throttle to check, MB/s (10^6 B)")
    parser.add_argument("--throttled-mib", type=int, default=256, help="size of the throttled partition, MiB")
    parser.add_argument("--produce-records", type=int, default=300_000)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="minikafka-bench-move-", dir=os.environ.get("BENCH_DIR")) as tmp:
        root = Path(tmp)
        broker = BrokerProcess(root / "broker", overrides={"log.segment.bytes": str(SEGMENT_BYTES),
                                                           "auto.create.topics.enable": "false"})
        cluster = None
        try:
            broker.start()
            dirs = [str(d) for d in broker.log_dirs]
            create_topic(broker.bootstrap, "big", 1)
            create_topic(broker.bootstrap, "paced", 1)
            create_topic(broker.bootstrap, "traffic", 8)
            print(f"filling big with {args.gib:g} GiB...", file=sys.stderr, flush=True)
            fill(broker.bootstrap, "big", int(args.gib * 1024 * MiB))
            fill(broker.bootstrap, "paced", args.throttled_mib * MiB)
            cluster = Cluster.discover(broker.bootstrap)

            # 1. move vs plain copy, interleaved; each move goes to the other dir and back.
            moves: list[tuple[float, int]] = []
            plain: list[tuple[float, int]] = []
            plain_synced: list[tuple[float, int]] = []
            for run in range(args.repeat):
                home = where(cluster, "big")[0][0]
                partition_dir = Path(home) / "big-0"
                plain.append(plain_copy(partition_dir, Path(home) / f"plain-copy-{run}", fsync=False))
                plain_synced.append(plain_copy(partition_dir, Path(home) / f"synced-copy-{run}", fsync=True))
                target = dirs[1] if home == dirs[0] else dirs[0]
                moves.append(move(cluster, "big", target))
                print(f"run {run}: move {moves[-1][1] / MiB / moves[-1][0]:.0f} MiB/s, plain copy "
                      f"{plain[-1][1] / MiB / plain[-1][0]:.0f} MiB/s, with fsync "
                      f"{plain_synced[-1][1] / MiB / plain_synced[-1][0]:.0f} MiB/s", file=sys.stderr, flush=True)

            # 3. produce throughput with and without an unthrottled move going on, interleaved.
            with_move: list[float] = []
            without: list[float] = []
            moves_during = 0
            for _ in range(args.repeat):
                without.append(produce_for(broker.bootstrap, "traffic", args.produce_records))
                stop = threading.Event()
                count = [0]

                def keep_moving(stop: threading.Event = stop, count: list[int] = count) -> None:
                    mover_cluster = Cluster.discover(broker.bootstrap)
                    try:
                        while not stop.is_set():
                            here = where(mover_cluster, "big")[0][0]
                            move(mover_cluster, "big", dirs[1] if here == dirs[0] else dirs[0], poll=0.05)
                            count[0] += 1
                    finally:
                        mover_cluster.close()

                mover = threading.Thread(target=keep_moving, daemon=True)
                mover.start()
                started = time.monotonic()
                while count[0] == 0 and not any(future for _, future, _ in where(cluster, "big")):
                    if time.monotonic() - started > 30:  # the first copy has begun, or already ended
                        raise RuntimeError("the mover did not start a move of big within 30 s")
                    time.sleep(0.005)
                with_move.append(produce_for(broker.bootstrap, "traffic", args.produce_records))
                stop.set()
                mover.join(120)
                moves_during += count[0]
                print(f"produce {without[-1]:.0f} MiB/s alone, {with_move[-1]:.0f} MiB/s during moves",
                      file=sys.stderr, flush=True)

            # 2. throttle accuracy.
            rate = int(args.throttle_mb * 1_000_000)
            set_throttle(broker.bootstrap, rate)
            home = where(cluster, "paced")[0][0]
            seconds, size = move(cluster, "paced", dirs[1] if home == dirs[0] else dirs[0])
            set_throttle(broker.bootstrap, 2**63 - 1)
            pauses = swap_pauses(broker.stderr_text(2_000_000))
        finally:
            if cluster is not None:
                cluster.close()
            broker.close()

    def rate_of(samples: list[tuple[float, int]]) -> float:
        return statistics.median(b / MiB / s for s, b in samples)

    move_rate, plain_rate, synced_rate = rate_of(moves), rate_of(plain), rate_of(plain_synced)
    achieved = size / seconds
    print(f"## moves between log dirs ({platform.machine()}, Python {platform.python_version()}, both log dirs "
          f"on one file system, {args.repeat} interleaved runs, medians)\n")
    print("| measure | value |")
    print("|---|---:|")
    print(f"| move of a {args.gib:g} GiB partition ({SEGMENT_BYTES // MiB} MiB segments), request to done "
          f"| {move_rate:.0f} MiB/s |")
    print(f"| plain os.copy_file_range of the same files | {plain_rate:.0f} MiB/s |")
    print(f"| plain os.copy_file_range + fsync of each file | {synced_rate:.0f} MiB/s |")
    print(f"| move / plain copy | {move_rate / plain_rate:.2f} |")
    print(f"| move / plain copy with fsync | {move_rate / synced_rate:.2f} |")
    print(f"| throttle {args.throttle_mb:g} MB/s: {size / MiB:.0f} MiB moved at | {achieved / 1e6:.1f} MB/s "
          f"({(achieved - rate) / rate * 100:+.1f}%) |")
    print(f"| produce, acks=1, 1 KiB records, no move | {statistics.median(without):.0f} MiB/s |")
    print(f"| produce during unthrottled moves ({moves_during} moves of {args.gib:g} GiB) | "
          f"{statistics.median(with_move):.0f} MiB/s ({statistics.median(with_move) / statistics.median(without):.2f}x) |")
    if pauses:
        print(f"| appends held by a swap (all {len(pauses)} swaps) | median {statistics.median(pauses):.1f} ms, "
              f"max {max(pauses):.1f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
