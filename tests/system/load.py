"""Keyed, numbered records produced under faults, and the exact check of what came back.

A ``ProducerRun`` produces ``{name}-{seq}`` records from its own thread (confluent-kafka or
kafka-python, idempotent, acks=all) until told to stop, and records where each acknowledged
one landed. ``read_all`` reads every partition to its end; ``assert_exactly_once`` checks that
every acknowledged record is there once, where it was acknowledged, in order per producer and
partition, and that nothing else is there but records whose delivery failed. A ``ConsumerRun``
reads alongside from its own thread; ``assert_consumed_once`` checks that it was given exactly
what is stored, once, in order. ``GroupMember``s consume as one consumer group, committing as
they go; ``assert_delivered_to_group`` checks that the group was given every stored record.
``TransformLoop`` keeps a consume-transform-produce worker (tests/system/eos_worker.py) running on
a topic, ``assert_transformed_once`` checks its output; ``GroupWatch`` says which consumer
groups of a load are not yet stable or not committing again (``GroupWatch``) (a nemesis's heal check).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from kafka import KafkaAdminClient, KafkaProducer

from tests.integration.broker_process import REPO_ROOT, wait_until
from tests.system.eos_worker import transform


@dataclass
class ProducerRun:
    client: str  # "confluent" or "kafka-python"
    bootstrap: str
    topic: str
    partitions: int
    pace_s: float = 0.002
    acked: dict[bytes, tuple[int, int | None]] = field(default_factory=dict)  # offset None: implicitly acknowledged
    failed: dict[bytes, str] = field(default_factory=dict)
    sent: int = 0
    # The longest time from send to acknowledgement (retries included), in seconds.
    slowest_ack_s: float = 0.0
    _sent_at: dict[bytes, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> ProducerRun:
        target = self._run_confluent if self.client == "confluent" else self._run_kafka_python
        self._thread = threading.Thread(target=target, name=f"producer-{self.client}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 120) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.client} producer did not finish within {timeout}s"

    def take_slowest_ack(self) -> float:
        """The slowest acknowledgement since the last call (or the start), starting over."""
        with self._lock:
            slowest, self.slowest_ack_s = self.slowest_ack_s, 0.0
        return slowest

    def _key(self, seq: int) -> bytes:
        return f"{self.client}-{seq:07d}".encode()

    def _sending(self, key: bytes) -> None:
        with self._lock:
            self._sent_at[key] = time.monotonic()

    def _acked(self, key: bytes, partition: int, offset: int | None) -> None:
        with self._lock:
            self.acked[key] = (partition, offset)
            now = time.monotonic()
            self.slowest_ack_s = max(self.slowest_ack_s, now - self._sent_at.pop(key, now))

    def _failed(self, key: bytes, error: Any) -> None:
        with self._lock:
            self.failed[key] = str(error)
            self._sent_at.pop(key, None)

    def _run_confluent(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": 120000, "retry.backoff.ms": 100})

        def report(error: Any, message: Any) -> None:
            if error is not None:
                self._failed(message.key(), error)
            else:
                self._acked(message.key(), message.partition(), message.offset())

        seq = 0
        while not self._stop.is_set() and seq < 200_000:
            key = self._key(seq)
            self._sending(key)
            producer.produce(self.topic, key=key, value=b"value of " + key, partition=seq % self.partitions,
                             on_delivery=report)
            seq += 1
            producer.poll(0)
            time.sleep(self.pace_s)
        self.sent = seq
        left = producer.flush(110)
        assert left == 0, f"{left} records never delivered"

    def _run_kafka_python(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=True,
                                 linger_ms=5, retries=2**31 - 1, delivery_timeout_ms=120000, request_timeout_ms=10000,
                                 retry_backoff_ms=100)
        seq = 0
        while not self._stop.is_set() and seq < 200_000:
            key = self._key(seq)
            self._sending(key)
            future = producer.send(self.topic, key=key, value=b"value of " + key, partition=seq % self.partitions)
            future.add_callback(lambda md, key=key: self._acked(key, md.partition, md.offset))
            future.add_errback(lambda exc, key=key: self._failed(key, exc))
            seq += 1
            time.sleep(self.pace_s)
        self.sent = seq
        producer.flush(110)
        producer.close(10)


@dataclass
class Record:
    key: bytes
    value: bytes
    partition: int
    offset: int
    headers: dict[str, bytes] = field(default_factory=dict)


@dataclass
class ConsumerRun:
    """Reads every partition of ``topic`` from its start while the scenario runs (confluent-kafka,
    assigned partitions, nothing committed), keeping every record it is given."""

    bootstrap: str
    topic: str
    partitions: int
    records: list[Record] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> ConsumerRun:
        self._thread = threading.Thread(target=self._run, name=f"consumer-{self.topic}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"watch-{self.topic}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
            while not self._stop.is_set():
                message = consumer.poll(0.2)
                if message is not None and not message.error():
                    self.records.append(Record(message.key(), message.value(), message.partition(),
                                               message.offset()))
        finally:
            consumer.close()

    def read_up_to(self, ends: dict[int, int]) -> bool:
        last = {r.partition: r.offset for r in self.records}
        return all(end == 0 or last.get(p, -1) >= end - 1 for p, end in ends.items())

    def stop(self, timeout: float = 30) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the consumer of {self.topic} did not finish within {timeout}s"


def assert_consumed_once(consumer: ConsumerRun, stored: list[Record], timeout: float = 60) -> None:
    """The consumer, which ran through the whole scenario, was given every stored record once, in
    offset order per partition, and nothing else. Stops it."""
    ends: dict[int, int] = {p: 0 for p in range(consumer.partitions)}
    for r in stored:
        ends[r.partition] = max(ends[r.partition], r.offset + 1)
    try:
        wait_until(lambda: consumer.read_up_to(ends), timeout, interval=0.2,
                   what=f"the consumer of {consumer.topic} at the end of every partition")
    finally:
        consumer.stop()
    for p in range(consumer.partitions):
        expected = [(r.offset, r.key) for r in stored if r.partition == p]
        given = [(r.offset, r.key) for r in consumer.records if r.partition == p and r.offset < ends[p]]
        assert given == sorted(expected), (
            f"the consumer of {consumer.topic}-{p} was given {len(given)} records ({len(set(given))} distinct), "
            f"{len(expected)} are stored")


class GroupMember:
    """One member of a consumer group (confluent-kafka) in its own thread: polls ``topic``,
    keeps every record it is given, commits synchronously after each batch. ``debug`` (librdkafka's
    debug contexts) goes to the captured stderr from librdkafka's own threads, so it shows what the
    client did even when a call of the member's thread never returns."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, debug: str | None = None) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                                  **({"debug": debug} if debug else {})})
        self.group = group
        self.topic = topic
        self.records: list[Record] = []
        self.commits = 0
        self.commit_errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> GroupMember:
        self.consumer.subscribe([self.topic])
        self._thread.start()
        return self

    def keys(self) -> list[bytes]:
        return [r.key for r in self.records]

    def _run(self) -> None:
        while not self._stop.is_set():
            messages = self.consumer.consume(100, 0.5)
            good = [m for m in messages if not m.error()]
            self.records += [Record(m.key(), m.value(), m.partition(), m.offset()) for m in good]
            if good:
                try:
                    self.consumer.commit(asynchronous=False)
                    self.commits += 1
                except KafkaException as exc:  # retried by the next commit, as applications do
                    self.commit_errors.append(str(exc))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        if self._thread.is_alive():
            frame = sys._current_frames().get(self._thread.ident or -1)
            where = "".join(traceback.format_stack(frame)) if frame is not None else "(no stack)"
            raise AssertionError(f"group member {self._thread.name} did not stop within 30s; it is in:\n{where}")
        self.consumer.close()


