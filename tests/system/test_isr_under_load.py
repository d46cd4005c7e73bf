"""A leader saturated by acks=all producers keeps its healthy followers in sync.

During a produce burst of some hundred megabytes to one partition the ISR shrank to the leader
alone and producers got NOT_ENOUGH_REPLICAS, though the followers replicated flat out: the
producers' in-flight batches above the high watermark outgrew a follower's 1 MiB fetch, so no
fetch ever reached where the leader's log had ended at the one before. Here confluent-kafka producers push as fast as
they can into one RF 3 partition for a while, with replica.lag.time.max.ms at the system tests'
3 s (so a starved follower drops out within seconds), and the ISR must stay whole throughout:
no ISR change in the leader's log, every Metadata answer lists all three in sync, and not one
produce fails.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from confluent_kafka import KafkaError, Producer

from tests.system.cluster import Cluster

TOPIC = "saturated"
BURST_S = 20.0
PRODUCERS = 6
VALUE = b"x" * 65536
ISR_CHANGE = re.compile(rf"{TOPIC}-0: in-sync replicas \[[\d, ]*\] -> \[[\d, ]*\]")


class _Burst:
    """Producers that fill partition 0 as fast as the leader takes it, from their own threads."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.acked_bytes = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, name=f"burst-{i}", daemon=True) for i in range(PRODUCERS)]

    def start(self) -> _Burst:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)
            assert not thread.is_alive(), "a producer did not finish within 120 s"

    def _report(self, error: KafkaError | None, message: Any) -> None:
        with self._lock:
            if error is not None:
                self.errors.append(str(error))
            else:
                self.acked_bytes += len(message.value())

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "batch.size": 1_000_000, "message.timeout.ms": 60000,
                             "queue.buffering.max.kbytes": 8192})
        while not self._stop.is_set():
            try:
                producer.produce(TOPIC, VALUE, partition=0, on_delivery=self._report)
            except BufferError:
                producer.poll(0.05)
                continue
            producer.poll(0)
        assert producer.flush(90) == 0


def test_followers_of_a_saturated_leader_stay_in_sync(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, 1, 3, **{"min.insync.replicas": "2"})
    leader = cluster.brokers[cluster.leader(TOPIC, 0)]
    shrunk: list[list[int]] = []
    burst = _Burst(cluster.bootstrap).start()
    try:
        ends = time.monotonic() + BURST_S
        while time.monotonic() < ends:
            isr = sorted(cluster.partitions(TOPIC, via=leader)[0].isr_nodes)
            if len(isr) < 3:
                shrunk.append(isr)
            time.sleep(0.2)
        in_burst = burst.acked_bytes
    finally:
        burst.stop()
    changes = ISR_CHANGE.findall(leader.stderr_text(2_000_000))
    print(f"burst: {in_burst / 1e6:.0f} MB acknowledged in {BURST_S:.0f}s, {burst.acked_bytes / 1e6:.0f} MB in all; "
          f"ISR changes: {changes}")
    assert in_burst > 0
    assert not changes, f"the leader changed the ISR under load: {changes}"
    assert not shrunk, f"Metadata showed a shrunk ISR: {shrunk[:5]}"
    assert not burst.errors, f"{len(burst.errors)} produce errors, e.g. {burst.errors[:3]}"
