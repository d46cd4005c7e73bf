"""The disk balancer (`make bench` runs it through bench/run.py): two figures.

1. Bytes the planner moves against the lower bound (the bytes that must move to reach the
   threshold were replicas divisible, replica/balance_plan.py's bytes_to_balance), on generated
   brokers of several shapes (one full disk, a replaced empty disk, random fill, disks of
   different sizes, many small replicas), with the time the plan took.
2. A real broker whose three log dirs are tmpfs disks (needs mount; skipped with the reason
   otherwise): produce throughput (confluent-kafka, acks=1, 1 KiB records) with the balancer
   off, against the same producer while the balancer evens out a disk holding all of a bulk
   topic (moves throttled by replica.alter.log.dirs.io.max.bytes.per.second), interleaved,
   medians; and for those balances the bytes the broker planned and moved against the lower
   bound computed from os.statvfs of the disks when the balancer was switched on.

Usage: .venv/bin/python bench/bench_balancer.py [--repeat 3] [--bulk-mib 256] [--throttle-mb 50]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from kafka import KafkaAdminClient  # noqa: E402
from kafka.admin import ConfigResource, ConfigResourceType  # noqa: E402
from kafka.structs import TopicPartitionReplica  # noqa: E402

from bench.bench_move import fill, produce_for  # noqa: E402
from minikafka.replica.balance_plan import DirLoad, ReplicaLoad, bytes_to_balance, plan_balance  # noqa: E402
from minikafka.storage.units import format_bytes  # noqa: E402
from tests.integration.broker_process import BrokerProcess, wait_until  # noqa: E402
from tests.integration.clients import create_topic  # noqa: E402
from tests.integration.disk_faults import Tmpfs, mount_unavailable  # noqa: E402
from tests.integration.test_a2_move_every_replica import replica_dirs  # noqa: E402
from tests.system.observe import alter_configs, metric_sample  # noqa: E402

MiB = 1 << 20
GB = 10**9
THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
UNLIMITED = str(2**63 - 1)
BULK_PARTITIONS = 16


# ---- 1. the planner on generated brokers ---------------------------------------------------


def generated(shape: str, rng: random.Random) -> tuple[list[DirLoad], list[ReplicaLoad]]:
    """A broker of ``shape``: its disks and replicas (sizes 1 MB to 2 GB, a quarter growing)."""
    def replicas_of(log_dir: str, total: int, count: int, topic: str) -> list[ReplicaLoad]:
        weights = [rng.uniform(0.05, 1) ** 2 for _ in range(count)]
        return [ReplicaLoad(topic, i, log_dir, max(GB // 1000, int(total * w / sum(weights))),
                            growth_bytes_per_s=rng.choice([0, 0, 0, rng.uniform(1e3, 5e6)]))
                for i, w in enumerate(weights)]

    if shape == "one full disk of 3":
        fills, sizes, counts = [0.8, 0.1, 0.1], [2000 * GB] * 3, [300, 40, 40]
    elif shape == "replaced empty disk of 4":
        fills, sizes, counts = [0.6, 0.6, 0.6, 0.0], [4000 * GB] * 4, [250, 250, 250, 0]
    elif shape == "random fill, 6 disks":
        fills, sizes, counts = [rng.uniform(0.2, 0.9) for _ in range(6)], [2000 * GB] * 6, [150] * 6
    elif shape == "disks of 1, 2 and 4 TB":
        fills, sizes, counts = [0.9, 0.5, 0.2], [1000 * GB, 2000 * GB, 4000 * GB], [200, 200, 200]
    else:  # many small replicas
        fills, sizes, counts = [rng.uniform(0.3, 0.8) for _ in range(12)], [1000 * GB] * 12, [1000] * 12
    dirs, replicas = [], []
    for i, (share, size, count) in enumerate(zip(fills, sizes, counts, strict=True)):
        placed = replicas_of(f"/disk{i}", int(share * size * 0.95), count, f"t{i}") if count else []
        used = sum(r.size_bytes for r in placed) + int(share * size * 0.05)
        dirs.append(DirLoad(f"/disk{i}", size, size - used, f"fs{i}"))
        replicas += placed
    return dirs, replicas


def planner_table(seed: int = 24) -> str:
    rng = random.Random(seed)
    lines = ["| broker | replicas | threshold | spread before | lower bound | planned | planned / bound | moves "
             "| spread after | plan time |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for shape in ("one full disk of 3", "replaced empty disk of 4", "random fill, 6 disks", "disks of 1, 2 and 4 TB",
                  "12 disks, 12 000 replicas"):
        dirs, replicas = generated(shape, rng)
        for threshold in (10.0, 2.0):
            started = time.perf_counter()
            plan = plan_balance(dirs, replicas, threshold)
            took = time.perf_counter() - started
            ratio = f"{plan.planned_bytes / plan.lower_bound_bytes:.4f}" if plan.lower_bound_bytes else "-"
            lines.append(f"| {shape} | {len(replicas)} | {threshold:g} | {plan.spread_before:.1f} | "
                         f"{format_bytes(plan.lower_bound_bytes)} | {format_bytes(plan.planned_bytes)} | {ratio} | "
                         f"{len(plan.moves)} | {plan.spread_after:.2f} | {took * 1000:.0f} ms |")
    return "\n".join(lines)


# ---- 2. a real broker on three tmpfs disks ---------------------------------------------------


def set_configs(broker: BrokerProcess, **configs: str) -> None:
    alter_configs(broker.bootstrap, ConfigResource(ConfigResourceType.BROKER, "1", configs=configs))


def shares(broker: BrokerProcess) -> list[tuple[int, float]]:
    found = []
    for d in broker.log_dirs:
        st = os.statvfs(d)
        found.append((st.f_blocks * st.f_frsize, float((st.f_blocks - st.f_bavail) * st.f_frsize)))
    return found


def pile(broker: BrokerProcess) -> None:
    """Every bulk partition into the first dir, unthrottled."""
    first = str(broker.log_dirs[0])
    set_configs(broker, **{THROTTLE: UNLIMITED})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="bench-balancer")
    try:
        admin.alter_replica_log_dirs({TopicPartitionReplica("bulk", p, 1): first for p in range(BULK_PARTITIONS)})
    finally:
        admin.close()
    wait_until(lambda: all(replica_dirs(broker.bootstrap).get(("bulk", p)) == [(first, False)]
                           for p in range(BULK_PARTITIONS)), timeout=300, interval=0.1, what="the bulk topic piled up")


def balancing(broker: BrokerProcess) -> bool:
    return metric_sample(broker, "minikafka_log_dir_balancer_moves_in_progress") > 0


def broker_figures(args: argparse.Namespace) -> str:
    why = mount_unavailable()
    if why is not None:
        return f"(the broker part needs three tmpfs mounts, skipped: {why})"
    threshold = 5.0
    rate = int(args.throttle_mb * 1_000_000)
    alone: list[float] = []
    during: list[float] = []
    overlapped = 0
    bounds: list[tuple[float, float, float]] = []  # (lower bound, planned, moved)
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-balancer-", dir=os.environ.get("BENCH_DIR")) as tmp:
        broker = BrokerProcess(Path(tmp) / "broker", log_dir_count=3, overrides={
            "log.segment.bytes": str(16 * MiB), "auto.create.topics.enable": "false",
            "log.dirs.balancer.threshold.percent": str(threshold), "log.dirs.balancer.interval.ms": "200",
            "log.segment.delete.delay.ms": "0"})
        mounts = [Tmpfs(d, args.disk_mib * MiB) for d in broker.log_dirs]
        try:
            for mount in mounts:
                mount.mount()
            broker.start()
            create_topic(broker.bootstrap, "bulk", BULK_PARTITIONS)
            for p in range(BULK_PARTITIONS):
                fill(broker.bootstrap, "bulk", args.bulk_mib * MiB // BULK_PARTITIONS, partition=p)
            for run in range(args.repeat):
                pile(broker)
                set_configs(broker, **{THROTTLE: str(rate)})
                create_topic(broker.bootstrap, f"alone-{run}", 8)
                alone.append(produce_for(broker.bootstrap, f"alone-{run}", args.produce_records))
                bound = bytes_to_balance(shares(broker), threshold)
                planned = metric_sample(broker, "minikafka_log_dir_balancer_planned_bytes_total")
                moved = metric_sample(broker, "minikafka_log_dir_balancer_moved_bytes_total")
                set_configs(broker, **{"log.dirs.balancer.enable": "true"})
                wait_until(lambda: balancing(broker), timeout=30, interval=0.01, what="the balancer moving")
                create_topic(broker.bootstrap, f"during-{run}", 8)
                during.append(produce_for(broker.bootstrap, f"during-{run}", args.produce_records))
                overlapped += balancing(broker)
                wait_until(lambda: not balancing(broker) and metric_sample(
                    broker, "minikafka_log_dir_balancer_spread_percent") <= threshold, timeout=600, interval=0.1,
                    what="the balance done")
                set_configs(broker, **{"log.dirs.balancer.enable": "false"})
                bounds.append((bound, metric_sample(broker, "minikafka_log_dir_balancer_planned_bytes_total") - planned,
                               metric_sample(broker, "minikafka_log_dir_balancer_moved_bytes_total") - moved))
                admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="bench-balancer")
                try:
                    admin.delete_topics([f"alone-{run}", f"during-{run}"])
                finally:
                    admin.close()
                print(f"run {run}: produce {alone[-1]:.0f} MiB/s alone, {during[-1]:.0f} MiB/s while balancing; "
                      f"planned {format_bytes(bounds[-1][1])}, lower bound {format_bytes(bound)}", file=sys.stderr,
                      flush=True)
        finally:
            broker.close()
            for mount in mounts:
                mount.close()
    lines = [f"Three tmpfs disks of {args.disk_mib} MiB, a bulk topic of {args.bulk_mib} MiB ({BULK_PARTITIONS} "
             f"partitions) piled on the first, threshold {threshold:g} points, moves throttled at "
             f"{args.throttle_mb:g} MB/s; {args.repeat} interleaved runs, medians.\n",
             "| measure | value |", "|---|---:|",
             f"| produce, acks=1, 1 KiB records, balancer off | {statistics.median(alone):.0f} MiB/s |",
             f"| the same while the balancer moves (it was still moving when {overlapped} of {args.repeat} runs ended) | "
             f"{statistics.median(during):.0f} MiB/s ({statistics.median(during) / statistics.median(alone):.2f}x) |"]
    for i, (bound, planned, moved) in enumerate(bounds):
        lines.append(f"| run {i}: bytes planned / moved / lower bound | {format_bytes(planned)} / "
                     f"{format_bytes(moved)} / {format_bytes(bound)} ({planned / bound:.2f}x) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bulk-mib", type=int, default=256, help="size of the bulk topic piled on one disk")
    parser.add_argument("--disk-mib", type=int, default=1024, help="size of each tmpfs disk")
    parser.add_argument("--throttle-mb", type=float, default=50.0, help="move throttle while balancing, MB/s")
    parser.add_argument("--produce-records", type=int, default=300_000)
    args = parser.parse_args(argv)
    print(f"## the disk balancer ({platform.machine()}, Python {platform.python_version()})\n")
    print("Bytes planned against the lower bound on generated brokers (replicas of 1 MB to 2 GB, a quarter "
          "growing):\n")
    print(planner_table())
    print()
    print(broker_figures(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
