"""`make bench`: throughput of a real minikafka broker with confluent-kafka, and the codec's cost.

Starts its own broker (temporary log dirs, free ports; always stopped at the end), then for
acks=1 and acks=all and 1 and 8 partitions: produces N uncompressed 1 KiB records into a fresh
topic and reads them all back, timing each; every configuration runs R times, interleaved.
Prints a markdown table, then runs bench/bench_codec.py (the protocol codec's cost per
request), bench/bench_rebalance.py (consumer group rebalance time), bench/bench_consumer_protocol.py
(one member of ten leaving, KIP-848's consumer protocol against the classic one), bench/bench_move.py (moves
between log dirs), bench/bench_balancer.py (the disk balancer: bytes planned against the lower
bound, produce throughput while it balances), bench/bench_spark.py (the Spark data source's batch
read), bench/bench_cleaner.py (log compaction), bench/bench_produce_cpu.py (the broker's CPU per
produced record), bench/bench_cluster.py (replication, failover, catch-up, reassignment and topic
creation in a three-broker cluster), bench/bench_tls.py (TLS against plaintext on one broker),
bench/bench_txn.py (transactional produce against the same producer without transactions) and
bench/vs_kafka.py (Apache Kafka and minikafka side by side, the same figures for both), and
prints their reports, then the replication figures of issue 23 side by side with their aims.

Usage: .venv/bin/python bench/run.py [--records N] [--record-bytes B] [--repeat R] [--skip-codec] [--skip-rebalance]
       [--skip-move] [--skip-balancer] [--skip-spark] [--skip-cleaner] [--skip-cpu] [--skip-cluster] [--skip-tls]
       [--skip-txn] [--skip-vs-kafka]
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import confluent_kafka  # noqa: E402

from tests.integration.broker_process import BrokerProcess  # noqa: E402
from tests.integration.clients import create_topic  # noqa: E402

MiB = 1024 * 1024


@dataclass
class Result:
    """The timing of one produce or consume run."""

    operation: str
    acks: str
    partitions: int
    records: int
    payload_bytes: int
    seconds: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mib_per_s(self) -> float:
        return self.payload_bytes / MiB / self.seconds


def produce(bootstrap: str, topic: str, partitions: int, records: int, record_bytes: int, acks: str,
            timeout: float, client: dict[str, str] | None = None) -> Result:
    """``client``: more librdkafka settings (TLS, SASL)."""
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "enable.idempotence": False,
        "compression.type": "none",
        "linger.ms": 5,
        "queue.buffering.max.kbytes": 256 * 1024,
        **(client or {}),
    })
    value = bytes(record_bytes)
    failures: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None and len(failures) < 5:
            failures.append(str(err))

    producer.list_topics(topic, timeout=10)  # connect and learn leaders before the clock starts
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value=value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
    remaining = flushed(producer, timeout)
    elapsed = time.perf_counter() - started
    if remaining or failures:
        raise RuntimeError(f"produce to {topic}: {remaining} undelivered, errors {failures}")
    return Result("produce", acks, partitions, records, records * record_bytes, elapsed)


def flushed(producer: confluent_kafka.Producer, timeout: float) -> int:
    """producer.flush(timeout) in half-second slices; the records still queued. One long flush holds
    off Ctrl-C and SIGTERM until it returns (Python runs a signal's handler between two calls), and
    with a broker gone that is the whole timeout: a bench stopped then would stop minutes later."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = producer.flush(min(0.5, max(0.0, deadline - time.monotonic())))
        if not remaining or time.monotonic() >= deadline:
            return int(remaining)


def consume(bootstrap: str, topic: str, partitions: int, records: int, acks: str, timeout: float,
            client: dict[str, str] | None = None) -> Result:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "bench-never-committed",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "fetch.max.bytes": 50 * MiB,
        "max.partition.fetch.bytes": 8 * MiB,
        **(client or {}),
    })
    try:
        # Connect and learn leaders and offsets before the clock starts.
        consumer.list_topics(topic, timeout=10)
        for p in range(partitions):
            consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in range(partitions)])
        seen = 0
        payload = 0
        started = time.perf_counter()
        deadline = started + timeout
        while seen < records:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"consume from {topic}: {seen} of {records} records after {timeout}s")
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                if msg.error() is not None:
                    raise RuntimeError(f"consume from {topic}: {msg.error()}")
                seen += 1
                payload += len(msg.value())
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    return Result("consume", acks, partitions, seen, payload, elapsed)


