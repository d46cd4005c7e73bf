"""Cluster figures (make bench): a real ZooKeeper and three real brokers on this machine.

1. Produce MiB/s, RF 3 acks=all (min.insync.replicas=2) against RF 1 acks=1, interleaved runs.
2. Failover: kill -9 the leader of a partition under a one-at-a-time acks=all producer; the time
   from the kill to the first acknowledged produce on its successor, and that time less the
   ZooKeeper session timeout (a dead broker is noticed when its session expires).
3. Catch-up: a follower is down while the leader takes N MiB; the time from its restart until
   it is back in the ISR, against a plain copy of the same segment files on this disk.
4. Dir failure (scenario C4): the log dir holding a partition's leader replica is replaced by a
   regular file under a one-at-a-time acks=all producer; the time from the failure to the first
   acknowledged produce on the new leader. The broker is then restarted with an empty dir.
5. Replication throttle (KIP-73) accuracy: a follower that missed M MiB catches up under a
   50 MB/s throttle, on the follower's side and then on the leader's; the rate the throttling
   broker's throttled-bytes counter grows at (least squares over samples every 0.1 s) while the
   follower is between 10% and 90% of the way.
6. Reassignment (KIP-455): a partition of R MiB moved from one broker to another, request to done,
   against a plain copy of the same segment files over loopback TCP.

Prints a markdown report. Usage: .venv/bin/python bench/bench_cluster.py [--mib M] [--repeat R]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import confluent_kafka  # noqa: E402
from kafka import KafkaAdminClient, TopicPartition  # noqa: E402
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, NewTopic  # noqa: E402

from bench.run import MiB, produce  # noqa: E402
from tests.integration.broker_process import wait_until  # noqa: E402
from tests.integration.disk_faults import replace_with_empty_dir, replace_with_file  # noqa: E402
from tests.system.cluster import CLUSTER_SETTINGS, Cluster  # noqa: E402
from tests.system.observe import alter_configs, log_bytes, metric_sample  # noqa: E402
from tests.system.zookeeper import ZooKeeperProcess  # noqa: E402

SESSION_TIMEOUT_MS = 4000
THROTTLE_RATE = 50_000_000



def throughput(cluster: Cluster, records: int, repeat: int) -> list[str]:
    rates: dict[str, list[float]] = {"RF 1, acks=1": [], "RF 3, acks=all": []}
    for run in range(repeat):
        for label, replication, acks in (("RF 1, acks=1", 1, "1"), ("RF 3, acks=all", 3, "all")):
            topic = f"throughput-rf{replication}-{run}"
            cluster.create_topic(topic, 3, replication, **{"min.insync.replicas": "2" if replication == 3 else "1"})
            rates[label].append(produce(cluster.bootstrap, topic, 3, records, 1024, acks, 300).mib_per_s)
            print(f"{label} run {run}: {rates[label][-1]:.1f} MiB/s", file=sys.stderr, flush=True)
    base, replicated = (statistics.median(rates[k]) for k in ("RF 1, acks=1", "RF 3, acks=all"))
    return [
        f"### Produce, 3 partitions, {records} records of 1 KiB per run, median of {repeat}\n",
        "| topic | MiB/s (median) | runs |", "|---|---:|---|",
        *(f"| {label} | {statistics.median(v):.1f} | {', '.join(f'{x:.0f}' for x in v)} |" for label, v in rates.items()),
        f"\nRF 3 acks=all / RF 1 acks=1 = **{replicated / base:.2f}** (aim: at least 0.5)\n",
    ]


def one_failover(cluster: Cluster, topic: str) -> float:
    """Seconds from kill -9 of the partition's leader to the first acknowledged produce."""
    cluster.create_topic(topic, 1, 3, **{"min.insync.replicas": "2"})
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                         "retry.backoff.ms": 10, "retry.backoff.max.ms": 50,
                                         "topic.metadata.refresh.interval.ms": 100, "linger.ms": 0})
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    victim = cluster.leader(topic, 0)
    killed = time.monotonic()
    cluster.brokers[victim].kill9()
    took = acknowledged_after(producer, topic, killed)
    cluster.brokers[victim].start()
    cluster.wait_for_leaders(topic, 1, isr_size=3, timeout=60)
    return took


