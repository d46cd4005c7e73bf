"""Cluster figures (make bench): a real ZooKeeper and three real brokers on this machine.

1. Produce MiB/s, RF 3 acks=all (min.insync.replicas=2) against RF 1 acks=1, interleaved runs.
2. Failover: kill -9 the leader of a partition under a one-at-a-time acks=all producer; the time
   from the kill to the first acknowledged produce on its successor, and that time less the
   ZooKeeper session timeout (a dead broker is noticed when its session expires).
3. Catch-up: a follower is down while the leader takes 1 GiB; the time from the first byte it
   replicates to the last, against a plain copy of the same segment files on this disk (and the
   time from its restart until it is back in the ISR, its startup included); and the same files
   through two bare receivers with no broker (bench/bare_receive.py), the bound of this machine.
4. Dir failure (scenario C4): the log dir holding a partition's leader replica is replaced by a
   regular file under a one-at-a-time acks=all producer; the time from the failure to the first
   acknowledged produce on the new leader. The broker is then restarted with an empty dir.
5. Replication throttle (KIP-73) accuracy: a follower that missed M MiB catches up under a
   50 MB/s throttle, on the follower's side and then on the leader's; the rate the throttling
   broker's throttled-bytes counter grows at (least squares over samples every 0.1 s) while the
   follower is between 10% and 90% of the way.
6. Reassignment (KIP-455): a partition of 1 GiB moved from one broker to another, request to done,
   against a plain copy of the same segment files over loopback TCP.
7. Topic creation: one CreateTopics request of 7 topics (115 partitions, RF 3), to its answer and
   to every partition having a leader in every broker's Metadata.
8. Rolling restart: SIGTERM each broker in turn, each back in every ISR before the next, under an
   idempotent acks=all confluent-kafka producer; the slowest acknowledgement and the p99.

Each replication figure and the plain copy it is set against start alike: with the data to copy
in the page cache and nothing dirty left to write back (os.sync() first). Writing into the page
cache of this virtual machine runs at anything from 0.4 to 5 GB/s: slower while gigabytes wait for
writeback, and slower into memory the guest has not touched lately than into memory a deleted
file just gave back. The same copy, made every few seconds in an idle cluster, alternated between
about 550 and 4,000 MiB/s. So the reference is the fastest of the plain copies made around the
replication it is set against (one before, one after, and for a catch-up one after each bare
receiver): what this machine can do, not a copy that happened to find slow memory. The catch-up
and the reassignment each run once uncounted first, which warms that memory up, and every
measured topic is deleted after its run, its files at once, for the next run to write into the
memory they gave back.

Prints a markdown report. Usage: .venv/bin/python bench/bench_cluster.py [--mib M] [--repeat R] [--only WHAT]
       [--profile DIR] [--figures FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import confluent_kafka  # noqa: E402
import confluent_kafka.admin  # noqa: E402
from kafka import KafkaAdminClient, TopicPartition  # noqa: E402
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, NewTopic  # noqa: E402

from bench.bare_receive import bare_receive  # noqa: E402
from bench.profiles import profile_next_start, stop_profiling, summary  # noqa: E402
from bench.run import MiB, produce, record_figure  # noqa: E402
from tests.integration.broker_process import BrokerProcess, wait_until  # noqa: E402
from tests.integration.disk_faults import replace_with_empty_dir, replace_with_file  # noqa: E402
from tests.system.cluster import CLUSTER_SETTINGS, Cluster  # noqa: E402
from tests.system.observe import alter_configs, log_bytes, metric_sample  # noqa: E402
from tests.system.zookeeper import ZooKeeperProcess  # noqa: E402

SESSION_TIMEOUT_MS = 4000
THROTTLE_RATE = 50_000_000
BARE_RECEIVERS = {
    "recv": "recv_into + CRC + pwrite (the follower's copies)",
    "splice": "splice socket to pipe to file, then CRC over a mapping (the fewest copies with a CRC)",
}



def throughput(cluster: Cluster, records: int, repeat: int, figures: Path | None) -> list[str]:
    rates: dict[str, list[float]] = {"RF 1, acks=1": [], "RF 3, acks=all": []}
    for run in range(repeat):
        for label, replication, acks in (("RF 1, acks=1", 1, "1"), ("RF 3, acks=all", 3, "all")):
            topic = f"throughput-rf{replication}-{run}"
            cluster.create_topic(topic, 3, replication, **{"min.insync.replicas": "2" if replication == 3 else "1"})
            rates[label].append(produce(cluster.bootstrap, topic, 3, records, 1024, acks, 300).mib_per_s)
            print(f"{label} run {run}: {rates[label][-1]:.1f} MiB/s", file=sys.stderr, flush=True)
            delete_topic(cluster, topic)
    # Each RF 3 run against the RF 1 run just before it: the two saw the same machine.
    ratios = [replicated / base for base, replicated in zip(rates["RF 1, acks=1"], rates["RF 3, acks=all"], strict=True)]
    ratio = statistics.median(ratios)
    record_figure(figures, "RF 3 acks=all / RF 1 acks=1 produce throughput", ratio, "at least 0.6", ratio >= 0.6)
    return [
        f"### Produce, 3 partitions, {records} records of 1 KiB per run, median of {repeat}\n",
        "| topic | MiB/s (median) | runs |", "|---|---:|---|",
        *(f"| {label} | {statistics.median(v):.1f} | {', '.join(f'{x:.0f}' for x in v)} |" for label, v in rates.items()),
        f"\nRF 3 acks=all / RF 1 acks=1 = **{ratio:.2f}** (median of the runs' ratios: "
        f"{', '.join(f'{r:.2f}' for r in ratios)}; aim: at least 0.6)\n",
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


@dataclass
class RollingRestart:
    """One rolling restart under an idempotent acks=all confluent-kafka producer: each
    acknowledgement's latency (send to acknowledgement, retries included) and the failures."""

    acks: list[tuple[float, float]] = field(default_factory=list)  # (sent at, seconds to its acknowledgement)
    failed: int = 0
    events: list[tuple[float, str]] = field(default_factory=list)  # (at, what) of the restarts

    @property
    def started(self) -> float:
        return self.events[0][0]

    @property
    def latencies(self) -> list[float]:
        """Of the records sent from the first SIGTERM on: the producer's own start (its first
        metadata and producer id, a second or more on a busy machine) is not the restart's."""
        return [took for sent, took in self.acks if sent >= self.started]

    @property
    def steady(self) -> list[float]:
        """Of the records sent in the second before the first SIGTERM: what this machine's load
        makes of an acknowledgement with no restart."""
        return [took for sent, took in self.acks if self.started - 1 <= sent < self.started]

    @property
    def slowest(self) -> float:
        return max(self.latencies)

    @property
    def p99(self) -> float:
        return statistics.quantiles(self.latencies, n=100)[98]

    @property
    def slowest_during(self) -> str:
        """The step of the restart under way when the slowest acknowledged record was sent."""
        sent = next(sent for sent, took in self.acks if sent >= self.started and took == self.slowest)
        return next(f"{what} (+{sent - when:.2f} s)" for when, what in reversed(self.events) if when <= sent)


