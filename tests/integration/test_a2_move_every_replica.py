"""Scenario A2 of ACCEPTANCE.md: move every replica to the other log dir while a producer and a
consumer run, through kafka-python's KafkaAdminClient (alter_replica_log_dirs, checked with
describe_log_dirs), then move them all back through ``minikafka log-dirs --move --progress``;
validate the client and cluster state after each round."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.structs import TopicPartitionReplica

from tests.integration.broker_process import REPO_ROOT, BrokerProcess, wait_until
from tests.integration.clients import confluent_consume, confluent_produce, create_topic

pytestmark = pytest.mark.integration

TOPIC = "a2"
PARTITIONS = 8
PREFILL_PER_PARTITION = 1500  # ~1.5 MB each, so the moves take a few seconds at the throttle
OVERRIDES = {
    "log.segment.bytes": str(256 << 10),
    "replica.alter.log.dirs.io.max.bytes.per.second": str(6 << 20),
}


@dataclass
class Traffic:
    """A keyed, sequenced producer and a consumer running in threads for the whole scenario."""

    bootstrap: str
    stop_producing: threading.Event = field(default_factory=threading.Event)
    stop_consuming: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[int, tuple[int, int]] = field(default_factory=dict)  # seq -> (partition, offset)
    failed: list[str] = field(default_factory=list)
    consumed: list[tuple[int, int, bytes]] = field(default_factory=list)  # (partition, offset, key)
    consumer_errors: list[str] = field(default_factory=list)
    crashes: list[BaseException] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._consume, daemon=True)]
        for thread in self.threads:
            thread.start()

    def _produce(self) -> None:
        try:
            producer = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5, delivery_timeout_ms=60_000)
            seq = 0
            while not self.stop_producing.is_set():
                future = producer.send(TOPIC, key=b"live-%d" % seq, value=b"%d:" % seq + b"v" * 200)
                future.add_callback(lambda md, seq=seq: self._ack(seq, md.partition, md.offset))
                future.add_errback(lambda exc, seq=seq: self._fail(seq, exc))
                seq += 1
                if seq % 50 == 0:
                    time.sleep(0.01)
            producer.flush(60)
            producer.close(30)
        except BaseException as exc:
            self.crashes.append(exc)

    def _ack(self, seq: int, partition: int, offset: int) -> None:
        with self.lock:
            self.acked[seq] = (partition, offset)

    def _fail(self, seq: int, exc: BaseException) -> None:
        with self.lock:
            self.failed.append(f"{seq}: {exc!r}")

    def _consume(self) -> None:
        try:
            consumer = confluent_kafka.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "a2-reader",
                                                 "enable.auto.commit": False, "auto.offset.reset": "earliest"})
            consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING)
                             for p in range(PARTITIONS)])
            while not self.stop_consuming.is_set():
                for msg in consumer.consume(num_messages=1000, timeout=0.2):
                    if msg.error() is not None:
                        self.consumer_errors.append(str(msg.error()))
                        continue
                    self.consumed.append((msg.partition(), msg.offset(), msg.key()))
            consumer.close()
        except BaseException as exc:
            self.crashes.append(exc)

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)

    def finish(self, broker: BrokerProcess) -> None:
        """Stop producing, let the consumer reach every partition's end, stop it."""
        self.stop_producing.set()
        self.threads[0].join(90)
        assert not self.threads[0].is_alive(), "the producer did not finish"
        ends = _end_offsets(broker.bootstrap)

        def caught_up() -> bool:
            last: dict[int, int] = defaultdict(lambda: -1)
            for partition, offset, _ in list(self.consumed):
                last[partition] = max(last[partition], offset)
            return all(last[p] + 1 >= end for p, end in ends.items())

        wait_until(caught_up, timeout=60, what="the live consumer reaching the end of every partition")
        self.stop_consuming.set()
        self.threads[1].join(30)


def _end_offsets(bootstrap: str) -> dict[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "a2-ends"})
    try:
        return {p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, p), timeout=10)[1]
                for p in range(PARTITIONS)}
    finally:
        consumer.close()