def acknowledged_after(producer: confluent_kafka.Producer, topic: str, start: float) -> float:
    """Seconds from ``start`` to the first acknowledged produce (one at a time, retried)."""
    acked: list[float] = []

    def delivered(error: object, _message: object) -> None:
        if error is None:
            acked.append(time.monotonic())

    while not acked and time.monotonic() < start + 60:
        producer.produce(topic, b"after", on_delivery=delivered)
        producer.flush(1)
    if not acked:
        raise RuntimeError("no acknowledged produce within 60 s of the fault")
    return acked[0] - start


def one_dir_failover(cluster: Cluster, topic: str) -> float:
    """Seconds from the failure of the dir holding the leader replica to the first acknowledged produce."""
    cluster.create_topic(topic, 1, 3, **{"min.insync.replicas": "2"})
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                         "retry.backoff.ms": 10, "retry.backoff.max.ms": 50,
                                         "topic.metadata.refresh.interval.ms": 100, "linger.ms": 0})
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    victim = cluster.brokers[cluster.leader(topic, 0)]
    log_dir = victim.partition_dirs()[f"{topic}-0"]
    failed = time.monotonic()
    replace_with_file(log_dir)
    took = acknowledged_after(producer, topic, failed)
    # The operator replaces the disk: the broker's replicas there come back by replication.
    victim.stop()
    replace_with_empty_dir(log_dir)
    victim.start()
    cluster.wait_for_leaders(topic, 1, isr_size=3, timeout=60)
    return took


def dir_failover(cluster: Cluster, repeat: int) -> list[str]:
    durations: list[float] = []
    for run in range(repeat):
        durations.append(one_dir_failover(cluster, f"dir-failover-{run}"))
        print(f"dir failover run {run}: {durations[-1]:.2f} s", file=sys.stderr, flush=True)
    mid = statistics.median(durations)
    return [
        f"### Log dir failure under the leader (C4), median of {repeat}\n",
        f"the leader's log dir replaced by a regular file to the first acknowledged acks=all produce on the new "
        f"leader: **{mid:.2f} s** (runs: {', '.join(f'{d:.2f}' for d in durations)}; aim: under 2 s); "
        f"log.dir.check.interval.ms={CLUSTER_SETTINGS['log.dir.check.interval.ms']} notices the replaced dir\n",
    ]


def failover(cluster: Cluster, repeat: int) -> list[str]:
    durations: list[float] = []
    for run in range(repeat):
        durations.append(one_failover(cluster, f"failover-{run}"))
        print(f"failover run {run}: {durations[-1]:.2f} s", file=sys.stderr, flush=True)
    mid = statistics.median(durations)
    return [
        f"### Failover, median of {repeat}\n",
        f"kill -9 of the leader to the first acknowledged acks=all produce on its successor: **{mid:.2f} s** "
        f"(runs: {', '.join(f'{d:.2f}' for d in durations)}); zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}, so "
        f"**{mid - SESSION_TIMEOUT_MS / 1000:.2f} s** after the session expires (aim: under 1 s)\n",
    ]


def catch_up(cluster: Cluster, mib: int) -> list[str]:
    topic = "catch-up"
    cluster.create_topic(topic, 1, 3, **{"min.insync.replicas": "1"})
    leader = cluster.leader(topic, 0)
    follower = next(b for b in cluster.brokers if b != leader)
    cluster.brokers[follower].kill9()
    # Once its session has expired, so the restart below does not wait for that.
    wait_until(lambda: follower not in {b.node_id for b in cluster.metadata().brokers}, 60, interval=0.1,
               what="the stopped follower gone from Metadata")
    produce(cluster.bootstrap, topic, 1, mib * 1024, 1024, "1", 300)
    restarted = time.monotonic()
    cluster.brokers[follower].start()
    wait_until(lambda: follower in cluster.partitions(topic)[0].isr_nodes, 600, interval=0.05,
               what="the follower back in the ISR")
    replicated = time.monotonic() - restarted
    source = cluster.brokers[leader].partition_dirs()[f"{topic}-0"] / f"{topic}-0"
    size = sum(f.stat().st_size for f in source.glob("*.log"))
    with tempfile.TemporaryDirectory(dir=source.parent.parent) as target:
        started = time.monotonic()
        for segment in source.glob("*.log"):
            shutil.copyfile(segment, Path(target) / segment.name)
        copied = time.monotonic() - started
    return [
        f"### Catch-up of a follower that missed {size / MiB:.0f} MiB\n",
        "| what | seconds | MiB/s |", "|---|---:|---:|",
        f"| restart to back in the ISR (includes its startup) | {replicated:.2f} | {size / MiB / replicated:.0f} |",
        f"| plain copy of the same segment files (shutil.copyfile) | {copied:.2f} | {size / MiB / copied:.0f} |",
        "",
    ]


