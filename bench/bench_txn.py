"""Transactional produce throughput against the same producer without transactions (part of
`make bench`).

Starts its own broker (temporary log dirs, free ports; always stopped at the end). Each run
produces ``--records`` 1 KiB records to a three-partition topic with confluent-kafka, acks=all
and idempotence, twice, in alternating order: once in transactions of ``--per-txn`` records
(begin, produce, commit: the commit waits for every record and writes the markers), once
without transactions (flush at the end). Prints a markdown table of each run and the medians:
records/s and MiB/s of both, and their ratio (median of the runs' ratios).

Usage: .venv/bin/python bench/bench_txn.py [--records N] [--per-txn T] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import confluent_kafka  # noqa: E402

from tests.integration.broker_process import BrokerProcess  # noqa: E402
from tests.integration.clients import create_topic  # noqa: E402

MiB = 1024 * 1024
RECORD = bytes(1024)
PARTITIONS = 3
PRODUCER = {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "queue.buffering.max.kbytes": 64 * 1024}


def _produce(producer: confluent_kafka.Producer, topic: str, count: int) -> None:
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=RECORD, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)


def plain(bootstrap: str, topic: str, records: int) -> float:
    """Seconds to produce ``records`` without transactions, every one acknowledged."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    producer.list_topics(topic, timeout=10)
    os.sync()  # each phase starts with nothing waiting for writeback (see bench_cluster.py)
    started = time.perf_counter()
    _produce(producer, topic, records)
    assert producer.flush(300) == 0
    return time.perf_counter() - started


def transactional(bootstrap: str, topic: str, records: int, per_txn: int, transactional_id: str) -> float:
    """Seconds to produce ``records`` in committed transactions of ``per_txn`` records."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                         **PRODUCER})
    producer.init_transactions(60)
    producer.list_topics(topic, timeout=10)
    os.sync()
    started = time.perf_counter()
    for first in range(0, records, per_txn):
        producer.begin_transaction()
        _produce(producer, topic, min(per_txn, records - first))
        producer.commit_transaction(120)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--per-txn", type=int, default=1000, help="records per transaction")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    rows: list[tuple[float, float]] = []  # (seconds with transactions, seconds without)
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-txn-") as tmp:
        broker = BrokerProcess(Path(tmp), overrides={"log.segment.delete.delay.ms": "0"}, ready_timeout=60)
        try:
            broker.start()
            create_topic(broker.bootstrap, "warm-up", PARTITIONS)
            transactional(broker.bootstrap, "warm-up", 2 * args.per_txn, args.per_txn, "warm-up")
            for run in range(args.repeat):
                txn_topic, plain_topic = f"txn-{run}", f"plain-{run}"
                create_topic(broker.bootstrap, txn_topic, PARTITIONS)
                create_topic(broker.bootstrap, plain_topic, PARTITIONS)
                phases = {"with": partial(transactional, broker.bootstrap, txn_topic, args.records, args.per_txn,
                                          f"bench-{run}"),
                          "without": partial(plain, broker.bootstrap, plain_topic, args.records)}
                # Alternate which goes first, so neither always meets a warmer page cache.
                order = ("without", "with") if run % 2 else ("with", "without")
                seconds = {name: phases[name]() for name in order}
                rows.append((seconds["with"], seconds["without"]))
        finally:
            broker.close()
    print(f"{args.records} records of 1 KiB over {PARTITIONS} partitions, confluent-kafka, acks=all, idempotent; "
          f"transactions of {args.per_txn} records\n")
    print("| run | transactional records/s | MiB/s | without transactions records/s | MiB/s | ratio |")
    print("|---|---|---|---|---|---|")

    def rate(seconds: float) -> tuple[float, float]:
        return args.records / seconds, args.records * len(RECORD) / MiB / seconds

    for i, (with_txn, without) in enumerate(rows):
        (t_rps, t_mib), (p_rps, p_mib) = rate(with_txn), rate(without)
        print(f"| {i + 1} | {t_rps:,.0f} | {t_mib:.1f} | {p_rps:,.0f} | {p_mib:.1f} | {without / with_txn:.2f} |")
    (t_rps, t_mib) = rate(statistics.median(r[0] for r in rows))
    (p_rps, p_mib) = rate(statistics.median(r[1] for r in rows))
    ratio = statistics.median(without / with_txn for with_txn, without in rows)
    print(f"| median | {t_rps:,.0f} | {t_mib:.1f} | {p_rps:,.0f} | {p_mib:.1f} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