def assert_delivered_to_group(members: list[GroupMember], stored: list[Record], timeout: float = 90) -> None:
    """The group was given every stored record, and nothing that is not stored where it was
    given (a record given twice, after a rebalance or a coordinator failover, is at-least-once
    delivery, as Kafka's). Stops the members."""
    where = {(r.partition, r.offset): r.key for r in stored}
    try:
        wait_until(lambda: set(where) <= {(r.partition, r.offset) for m in members for r in m.records}, timeout,
                   interval=0.2, what="the group given every stored record")
    finally:
        for member in members:
            member.stop()
    given = [r for m in members for r in m.records]
    wrong = [r for r in given if where.get((r.partition, r.offset), r.key) != r.key]
    assert not wrong, f"{len(wrong)} records given to the group are not what is stored there, e.g. {wrong[:3]}"


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 60,
             isolation_level: str = "read_uncommitted") -> list[Record]:
    """Every record of every partition, up to each partition's high watermark at the start (with
    read_committed, the records of committed transactions alone). A partition is read once its
    last record was given, or once the consumer reached its end at the high watermark (its last
    offsets may be transaction markers, never given)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-all", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True,
                         "isolation.level": isolation_level})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        found: list[Record] = []
        eof_at: dict[int, int] = {}  # where each partition's end was reached
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout
        while len(done) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                # At its end, a partition's fetch offset (the EOF's offset; the position stays at the last
                # record given) is past the transaction markers, which are never given: up to the last
                # stable offset with read_committed.
                if message.error().code() == KafkaError._PARTITION_EOF:
                    eof_at[message.partition()] = message.offset()
                    if message.offset() >= ends[message.partition()]:
                        done.add(message.partition())
                continue
            if message.offset() < ends[message.partition()]:
                headers = {name: value or b"" for name, value in message.headers() or []}
                found.append(Record(message.key(), message.value(), message.partition(), message.offset(), headers))
            if message.offset() >= ends[message.partition()] - 1:
                done.add(message.partition())
        last = {r.partition: r.offset for r in found}
        assert len(done) == partitions, (f"read only partitions {sorted(done)} to their end {ends} ({isolation_level}: "
                                         f"last offsets given {last}, ends reached at {eof_at})")
        return found
    finally:
        consumer.close()


def assert_exactly_once(runs: list[ProducerRun], records: list[Record]) -> None:
    keys = [r.key for r in records]
    assert len(keys) == len(set(keys)), f"{len(keys) - len(set(keys))} records were stored twice"
    where = {r.key: (r.partition, r.offset) for r in records}
    for run in runs:
        assert run.acked, f"{run.client} got no acknowledgement at all"
        missing = [k for k in run.acked if k not in where]
        assert not missing, f"{len(missing)} acknowledged {run.client} records lost, e.g. {missing[:3]}"
        # librdkafka acknowledges a batch whose answer it lost once a later batch of the partition
        # is acknowledged (the idempotent producer's implicit ack): its partition, no offset.
        moved = [k for k, (partition, offset) in run.acked.items()
                 if where[k][0] != partition or (offset is not None and offset >= 0 and where[k][1] != offset)]
        assert not moved, f"{len(moved)} {run.client} records are not where they were acknowledged: " + ", ".join(
            f"{k.decode()} acknowledged at {run.acked[k]} (partition, offset), stored at {where[k]}"
            for k in moved[:6])
    acked = {k for run in runs for k in run.acked}
    failed = {k for run in runs for k in run.failed}
    unexpected = [k for k in where if k not in acked and k not in failed]
    assert not unexpected, f"records nobody produced or acknowledged: {unexpected[:3]}"
    assert all(r.value == b"value of " + r.key for r in records)
    # Per producer and partition, sequence numbers rise with offsets.
    by_stream: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for r in records:
        client, _, seq = r.key.decode().rpartition("-")
        by_stream.setdefault((client, r.partition), []).append((r.offset, int(seq)))
    for stream, entries in by_stream.items():
        seqs = [seq for _, seq in sorted(entries)]
        assert seqs == sorted(seqs), f"records of {stream} out of order"


def wait_acked(runs: list[ProducerRun], more_than: dict[str, int], timeout: float = 60) -> None:
    """Wait until every run has more acknowledgements than given (progress after a fault)."""
    wait_until(lambda: all(len(r.acked) > more_than.get(r.client, 0) for r in runs), timeout, interval=0.1,
               what="producers acknowledged again")


@dataclass(frozen=True)
class LoadGroup:
    """A consumer group of a load, and how many members it has when stable (0: its consumers are
    assigned partitions, as the EOS worker's, and the group holds committed offsets alone)."""

    group_id: str
    members: int


class GroupWatch:
    """Asks whether the consumer groups of a load are settled: a group with members is Stable with
    all of them, one without is Empty (DescribeGroups), and each has committed offsets (OffsetFetch)
    past those it had when first read here.

    kafka-python's admin client asks: confluent-kafka's aborts the whole process when a connection
    drops under a DescribeGroups or OffsetFetch (confluentinc/librdkafka#4605). Its client keeps
    each group's coordinator once found, even after a NOT_COORDINATOR, so after any error the next
    question goes through a new client."""

    def __init__(self, bootstrap: str, groups: list[LoadGroup]) -> None:
        self.bootstrap, self.groups = bootstrap, groups
        self.baseline: dict[str, int] = {}  # each group's sum of committed offsets when first read
        self._admin: KafkaAdminClient | None = None

    def unsettled(self) -> list[str]:
        """What is not settled yet (empty: every group is)."""
        wrong: list[str] = []
        for group in self.groups:
            try:
                if self._admin is None:
                    self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5000)
                described = self._admin.describe_groups([group.group_id])[group.group_id]
                offsets = self._admin.list_group_offsets({group.group_id: None})[group.group_id]
            except Exception as exc:  # a coordinator moving or not answering yet: asked again, afresh
                wrong.append(f"group {group.group_id}: {exc!r}")
                self.close()
                continue
            state, members = described["group_state"], len(described["members"])
            want = "Stable" if group.members else "Empty"
            if state != want or members != group.members:
                wrong.append(f"group {group.group_id} is {state} with {members} members (want {want} with "
                             f"{group.members})")
            total = sum(max(at.offset, 0) for at in offsets.values())
            if group.group_id not in self.baseline:
                self.baseline[group.group_id] = total
            if total <= self.baseline[group.group_id]:
                wrong.append(f"group {group.group_id} committed nothing since (offsets summing to {total})")
        return wrong

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