def one_throttled_catch_up(cluster: Cluster, topic: str, direction: str, mib: int) -> tuple[float, int]:
    """(bytes/s, bytes): how fast the throttled-bytes counter of the throttling broker grew while
    the restarted follower was between 10% and 90% of its catch-up."""
    cluster.create_topic(topic, 1, 3, **{"min.insync.replicas": "1"})
    leader = cluster.leader(topic, 0)
    follower = next(b for b in cluster.brokers if b != leader)
    throttling = cluster.brokers[follower if direction == "follower" else leader]
    rate_key = f"{direction}.replication.throttled.rate"
    alter_configs(cluster.bootstrap, ConfigResource(ConfigResourceType.BROKER, str(throttling.broker_id),
                                                    configs={rate_key: str(THROTTLE_RATE)}))
    cluster.brokers[follower].kill9()
    wait_until(lambda: follower not in {b.node_id for b in cluster.metadata().brokers}, 60, interval=0.1,
               what="the stopped follower gone from Metadata")
    produce(cluster.bootstrap, topic, 1, mib * 1024, 1024, "1", 300)
    # Set now, so the in-sync follower's bytes while producing are not counted.
    alter_configs(cluster.bootstrap, ConfigResource(ConfigResourceType.TOPIC, topic, configs={
        f"{direction}.replication.throttled.replicas": f"0:{throttling.broker_id}"}))
    counter = "minikafka_replication_throttled_bytes_total"
    before = metric_sample(throttling, counter, direction=direction) if direction == "leader" else 0.0
    size = log_bytes(cluster.brokers[leader], topic, 0)
    # An in-sync replica is never held back: it must have left the ISR before it comes back.
    wait_until(lambda: follower not in cluster.partitions(topic)[0].isr_nodes, 60, interval=0.1,
               what="the stopped follower out of the ISR")
    cluster.brokers[follower].start()
    samples: list[tuple[float, float]] = []
    while follower not in cluster.partitions(topic)[0].isr_nodes:
        samples.append((time.monotonic(), metric_sample(throttling, counter, direction=direction) - before))
        time.sleep(0.1)
    steady = [(t, b) for t, b in samples if 0.1 * size <= b <= 0.9 * size]
    alter_configs(cluster.bootstrap, ConfigResource(ConfigResourceType.BROKER, str(throttling.broker_id),
                                                    configs={rate_key: (AlterConfigOp.DELETE, None)}))
    if len(steady) < 2:
        raise RuntimeError(f"{direction} throttle: too few samples during the catch-up ({len(samples)} in all)")
    # The least-squares slope: the counter moves in steps of one fetch, which endpoints alone would overweight.
    return statistics.linear_regression([t for t, _ in steady], [b for _, b in steady]).slope, size


def throttle_accuracy(cluster: Cluster, mib: int) -> list[str]:
    rows = []
    for direction in ("follower", "leader"):
        measured, size = one_throttled_catch_up(cluster, f"throttle-{direction}", direction, mib)
        error = measured / THROTTLE_RATE - 1
        print(f"{direction} throttle: {measured / 1e6:.1f} MB/s ({error:+.1%})", file=sys.stderr, flush=True)
        rows.append(f"| {direction}.replication.throttled.rate | {size / MiB:.0f} | {measured / 1e6:.1f} | "
                    f"{error:+.1%} |")
    return [
        f"### Replication throttle accuracy at {THROTTLE_RATE / 1e6:.0f} MB/s (aim: within 10%)\n",
        "a follower that missed the data catches up one partition under the throttle; the rate of the "
        "throttling broker's minikafka_replication_throttled_bytes_total between 10% and 90% of the way\n",
        "| throttle | MiB missed | MB/s | error |", "|---|---:|---:|---:|", *rows, "",
    ]