def one_rolling_restart(cluster: Cluster, topic: str) -> RollingRestart:
    """SIGTERM each broker in turn (the controller last), each back in every ISR before the next,
    while a producer sends a keyed record every 2 ms to a 6-partition RF 3 topic."""
    cluster.create_topic(topic, 6, 3, **{"min.insync.replicas": "2"})

    def restart_each(note: Callable[[str], None]) -> None:
        controller = cluster.controller_id()
        for broker_id in sorted(cluster.brokers, key=lambda b: b == controller):
            note(f"SIGTERM broker {broker_id}")
            if cluster.brokers[broker_id].stop() != 0:
                raise RuntimeError(f"broker {broker_id} did not stop cleanly")
            note(f"broker {broker_id} exited")
            cluster.brokers[broker_id].start()
            note(f"broker {broker_id} started")
            cluster.wait_for_leaders(topic, 6, isr_size=3, timeout=60)
            note(f"broker {broker_id} back in every ISR")

    run = rolling_restart_under_load(cluster.bootstrap, topic, restart_each)
    delete_topic(cluster, topic)
    return run


def rolling_restart_under_load(bootstrap: str, topic: str,
                               restart_each: Callable[[Callable[[str], None]], None]) -> RollingRestart:
    """Run ``restart_each`` (which names each step with the function it is given) while an
    idempotent acks=all producer sends a keyed record every 2 ms to ``topic``; Kafka's brokers
    are measured with it too (vs_kafka.py)."""
    run = RollingRestart()
    stop = threading.Event()

    def produce_until_stopped() -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                             "enable.idempotence": True, "linger.ms": 5,
                                             "message.timeout.ms": 120000, "retry.backoff.ms": 100})

        def delivered(error: object, _message: object, sent: float) -> None:
            if error is not None:
                run.failed += 1
                return
            run.acks.append((sent, time.monotonic() - sent))

        seq = 0
        while not stop.is_set():
            sent = time.monotonic()
            producer.produce(topic, key=b"k%d" % seq, value=b"v" * 100,
                             on_delivery=lambda e, m, sent=sent: delivered(e, m, sent))
            seq += 1
            producer.poll(0.002)
        producer.flush(120)

    thread = threading.Thread(target=produce_until_stopped, name="rolling-restart-producer", daemon=True)
    thread.start()
    try:
        wait_until(lambda: run.acks, 60, what="the producer's first acknowledgement")
        time.sleep(2)  # acknowledged in a steady stream before any restart
        restart_each(lambda what: run.events.append((time.monotonic(), what)))
        time.sleep(2)
    finally:
        stop.set()
        thread.join(180)
    return run