class TransformLoop:
    """A consume-transform-produce worker (tests/system/eos_worker.py, its own process) on ``source``
    for as long as a test runs. One that ends (it gave up: fenced, or a commit of unknown outcome)
    is started again, and so is one that ended no transaction for STALL_S (killed first): an
    operator's supervisor does that, and librdkafka can wait for good on a coordinator it cached
    (see test_exactly_once). Each start is in ``restarts``, with why."""

    STALL_S = 30.0
    # How long a worker told to stop may take over the transaction at hand. The cluster is whole
    # by then and a commit takes milliseconds; librdkafka 2.16 sometimes never returns from
    # send_offsets_to_transaction, its timeout ignored, once it dropped the transaction
    # coordinator's broker while that broker was out of Metadata (stopped in a roll). Such a worker
    # is killed and its transaction aborted by a fencing one, as below.
    STOP_S = 20.0

    def __init__(self, bootstrap: str, source: str, partitions: int, sink: str, group: str, work_dir: Path) -> None:
        self.bootstrap, self.source, self.partitions, self.sink, self.group = bootstrap, source, partitions, sink, group
        self.log = work_dir / f"{group}.log"  # the workers' stderr, librdkafka's debug log included
        self.outcomes = work_dir / f"{group}.outcomes"  # "committed <txn>" or "aborted <txn>" per line
        self.outcomes.touch()
        self.restarts: list[str] = []
        self._stop = threading.Event()
        self._worker: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._supervise, name=f"supervisor-{group}", daemon=True)

    def start(self) -> TransformLoop:
        self._worker = self._spawn("null")
        self._thread.start()
        return self

    def _spawn(self, ends_json: str) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as stderr:
            stderr.write(f"===== worker started {time.strftime('%H:%M:%S')}\n".encode())
            stderr.flush()
            return subprocess.Popen([sys.executable, "-m", "tests.system.eos_worker", self.bootstrap, self.source,
                                     self.sink, self.group, self.group, ends_json, str(self.outcomes)],
                                    cwd=REPO_ROOT, stdout=stderr, stderr=stderr)

    def _supervise(self) -> None:
        assert self._worker is not None
        size, progressed = 0, time.monotonic()
        while not self._stop.wait(0.5):
            now = time.monotonic()
            if self.outcomes.stat().st_size != size:
                size, progressed = self.outcomes.stat().st_size, now
            code = self._worker.poll()
            if code is None and now - progressed < self.STALL_S:
                continue
            if code is None:
                self._worker.kill()
                code = self._worker.wait(10)
                self.restarts.append(f"killed at {time.strftime('%H:%M:%S')}: no transaction ended in "
                                     f"{self.STALL_S:.0f}s")
            else:
                self.restarts.append(f"ended with status {code} at {time.strftime('%H:%M:%S')}")
            self._worker, progressed = self._spawn("null"), now

    def stop(self) -> None:
        """Ends the worker after the transaction at hand (SIGTERM); a worker that does not end so
        is killed and its transaction aborted by one that only fences it."""
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"the supervisor of {self.group} did not stop"
        worker = self._worker
        assert worker is not None
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(self.STOP_S)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(10)
        if worker.returncode != 0:  # nothing to work on: it inits (fencing), reads the offsets and ends
            fence = self._spawn(json.dumps({p: 0 for p in range(self.partitions)}))
            try:
                assert fence.wait(120) == 0, f"a worker of {self.group} could not fence the last one"
            finally:
                if fence.poll() is None:
                    fence.kill()
                    fence.wait(10)

    def kill(self) -> None:
        """In a test's cleanup: no worker left running."""
        self._stop.set()
        if self._worker is not None and self._worker.poll() is None:
            self._worker.kill()
            self._worker.wait(10)

    def ended(self) -> tuple[set[str], set[str]]:
        """The transactions the workers saw committed, and those they aborted."""
        ended: dict[str, set[str]] = {"committed": set(), "aborted": set()}
        for line in self.outcomes.read_text().splitlines():
            word, txn = line.split()
            ended[word].add(txn)
        return ended["committed"], ended["aborted"]

    def rewinds(self, most: int = 40) -> list[str]:
        """The last ``most`` lines of the workers' log saying where a worker read from after a
        start or an abort, each followed by the transaction it then sent offsets for."""
        lines = [line for line in self.log.read_text(errors="replace").splitlines() if line.startswith("eos worker:")]
        kept: list[str] = []
        for i, line in enumerate(lines):
            if "reading from the committed offsets" in line:
                kept += lines[i:i + 2]
        return kept[-most:]

    def committed_offsets(self) -> dict[int, int]:
        reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                           "isolation.level": "read_committed"})
        try:
            found = reader.committed([TopicPartition(self.source, p) for p in range(self.partitions)], timeout=30)
        finally:
            reader.close()
        return {tp.partition: max(tp.offset, 0) for tp in found}