def replica_dirs(bootstrap: str) -> dict[tuple[str, int], list[tuple[str, bool]]]:
    """{(topic, partition): [(log dir, is future)]} from kafka-python's describe_log_dirs."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="a2-admin")
    try:
        described = admin.describe_log_dirs()
    finally:
        admin.close()
    found: dict[tuple[str, int], list[tuple[str, bool]]] = defaultdict(list)
    for broker in described:
        for log_dir in broker["log_dirs"]:
            assert log_dir["error_code"] == 0, log_dir
            for topic in log_dir["topics"]:
                for p in topic["partitions"]:
                    found[(topic["name"], p["partition_index"])].append((log_dir["log_dir"], p["is_future_key"]))
    return found


def moved_everywhere(bootstrap: str, expected: dict[int, str]) -> bool:
    dirs = replica_dirs(bootstrap)
    return all(dirs.get((TOPIC, p)) == [(d, False)] for p, d in expected.items())


def validate(broker: BrokerProcess, expected: dict[int, str], traffic: Traffic) -> None:
    """ACCEPTANCE.md's "validate client/cluster state" for this scenario."""
    assert broker.is_running()
    log_text = broker.stderr_text(1_000_000)
    for p, log_dir in expected.items():
        assert f"moved {TOPIC}-{p} from " in log_text and f" to {log_dir}: " in log_text, (
            f"no log line for the move of {TOPIC}-{p}")
    with broker.wire() as wire:
        (topic,) = wire.metadata([TOPIC], version=5).topics
    assert topic.error_code == 0
    for p in topic.partitions:
        assert (p.error_code, p.leader_id, list(p.replica_nodes), list(p.isr_nodes), list(p.offline_replicas)) == (
            0, 1, [1], [1], []), p
    dirs = replica_dirs(broker.bootstrap)
    assert {key: value for key, value in dirs.items() if key[0] == TOPIC} == {
        (TOPIC, p): [(d, False)] for p, d in expected.items()}
    metrics = broker.metrics_text()
    assert "minikafka_log_dir_moves_in_progress 0.0" in metrics
    moved = re.search(r"^minikafka_log_dir_moved_bytes_total (\S+)$", metrics, re.M)
    assert moved is not None and float(moved.group(1)) > PARTITIONS * PREFILL_PER_PARTITION * 1000
    for log_dir in broker.log_dirs:
        assert f'minikafka_log_dir_bytes{{log_dir="{log_dir}"}}' in metrics
    # Every acknowledged record is read exactly once, in order per partition.
    assert not traffic.crashes, traffic.crashes
    assert not traffic.failed, f"produce failures: {traffic.failed[:5]}"
    assert not traffic.consumer_errors, traffic.consumer_errors[:5]
    keys = defaultdict(list)
    for partition, offset, key in traffic.consumed:
        keys[key].append((partition, offset))
    duplicates = {k: v for k, v in keys.items() if len(v) > 1}
    assert not duplicates, f"read twice: {list(duplicates.items())[:5]}"
    for seq, where in traffic.acked.items():
        assert keys.get(b"live-%d" % seq) == [where], f"acknowledged record {seq} at {where} read as {keys.get(b'live-%d' % seq)}"
    by_partition: dict[int, list[int]] = defaultdict(list)
    for partition, offset, _ in traffic.consumed:
        by_partition[partition].append(offset)
    for partition, offsets in by_partition.items():
        assert offsets == sorted(offsets) and offsets == list(range(offsets[0], offsets[0] + len(offsets))), (
            f"partition {partition} read out of order or with gaps")
    # And a fresh consumer reads the same.
    fresh = confluent_consume(broker.bootstrap, TOPIC, range(PARTITIONS), timeout=60)
    assert sorted((r.partition, r.offset, r.key) for r in fresh) == sorted(traffic.consumed)


def test_a2_move_every_replica_while_producing_and_consuming(broker_factory, tmp_path: Path) -> None:
    broker = broker_factory(overrides=OVERRIDES)
    dirs = [str(d) for d in broker.log_dirs]
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    for p in range(PARTITIONS):
        confluent_produce(broker.bootstrap, TOPIC, [(b"pre-%d-%d" % (p, i), b"x" * 1000)
                                                    for i in range(PREFILL_PER_PARTITION)], partition=p,
                          batch_size=100_000)
    before = replica_dirs(broker.bootstrap)
    home = {p: before[(TOPIC, p)][0][0] for p in range(PARTITIONS)}
    assert set(home.values()) == set(dirs), f"partitions not spread over both dirs: {home}"
    other = {p: dirs[1] if d == dirs[0] else dirs[0] for p, d in home.items()}

    traffic = Traffic(broker.bootstrap)
    traffic.start()
    try:
        wait_until(lambda: traffic.acked_count() > 500, timeout=30, what="the producer under way")
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="a2-admin")
        try:
            result = admin.alter_replica_log_dirs(
                {TopicPartitionReplica(TOPIC, p, 1): d for p, d in other.items()})
        finally:
            admin.close()
        assert {tpr.partition: err.__name__ for tpr, err in result.items()} == dict.fromkeys(other, "NoError")
        # Still copying right after the request: the moves overlap the traffic.
        assert any(future for entries in replica_dirs(broker.bootstrap).values() for _, future in entries)
        wait_until(lambda: moved_everywhere(broker.bootstrap, other), timeout=90, what="every replica moved")
        acked_after_first = traffic.acked_count()

        # Round two, back home, through the command line tool, watching the progress.
        assignment = tmp_path / "back.json"
        assignment.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": p, "log_dir": d} for p, d in home.items()]}))
        run = subprocess.run(
            [sys.executable, "-m", "minikafka", "log-dirs", "--bootstrap-server", broker.bootstrap, "--move",
             "--assignment", str(assignment), "--progress", "--interval", "0.2", "--timeout", "90"],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
        for p in range(PARTITIONS):
            assert f"{TOPIC}-{p} on broker 1 -> {home[p]}: moving" in run.stdout
        final_lines = run.stdout.strip().splitlines()[-PARTITIONS:]
        assert all("done" in line for line in final_lines), run.stdout[-3000:]
        assert "%" in run.stdout and "ETA" in run.stdout, "no progress shown while copying"
        assert moved_everywhere(broker.bootstrap, home)
        wait_until(lambda: traffic.acked_count() > acked_after_first + 500, timeout=30,
                   what="the producer still going after the moves")
    finally:
        traffic.finish(broker)
    validate(broker, home, traffic)
    # No copy and no retired dir is left behind on disk.
    wait_until(lambda: not any(name.endswith(("-future", "-delete")) for d in broker.log_dirs
                               for name in (p.name for p in d.iterdir())), timeout=30,
               what="retired dirs removed")