def loopback_copy(files: list[Path], target: Path) -> float:
    """Seconds to send ``files`` over a 127.0.0.1 TCP connection (sendfile) into ``target``, each
    written to disk: the plain copy a reassignment between brokers on this machine is set against."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def receive() -> None:
        connection, _ = server.accept()
        with connection:
            for source in files:
                remaining = source.stat().st_size
                with open(target / source.name, "wb") as out:
                    while remaining:
                        chunk = connection.recv(min(remaining, 1 << 20))
                        if not chunk:
                            raise ConnectionError("the sender closed early")
                        out.write(chunk)
                        remaining -= len(chunk)

    receiver = threading.Thread(target=receive)
    receiver.start()
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as sender:
        for source in files:
            with open(source, "rb") as data:
                sender.sendfile(data)
    receiver.join()
    server.close()
    return time.monotonic() - started


def reassignment(cluster: Cluster, mib: int) -> list[str]:
    """A 1-partition topic of ``mib`` MiB on one broker, reassigned to another."""
    topic = "reassigned"
    source, target = 1, 2
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, replica_assignments={0: [source]})])
        cluster.wait_for_leaders(topic, 1)
        produce(cluster.bootstrap, topic, 1, mib * 1024, 1024, "1", 600)
        size = log_bytes(cluster.brokers[source], topic, 0)
        started = time.monotonic()
        admin.alter_partition_reassignments({TopicPartition(topic, 0): [target]})
        wait_until(lambda: cluster.partitions(topic)[0].replica_nodes == [target]
                   and not admin.list_partition_reassignments(), 600, interval=0.05, what="the reassignment done")
        moved = time.monotonic() - started
    finally:
        admin.close()
    files = sorted((cluster.brokers[target].partition_dirs()[f"{topic}-0"] / f"{topic}-0").glob("*.log"))
    with tempfile.TemporaryDirectory(dir=cluster.brokers[target].root) as copy_dir:
        copied = loopback_copy(files, Path(copy_dir))
    ratio = copied / moved
    return [
        f"### Reassignment of {size / MiB:.0f} MiB from broker {source} to broker {target}\n",
        "| what | seconds | MB/s |", "|---|---:|---:|",
        f"| AlterPartitionReassignments to the move done (new replica in sync, old one deleted) | {moved:.2f} | "
        f"{size / 1e6 / moved:.0f} |",
        f"| plain copy of the same segment files over loopback TCP (sendfile, written to disk) | {copied:.2f} | "
        f"{size / 1e6 / copied:.0f} |",
        f"\nreassignment / plain copy = **{ratio:.2f}** (aim: at least 0.7)\n",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="records per throughput run")
    parser.add_argument("--mib", type=int, default=256, help="MiB a follower misses in the catch-up run")
    parser.add_argument("--throttle-mib", type=int, default=512, help="MiB a follower catches up under a throttle")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reassign-mib", type=int, default=1024, help="MiB of the partition reassigned")
    parser.add_argument("--only", choices=["throughput", "failover", "catch-up", "dir-failover", "throttle",
                                           "reassignment"],
                        help="run one measure only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-cluster-") as tmp:
        zookeeper = ZooKeeperProcess(Path(tmp) / "zookeeper")
        cluster = Cluster(Path(tmp), zookeeper, overrides={
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS), "auto.create.topics.enable": "false",
            "replica.fetch.max.bytes": str(8 * MiB), "replica.fetch.response.max.bytes": str(32 * MiB)},
            metrics=True)
        try:
            zookeeper.start()
            cluster.start()
            report = ["## Cluster: ZooKeeper and three brokers on this machine (bench/bench_cluster.py)\n"]
            if args.only in (None, "throughput"):
                report += throughput(cluster, args.records, args.repeat)
            if args.only in (None, "failover"):
                report += failover(cluster, args.repeat)
            if args.only in (None, "catch-up"):
                report += catch_up(cluster, args.mib)
            if args.only in (None, "dir-failover"):
                report += dir_failover(cluster, args.repeat)
            if args.only in (None, "throttle"):
                report += throttle_accuracy(cluster, args.throttle_mib)
            if args.only in (None, "reassignment"):
                report += reassignment(cluster, args.reassign_mib)
        except BaseException:
            print(cluster.stderr(), file=sys.stderr)
            raise
        finally:
            cluster.close()
            zookeeper.close()
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