def table(results: list[Result]) -> str:
    """One row per (operation, acks, partitions): the median run, and the spread of all runs."""
    groups: dict[tuple[str, str, int], list[Result]] = {}
    for r in results:
        groups.setdefault((r.operation, r.acks, r.partitions), []).append(r)
    lines = [
        "| operation | acks | partitions | records/run | runs | MiB/s (median) | records/s (median) | MiB/s min-max |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (operation, acks, partitions), runs in groups.items():
        runs = sorted(runs, key=lambda r: r.mib_per_s)
        mid = runs[len(runs) // 2]
        lines.append(f"| {operation} | {acks} | {partitions} | {mid.records} | {len(runs)} | {mid.mib_per_s:.1f} | "
                     f"{mid.records_per_s:,.0f} | {runs[0].mib_per_s:.1f}-{runs[-1].mib_per_s:.1f} |")
    return "\n".join(lines)


def run_script(name: str, timeout: float, *args: str) -> str:
    """Run bench/<name> with this interpreter; its stdout, or why it failed."""
    script = REPO_ROOT / "bench" / name
    with subprocess.Popen([sys.executable, str(script), *args], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as bench:
        try:
            stdout, stderr = bench.communicate(timeout=timeout)
        except KeyboardInterrupt:
            # Ctrl-C reached the bench too: it is stopping its brokers and removing its data, which
            # subprocess.run's kill would cut short.
            bench.communicate(timeout=120)
            raise
        except subprocess.TimeoutExpired:
            bench.terminate()  # the benches clean up on SIGTERM as on Ctrl-C
            bench.communicate(timeout=120)
            raise
    if bench.returncode != 0:
        return f"bench/{name} failed with exit code {bench.returncode}:\n{stderr[-3000:]}"
    return stdout.rstrip()


def record_figure(path: Path | None, name: str, value: float, aim: str, met: bool) -> None:
    """Add one headline figure to the file ``--figures`` named (one JSON object a line)."""
    if path is not None:
        with path.open("a") as figures:
            figures.write(json.dumps({"name": name, "value": value, "aim": aim, "met": met}) + "\n")


def figures_table(path: Path) -> str:
    if not path.exists():
        return "(no figures: the benches that report them failed or were skipped)"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return "\n".join(["| figure (median of three) | value | aim | met |", "|---|---:|---|---|",
                      *(f"| {r['name']} | {r['value']:.2f} | {r['aim']} | {'yes' if r['met'] else 'no'} |"
                        for r in rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per produce run")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3, help="runs per configuration (median reported)")
    parser.add_argument("--timeout", type=float, default=120.0, help="limit per run, seconds")
    parser.add_argument("--skip-codec", action="store_true")
    parser.add_argument("--skip-rebalance", action="store_true",
                        help="skip bench/bench_rebalance.py and bench/bench_consumer_protocol.py")
    parser.add_argument("--skip-move", action="store_true", help="skip bench/bench_move.py")
    parser.add_argument("--skip-balancer", action="store_true", help="skip bench/bench_balancer.py")
    parser.add_argument("--skip-spark", action="store_true", help="skip bench/bench_spark.py")
    parser.add_argument("--skip-cpu", action="store_true", help="skip bench/bench_produce_cpu.py")
    parser.add_argument("--skip-cluster", action="store_true", help="skip bench/bench_cluster.py")
    parser.add_argument("--skip-cleaner", action="store_true", help="skip bench/bench_cleaner.py")
    parser.add_argument("--skip-tls", action="store_true", help="skip bench/bench_tls.py")
    parser.add_argument("--skip-txn", action="store_true", help="skip bench/bench_txn.py")
    parser.add_argument("--skip-vs-kafka", action="store_true", help="skip bench/vs_kafka.py")
    args = parser.parse_args(argv)

    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-") as tmp:
        broker = BrokerProcess(Path(tmp), overrides={"auto.create.topics.enable": "false"})
        try:
            broker.start()
            for run, acks, partitions in itertools.product(range(args.repeat), ("1", "all"), (1, 8)):
                topic = f"bench-acks{acks}-p{partitions}-run{run}"
                create_topic(broker.bootstrap, topic, partitions)
                result = produce(broker.bootstrap, topic, partitions, args.records, args.record_bytes, acks,
                                 args.timeout)
                results.append(result)
                print(f"produced {topic}: {result.mib_per_s:.1f} MiB/s", file=sys.stderr, flush=True)
                results.append(consume(broker.bootstrap, topic, partitions, args.records, acks, args.timeout))
                print(f"consumed {topic}: {results[-1].mib_per_s:.1f} MiB/s", file=sys.stderr, flush=True)
        except BaseException:
            print(broker.stderr_text(5000), file=sys.stderr)
            raise
        finally:
            broker.close()

    print(f"## minikafka broker throughput (confluent-kafka {confluent_kafka.version()}, "
          f"librdkafka {confluent_kafka.libversion()[0]}, Python {platform.python_version()}, "
          f"{platform.machine()})\n")
    print(f"{args.records} records of {args.record_bytes} B per run, uncompressed, linger.ms=5, one broker "
          f"with two log dirs on {platform.node() or 'this host'}; consume reads the topic just produced (acks is "
          "the topic's producer setting).\n")
    print(table(results))
    if not args.skip_codec:
        print("\n## codec cost per request (bench/bench_codec.py)\n")
        print("```\n" + run_script("bench_codec.py", 120) + "\n```")
    if not args.skip_rebalance:
        print("\n## consumer group rebalance time (bench/bench_rebalance.py)\n")
        print(run_script("bench_rebalance.py", 600))
        print("\n## one member of ten leaves: consumer protocol against classic (bench/bench_consumer_protocol.py)\n")
        print(run_script("bench_consumer_protocol.py", 600))
    if not args.skip_move:
        print()
        print(run_script("bench_move.py", 900))
    if not args.skip_balancer:
        print()
        print(run_script("bench_balancer.py", 900))
    if not args.skip_spark:
        print()
        print(run_script("bench_spark.py", 900))
    if not args.skip_cleaner:
        print("\n## log cleaner throughput, and produce throughput while it cleans (bench/bench_cleaner.py)\n")
        print(run_script("bench_cleaner.py", 1800))
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-figures-") as tmp:
        figures = Path(tmp) / "figures.jsonl"
        with open("/proc/loadavg") as loadavg:
            load_before = " ".join(loadavg.read().split()[:3])
        if not args.skip_cpu:
            print()
            print(run_script("bench_produce_cpu.py", 900, "--figures", str(figures)))
        if not args.skip_cluster:
            print()
            print(run_script("bench_cluster.py", 3600, "--figures", str(figures)))
        if not (args.skip_cpu and args.skip_cluster):
            with open("/proc/loadavg") as loadavg:
                load_after = " ".join(loadavg.read().split()[:3])
            print(f"\n## Replication at disk speed (issue 23): the figures side by side\n\n{figures_table(figures)}\n\n"
                  f"load average of the machine (1, 5, 15 min) before these two benches: {load_before}; "
                  f"after: {load_after}")
    if not args.skip_tls:
        print()
        print(run_script("bench_tls.py", 1800))
    if not args.skip_txn:
        print("\n## transactional produce throughput (bench/bench_txn.py)\n")
        print(run_script("bench_txn.py", 1800))
    if not args.skip_vs_kafka:
        print()
        print(run_script("vs_kafka.py", 7200))
    return 0


if __name__ == "__main__":
    sys.exit(main())