def rolling_restart(cluster: Cluster, repeat: int, figures: Path | None) -> list[str]:
    runs: list[RollingRestart] = []
    loads: list[float] = []
    for index in range(repeat):
        runs.append(one_rolling_restart(cluster, f"rolling-restart-{index}"))
        run = runs[-1]
        loads.append(os.getloadavg()[0])
        print(f"rolling restart run {index}: slowest {run.slowest:.2f} s, p99 {run.p99:.3f} s "
              f"(before the restart: slowest {max(run.steady):.2f} s), {len(run.latencies)} acknowledged, "
              f"{run.failed} failed; load average {loads[-1]:.1f}", file=sys.stderr, flush=True)
        for at, what in run.events:
            print(f"  {at - run.started:7.2f} s  {what}", file=sys.stderr)
        slow = [(sent, took) for sent, took in run.acks if sent >= run.started and took > 0.3]
        for sent, took in slow[:: max(1, len(slow) // 20)]:
            print(f"  {sent - run.started:7.2f} s  sent, acknowledged {took:.2f} s later", file=sys.stderr,
                  flush=True)
    slowest = statistics.median(r.slowest for r in runs)
    p99 = statistics.median(r.p99 for r in runs)
    failed = sum(r.failed for r in runs)
    record_figure(figures, "rolling restart: slowest acks=all acknowledgement (s)", slowest, "under 0.5",
                  slowest < 0.5 and failed == 0)
    return [
        f"### Rolling restart of the 3 brokers (SIGTERM, each back in every ISR before the next), median of {repeat}\n",
        "An idempotent acks=all confluent-kafka producer sends a record every 2 ms to 6 partitions (RF 3, "
        "min.insync.replicas=2) throughout; latency is send to acknowledgement, retries included.\n",
        "| run | slowest (s) | during | p99 (s) | slowest before the restart (s) | acknowledged | failed |",
        "|---|---:|---|---:|---:|---:|---:|",
        *(f"| {i} | {r.slowest:.2f} | {r.slowest_during} | "
          f"{r.p99:.3f} | {max(r.steady):.2f} | {len(r.latencies)} | {r.failed} |" for i, r in enumerate(runs)),
        f"\nSlowest acknowledgement **{slowest:.2f} s**, p99 **{p99:.3f} s** (medians; aim: slowest under 0.5 s, "
        f"none failed); 1-minute load average after each run: {', '.join(f'{load:.1f}' for load in loads)}\n",
    ]


@dataclass(frozen=True)
class Versus:
    """One replication run against the plain copy of the same files."""

    replicated: float  # seconds
    copied: float  # seconds: the fastest plain copy made around the replication
    size: int  # bytes
    restart_to_isr: float = 0.0  # seconds, for a catch-up
    # For a catch-up: each bare receiver's seconds (bench/bare_receive.py).
    bare: dict[str, float] = field(default_factory=dict)


def one_catch_up(cluster: Cluster, topic: str, mib: int, profile: Path | None = None) -> Versus:
    """A follower that missed ``mib`` MiB: seconds from the first byte it replicates to the last
    against a plain copy of the same segment files; with ``profile``, the follower catches up
    under py-spy, which writes there."""
    cluster.create_topic(topic, 1, 3, **{"min.insync.replicas": "1"})
    leader = cluster.leader(topic, 0)
    follower = next(b for b in cluster.brokers if b != leader)
    cluster.brokers[follower].kill9()
    # Once its session has expired, so the restart below does not wait for that.
    wait_until(lambda: follower not in {b.node_id for b in cluster.metadata().brokers}, 60, interval=0.1,
               what="the stopped follower gone from Metadata")
    produce(cluster.bootstrap, topic, 1, mib * 1024, 1024, "1", 300)
    size = log_bytes(cluster.brokers[leader], topic, 0)
    # The follower out of the ISR (as Kafka's controller takes a dead broker out at once) and the
    # other follower done: the catch-up is measured alone.
    wait_until(lambda: follower not in cluster.partitions(topic)[0].isr_nodes, 60, interval=0.1,
               what="the stopped follower out of the ISR")
    third = next(b for b in cluster.brokers if b not in (leader, follower))
    wait_until(lambda: log_bytes(cluster.brokers[third], topic, 0) == size, 120, interval=0.05,
               what="the other follower caught up")
    before = log_bytes(cluster.brokers[follower], topic, 0)
    # The plain copy runs before the catch-up, after it and after each bare receiver; the fastest
    # is the reference (see the module's docstring).
    copied_before = plain_copy(cluster.brokers[leader], topic)
    os.sync()
    if profile is not None:
        profile_next_start(cluster.brokers[follower], profile)
    restarted = time.monotonic()
    cluster.brokers[follower].start()
    # The follower's segment files, polled every 5 ms: the transfer runs from the first sample
    # that grew to the first that holds everything (the bytes before the first are not counted).
    first: tuple[float, int] | None = None
    deadline = time.monotonic() + 600
    while (held := log_bytes(cluster.brokers[follower], topic, 0)) < size:
        if first is None and held > before:
            first = (time.monotonic(), held)
        if time.monotonic() > deadline:
            raise RuntimeError(f"the follower holds {held} of {size} bytes after 600 s")
        time.sleep(0.005)
    transferred = time.monotonic()
    wait_until(lambda: follower in cluster.partitions(topic)[0].isr_nodes, 600, interval=0.02,
               what="the follower back in the ISR")
    in_isr = time.monotonic() - restarted
    if profile is not None:
        stop_profiling(cluster.brokers[follower])
        cluster.brokers[follower].start()
    if first is None:
        raise RuntimeError("the catch-up was over before the first sample")
    transfer = (transferred - first[0]) * size / (size - first[1])
    copied_after = plain_copy(cluster.brokers[leader], topic)
    # The same files through each bare receiver, each followed by one more plain copy.
    bare, copies = {}, [copied_before, copied_after]
    source = cluster.brokers[leader].partition_dirs()[f"{topic}-0"] / f"{topic}-0"
    for how in BARE_RECEIVERS:
        bare[how] = bare_receive(sorted(source.glob("*.log")), source.parent.parent, how)
        copies.append(plain_copy(cluster.brokers[leader], topic))
    delete_topic(cluster, topic)
    return Versus(transfer, min(copies), size, in_isr, bare)


def plain_copy(broker: BrokerProcess, topic: str) -> float:
    """Seconds to copy the segment files of the broker's replica of ``topic``-0 (shutil.copyfile)
    into a temporary dir of the same log dir, starting with nothing dirty to write back."""
    source = broker.partition_dirs()[f"{topic}-0"] / f"{topic}-0"
    with tempfile.TemporaryDirectory(dir=source.parent.parent) as target:
        os.sync()
        started = time.monotonic()
        for segment in source.glob("*.log"):
            shutil.copyfile(segment, Path(target) / segment.name)
        return time.monotonic() - started


def delete_topic(cluster: Cluster, topic: str) -> None:
    """Free the disk (and page cache) a measured topic took, before the next run."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()


def versus_runs(what: str, run: Callable[[str], Versus], repeat: int) -> list[Versus]:
    """One uncounted run (it warms up the memory, see the module's docstring), then ``repeat``."""
    runs = []
    for name in ("warm-up", *map(str, range(repeat))):
        runs.append(run(f"{what}-{name}"))
        print(f"{what} run {name}: {runs[-1].size / MiB / runs[-1].replicated:.0f} MiB/s against a copy at "
              f"{runs[-1].size / MiB / runs[-1].copied:.0f}", file=sys.stderr, flush=True)
    return runs[1:]


def ratio_line(what: str, runs: list[Versus], aim: float, figures: Path | None) -> str:
    ratios = [r.copied / r.replicated for r in runs]
    ratio = statistics.median(ratios)
    record_figure(figures, f"{what} of 1 GiB / plain copy of the same files", ratio, f"at least {aim}", ratio >= aim)
    return (f"\n{what} / plain copy = **{ratio:.2f}** (runs: {', '.join(f'{r:.2f}' for r in ratios)}; "
            f"aim: at least {aim})\n")


def catch_up(cluster: Cluster, mib: int, repeat: int, profile: Path | None, figures: Path | None) -> list[str]:
    runs = versus_runs("catch-up", lambda topic: one_catch_up(cluster, topic, mib), repeat)
    size = runs[0].size
    transfer, copied, in_isr = (statistics.median(getattr(r, f) for r in runs)
                                for f in ("replicated", "copied", "restart_to_isr"))
    profiled = []
    if profile is not None:
        output = profile / "catch-up-follower.json"
        one_catch_up(cluster, "catch-up-profiled", mib, output)
        profiled = ["Where the follower's time goes (one more run, under py-spy):\n", *summary(output), ""]
    return [
        f"### Catch-up of a follower that missed {size / MiB:.0f} MiB, median of {repeat}\n",
        "| what | seconds | MiB/s |", "|---|---:|---:|",
        f"| first replicated byte to the last on the follower's disk | {transfer:.2f} | {size / MiB / transfer:.0f} |",
        f"| plain copy of the same segment files (shutil.copyfile; the fastest of {2 + len(BARE_RECEIVERS)} "
        f"around each run) | {copied:.2f} | {size / MiB / copied:.0f} |",
        f"| restart to back in the ISR (its startup included) | {in_isr:.2f} | {size / MiB / in_isr:.0f} |",
        ratio_line("catch-up", runs, 0.8, figures),
        "What a follower with no broker at all reaches on this machine (bench/bare_receive.py: the same "
        "files in 1 MiB answers by sendfile over loopback, two requests in flight, a CRC-32C over every "
        "byte), against the same plain copy, median of the runs:\n",
        "| bare receiver | MiB/s | / plain copy | runs |", "|---|---:|---:|---|",
        *(bare_line(label, how, runs) for how, label in BARE_RECEIVERS.items()),
        "",
        *profiled,
    ]


def bare_line(label: str, how: str, runs: list[Versus]) -> str:
    """One bare receiver's row: its MiB/s and its ratio to the plain copy of each run."""
    ratios = [r.copied / r.bare[how] for r in runs]
    received = statistics.median(r.bare[how] for r in runs)
    return (f"| {label} | {runs[0].size / MiB / received:.0f} | {statistics.median(ratios):.2f} | "
            f"{', '.join(f'{r:.2f}' for r in ratios)} |")


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
    # The in-sync follower's bytes count against the leader's throttle (never held back, as in
    # Kafka): wait until it holds everything, or its last fetches run the quota into a debt the
    # catching-up follower then waits out, and the measured rate is the two mixed.
    in_sync = next(b for b in cluster.brokers if b not in (leader, follower))
    wait_until(lambda: log_bytes(cluster.brokers[in_sync], topic, 0) == log_bytes(cluster.brokers[leader], topic, 0),
               120, interval=0.1, what="the in-sync follower holding every produced byte")
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


def loopback_copy(files: list[Path], root: Path) -> float:
    """Seconds to send ``files`` over a 127.0.0.1 TCP connection (sendfile) into a temporary dir of
    ``root``, each written to disk, starting with nothing dirty to write back: the plain copy a
    reassignment between brokers on this machine is set against."""
    with tempfile.TemporaryDirectory(dir=root) as target:
        os.sync()
        return _loopback_copy(files, Path(target))


def _loopback_copy(files: list[Path], target: Path) -> float:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def receive() -> None:
        # Into one reused buffer, as the follower does: a fresh bytes object per read would
        # make the copy slower than it need be.
        chunk = memoryview(bytearray(1 << 20))
        connection, _ = server.accept()
        with connection:
            for source in files:
                remaining = source.stat().st_size
                with open(target / source.name, "wb", buffering=0) as out:
                    while remaining:
                        count = connection.recv_into(chunk, min(remaining, len(chunk)))
                        if not count:
                            raise ConnectionError("the sender closed early")
                        out.write(chunk[:count])
                        remaining -= count

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


def one_reassignment(cluster: Cluster, topic: str, mib: int, profile: Path | None = None) -> Versus:
    """A 1-partition topic of ``mib`` MiB on broker 1 reassigned to broker 2, request to done,
    against a plain loopback copy of its files; with ``profile``, broker 2 receives it under
    py-spy, which writes there."""
    source, target = cluster.brokers[1], cluster.brokers[2]
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, replica_assignments={0: [source.broker_id]})])
        cluster.wait_for_leaders(topic, 1)
        produce(cluster.bootstrap, topic, 1, mib * 1024, 1024, "1", 600)
        size = log_bytes(source, topic, 0)
        files = sorted((source.partition_dirs()[f"{topic}-0"] / f"{topic}-0").glob("*.log"))
        # Before and after the move, as the catch-up's copies (see the module's docstring).
        copied_before = loopback_copy(files, target.root)
        if profile is not None:
            target.stop()
            profile_next_start(target, profile)
            target.start()
            cluster.wait_for_leaders(topic, 1)
        os.sync()
        started = time.monotonic()
        admin.alter_partition_reassignments({TopicPartition(topic, 0): [target.broker_id]})
        # Polled every 10 ms (the catch-up's files every 5): the move's fixed steps are now tens of
        # milliseconds, which a coarser poll would add to.
        wait_until(lambda: cluster.partitions(topic)[0].replica_nodes == [target.broker_id]
                   and not admin.list_partition_reassignments(), 600, interval=0.01, what="the reassignment done")
        moved = time.monotonic() - started
    finally:
        admin.close()
    if profile is not None:
        stop_profiling(target)
        target.start()
    files = sorted((target.partition_dirs()[f"{topic}-0"] / f"{topic}-0").glob("*.log"))
    copied = min(copied_before, loopback_copy(files, target.root))
    delete_topic(cluster, topic)
    return Versus(moved, copied, size)


