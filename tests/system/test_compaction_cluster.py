"""An RF 3 compacted topic in the three-broker cluster whose leader is killed in the middle of a
clean: every replica cleans its own log, the old leader finishes its decided swap when it comes
back and catches up as a follower across its new leader's cleaned (gapped) range, and every
key's latest acknowledged value is what each replica holds as that key's latest."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.record.memory_records import MemoryRecords

from tests.integration.broker_process import wait_until
from tests.integration.test_compaction import cleaner_checkpoint
from tests.system.cluster import Cluster

TOPIC = "state"
KEYS = 50
SETTINGS = {"log.cleaner.backoff.ms": "100", "log.segment.delete.delay.ms": "0"}
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "8192", "min.cleanable.dirty.ratio": "0.01",
                 "min.insync.replicas": "2"}


@dataclass
class KeyedUpdates:
    """Idempotent acks=all updates of KEYS keys, in a thread; the latest acknowledged (offset,
    value) of each key."""

    bootstrap: str
    latest: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> KeyedUpdates:
        self._thread = threading.Thread(target=self._run, name="keyed-updates", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "batch.size": 4096, "message.timeout.ms": 120000})
        lock = threading.Lock()

        def report(error, message) -> None:
            if error is not None:
                self.errors.append(str(error))
                return
            with lock:
                known = self.latest.get(message.key())
                if known is None or known[0] < message.offset():
                    self.latest[message.key()] = (message.offset(), message.value())

        seq = 0
        while not self._stop.is_set():
            key = b"key-%03d" % (seq % KEYS)
            producer.produce(TOPIC, key=key, value=b"%s=%d;" % (key, seq) + b"." * 100, partition=0,
                             on_delivery=report)
            producer.poll(0)
            seq += 1
            time.sleep(0.002)
        assert producer.flush(110) == 0

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(120)


def _replica_latest(log_dirs: list[Path]) -> tuple[dict[bytes, tuple[int, bytes]], int]:
    """Each key's latest (offset, value) in a replica's segment files, and how many records they
    hold. A running broker's clean may swap segments while they are read: then it reads again."""
    return wait_until(lambda: _read_replica(log_dirs), 10, interval=0.1, what="a replica's segments read whole")


def _read_replica(log_dirs: list[Path]) -> tuple[dict[bytes, tuple[int, bytes]], int]:
    latest: dict[bytes, tuple[int, bytes]] = {}
    count = 0
    for log_dir in log_dirs:
        for segment in sorted((log_dir / f"{TOPIC}-0").glob("*.log")) if (log_dir / f"{TOPIC}-0").is_dir() else []:
            records = MemoryRecords(segment.read_bytes())  # FileNotFoundError if a swap retired it
            while records.has_next():
                for record in records.next_batch():
                    latest[record.key] = (record.offset, record.value)
                    count += 1
    return latest, count


@pytest.mark.cluster_settings(**SETTINGS)
def test_a_leader_killed_mid_clean_keeps_every_acknowledged_latest_value(cluster: Cluster) -> None:
    victim_id = next(b for b in cluster.brokers if b != cluster.controller_id())
    victim = cluster.brokers[victim_id]
    # Its event loop freezes as its first clean decides its swap: then it is killed there.
    victim.stop()
    victim.extra_env["MINIKAFKA_TEST_PAUSE_AT"] = "clean.swap_decided"
    victim.start()
    victim.extra_env.clear()
    others = [b for b in cluster.brokers if b != victim_id]
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, -1, -1, replica_assignments={0: [victim_id, *others]},
                                      topic_configs=TOPIC_CONFIGS)])
    finally:
        admin.close()
    cluster.wait_for_leaders(TOPIC, 1, isr_size=3)
    assert cluster.leader(TOPIC, 0) == victim_id
    updates = KeyedUpdates(cluster.bootstrap).start()
    try:
        wait_until(lambda: "test hook: paused at clean.swap_decided" in victim.stderr_text(), 60, interval=0.1,
                   what=f"broker {victim_id} frozen in the middle of a clean")
        victim.kill9()
        survivor = cluster.brokers[others[0]]
        wait_until(lambda: cluster.partitions(TOPIC, survivor)[0].leader_id in others, 30, interval=0.1,
                   what="a new leader")
        acked = len(updates.latest)
        # The others clean past where the old leader's log ends: it will fetch across cleaned ranges.
        victim_end = max(offset for offset, _ in _replica_latest(victim.log_dirs)[0].values()) + 1
        wait_until(lambda: all(cleaner_checkpoint(cluster.brokers[b].log_dirs, TOPIC) > victim_end for b in others), 60,
                   interval=0.2, what=f"the other replicas cleaning their own logs past offset {victim_end}")
        victim.start()
        assert "finished swapping in the cleaned segment" in victim.stderr_text()
        cluster.wait_for_leaders(TOPIC, 1, isr_size=3, timeout=60)
        time.sleep(1)  # some more updates, replicated to the old leader too
    finally:
        updates.stop()
    assert not updates.errors and acked
    wait_until(lambda: len({_replica_latest(b.log_dirs)[0][b"key-000"] for b in cluster.brokers.values()}) == 1,
               30, interval=0.2, what="every replica at the end of the log")
    for broker_id, broker in cluster.brokers.items():
        latest, count = _replica_latest(broker.log_dirs)
        assert latest == updates.latest, f"broker {broker_id}: a latest value differs from the acknowledged one"
        assert count < max(offset for offset, _ in latest.values()) + 1, f"broker {broker_id} cleaned nothing"