def assert_transformed_once(loop: TransformLoop, source: list[Record], sink_partitions: int) -> int:
    """Every input record the workers committed as consumed is in the output once, transformed,
    and nothing else is, for a read_committed reader, which is given no record of a transaction a
    worker aborted (and such records are in the log, so that this means something). Run once the
    loop stopped; the number of input records consumed."""
    committed = loop.committed_offsets()
    consumed = [r for r in source if r.offset < committed.get(r.partition, 0)]
    output = read_all(loop.bootstrap, loop.sink, sink_partitions, isolation_level="read_committed")
    expected = Counter((r.key, transform(r.value)) for r in consumed)
    given = Counter((r.key, r.value) for r in output)
    missing, extra = expected - given, given - expected
    assert not missing, (f"{sum(missing.values())} input records committed as consumed are not in the output "
                         f"{loop.sink}, e.g. {list(missing)[:3]} (committed offsets {committed}); the workers' "
                         f"rewinds, each with the transaction after it:\n" + "\n".join(loop.rewinds()))
    assert not extra, (f"{sum(extra.values())} output records are extra (duplicated, or of no input consumed), "
                       f"e.g. {list(extra.items())[:3]} (committed offsets {committed})")
    _, aborted = loop.ended()
    seen = [r for r in output if r.headers.get("txn", b"").decode() in aborted]
    assert not seen, f"read_committed was given {len(seen)} records of aborted transactions, e.g. {seen[:3]}"
    logged = read_all(loop.bootstrap, loop.sink, sink_partitions)
    assert any(r.headers.get("txn", b"").decode() in aborted for r in logged), \
        "no record of an aborted transaction is in the output's log"
    assert consumed, "the workers committed nothing"
    return len(consumed)