def reassignment(cluster: Cluster, mib: int, repeat: int, profile: Path | None, figures: Path | None
                 ) -> list[str]:
    runs = versus_runs("reassignment", lambda topic: one_reassignment(cluster, topic, mib), repeat)
    size = runs[0].size
    moved, copied = (statistics.median(getattr(r, f) for r in runs) for f in ("replicated", "copied"))
    profiled = []
    if profile is not None:
        output = profile / "reassignment-target.json"
        one_reassignment(cluster, "reassignment-profiled", mib, output)
        profiled = ["Where the receiving broker's time goes (one more move, under py-spy):\n", *summary(output), ""]
    return [
        f"### Reassignment of {size / MiB:.0f} MiB from one broker to another, median of {repeat}\n",
        "| what | seconds | MB/s |", "|---|---:|---:|",
        f"| AlterPartitionReassignments to the move done (new replica in sync, old one deleted) | {moved:.2f} | "
        f"{size / 1e6 / moved:.0f} |",
        f"| plain copy of the same segment files over loopback TCP (sendfile, written to disk; the faster of "
        f"one before, one after) | {copied:.2f} | {size / 1e6 / copied:.0f} |",
        ratio_line("reassignment", runs, 0.85, figures),
        *profiled,
    ]


B = TypeVar("B")  # a broker of either kind

# Seven topics of 115 partitions in all: the CreateTopics of issue 37 that outlasted clients' 10 s timeouts.
CREATE_TOPICS_PARTITIONS = (32, 24, 16, 16, 12, 8, 7)


def one_create_topics(bootstrap: str, brokers: Iterable[B], metadata: Callable[[list[str], B], Any],
                      run: str) -> tuple[float, float]:
    """Seconds from one CreateTopics request (every topic of CREATE_TOPICS_PARTITIONS, RF 3) to its
    answer, and to every partition having a leader in every broker's Metadata (``metadata``: the
    answer of one of ``brokers``). Any cluster of three brokers: minikafka's or Kafka's."""
    names = [f"create-{run}-{i}" for i in range(len(CREATE_TOPICS_PARTITIONS))]
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=10)  # connected, and the controller known, before the clock starts
    started = time.monotonic()
    futures = admin.create_topics([confluent_kafka.admin.NewTopic(name, count, 3) for name, count
                                   in zip(names, CREATE_TOPICS_PARTITIONS, strict=True)],
                                  operation_timeout=30, request_timeout=60)
    for future in futures.values():
        future.result(60)
    answered = time.monotonic() - started

    def led_everywhere() -> bool:
        for broker in brokers:
            found = {t.name: t for t in metadata(names, broker).topics}
            for name, count in zip(names, CREATE_TOPICS_PARTITIONS, strict=True):
                topic = found.get(name)
                if topic is None or len(topic.partitions) != count or any(p.leader_id < 0 for p in topic.partitions):
                    return False
        return True
    wait_until(led_everywhere, 60, interval=0.01, what="every new partition led in every broker's Metadata")
    led = time.monotonic() - started
    for future in admin.delete_topics(names, operation_timeout=30).values():
        future.result(60)
    return answered, led


def _create_topics_on(cluster: Cluster, run: str) -> tuple[float, float]:
    return one_create_topics(cluster.bootstrap, list(cluster.brokers.values()),
                             lambda names, broker: cluster.metadata(names, via=broker), run)


def create_topics(cluster: Cluster, repeat: int, figures: Path | None) -> list[str]:
    _create_topics_on(cluster, "warm-up")
    runs = []
    for run in range(repeat):
        runs.append(_create_topics_on(cluster, str(run)))
        print(f"create topics run {run}: answered in {runs[-1][0]:.2f} s, led everywhere in {runs[-1][1]:.2f} s",
              file=sys.stderr, flush=True)
    answered, led = (statistics.median(r[i] for r in runs) for i in (0, 1))
    record_figure(figures, "CreateTopics of 7 topics, 115 partitions, RF 3 (s)", answered, "under 1 s", answered < 1)
    return [
        f"### Topic creation: {len(CREATE_TOPICS_PARTITIONS)} topics of {sum(CREATE_TOPICS_PARTITIONS)} partitions "
        f"in all, RF 3, one CreateTopics request, median of {repeat}\n",
        "| what | seconds (median) | runs |", "|---|---:|---|",
        f"| request to answer | {answered:.2f} | {', '.join(f'{r[0]:.2f}' for r in runs)} |",
        f"| request to every partition led in every broker's Metadata | {led:.2f} | "
        f"{', '.join(f'{r[1]:.2f}' for r in runs)} |",
        "\naim: the answer in under 1 s\n",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="records per throughput run")
    parser.add_argument("--mib", type=int, default=1024, help="MiB a follower misses in the catch-up runs")
    parser.add_argument("--throttle-mib", type=int, default=512, help="MiB a follower catches up under a throttle")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="a dir: profile one more catch-up and reassignment with py-spy")
    parser.add_argument("--figures", type=Path, help="add the headline figures to this file (bench/run.py's)")
    parser.add_argument("--reassign-mib", type=int, default=1024, help="MiB of the partition reassigned")
    parser.add_argument("--only", choices=["throughput", "failover", "catch-up", "dir-failover", "throttle",
                                           "reassignment", "create-topics", "rolling-restart"],
                        help="run one measure only")
    args = parser.parse_args()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)  # py-spy writes into it, and makes no dir
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-cluster-") as tmp:
        zookeeper = ZooKeeperProcess(Path(tmp) / "zookeeper")
        cluster = Cluster(Path(tmp), zookeeper, overrides={
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS), "auto.create.topics.enable": "false",
            # replica.fetch.max.bytes and replica.fetch.response.max.bytes keep their defaults (1 and
            # 10 MiB, Kafka's): with 8 MiB per partition a response outgrew the sockets' buffers and
            # the leader's sending no longer overlapped the follower's writing (catch-up 363 against
            # 977 MiB/s, a reassignment 641 against 1018 MB/s, run back to back).
            # A measured topic is deleted after its run, its files at once: the next run writes
            # into memory just given back rather than into memory untouched for long.
            "log.segment.delete.delay.ms": "0"},
            metrics=True)
        try:
            zookeeper.start()
            cluster.start()
            report = ["## Cluster: ZooKeeper and three brokers on this machine (bench/bench_cluster.py)\n"]
            if args.only in (None, "throughput"):
                report += throughput(cluster, args.records, args.repeat, args.figures)
            if args.only in (None, "failover"):
                report += failover(cluster, args.repeat)
            if args.only in (None, "rolling-restart"):
                report += rolling_restart(cluster, args.repeat, args.figures)
            if args.only in (None, "catch-up"):
                report += catch_up(cluster, args.mib, args.repeat, args.profile, args.figures)
            if args.only in (None, "dir-failover"):
                report += dir_failover(cluster, args.repeat)
            if args.only in (None, "throttle"):
                report += throttle_accuracy(cluster, args.throttle_mib)
            if args.only in (None, "reassignment"):
                report += reassignment(cluster, args.reassign_mib, args.repeat, args.profile, args.figures)
            if args.only in (None, "create-topics"):
                report += create_topics(cluster, args.repeat, args.figures)
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
