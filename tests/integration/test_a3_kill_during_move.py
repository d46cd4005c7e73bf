"""Scenario A3 of ACCEPTANCE.md: kill -9 the broker in the middle of a move, and at every step
of the swap; restart: the move resumes or the swap completes by itself, every acknowledged
record is kept, no partition is left in two dirs and no copy is left behind.

The instant is exact: the broker runs with MINIKAFKA_TEST_PAUSE_AT=<point> (read at startup),
freezes when a move reaches that point and says so in its log; the test then kills it with
SIGKILL and restarts it without the hook."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.structs import TopicPartitionReplica

from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import create_topic, kafka_python_consume
from tests.integration.test_a2_move_every_replica import replica_dirs

pytestmark = pytest.mark.integration

TOPIC = "a3"
OVERRIDES = {"log.segment.bytes": str(128 << 10)}
# Where the move is frozen and killed: half copied; copied and flushed but not decided; decided
# (marker written) but still served from the source; served from the copy with the source dir
# retired (appends may have gone to the copy); the copy renamed into place.
POINTS = ["move.copied_half", "swap.future_complete", "swap.marker_written", "swap.source_retired",
          "swap.future_promoted"]


def produce(bootstrap: str, first: int, count: int) -> dict[int, int]:
    """seq -> offset of ``count`` acknowledged records (acks=all, idempotent)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        futures = {seq: producer.send(TOPIC, key=b"k%d" % seq, value=b"%d:" % seq + b"v" * 300, partition=0)
                   for seq in range(first, first + count)}
        producer.flush(60)
        return {seq: future.get(timeout=10).offset for seq, future in futures.items()}
    finally:
        producer.close(10)


def on_disk(broker: BrokerProcess) -> list[tuple[str, str]]:
    """(log dir name, entry) of everything of the topic in the log dirs."""
    return sorted((d.name, e.name) for d in broker.log_dirs for e in d.iterdir() if e.name.startswith(f"{TOPIC}-"))


@pytest.mark.parametrize("point", POINTS)
def test_a3_kill9_during_a_move_or_its_swap(broker_factory, monkeypatch, point: str) -> None:
    monkeypatch.setenv("MINIKAFKA_TEST_PAUSE_AT", point)
    broker = broker_factory(overrides=OVERRIDES)
    monkeypatch.delenv("MINIKAFKA_TEST_PAUSE_AT")
    create_topic(broker.bootstrap, TOPIC, 1)
    acked = produce(broker.bootstrap, 0, 4000)  # ~1.3 MB: ten segments
    (source,) = replica_dirs(broker.bootstrap)[(TOPIC, 0)]
    target = next(str(d) for d in broker.log_dirs if str(d) != source[0])

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="a3-admin")
    try:
        result = admin.alter_replica_log_dirs({TopicPartitionReplica(TOPIC, 0, 1): target})
    finally:
        admin.close()
    assert [err.__name__ for err in result.values()] == ["NoError"]
    wait_until(lambda: f"test hook: paused at {point}" in broker.stderr_text(), timeout=30,
               what=f"the move frozen at {point}")
    started = time.monotonic()
    broker.kill9()
    broker.start()

    # The move resumes or its swap was finished at startup; either way it ends in the target.
    wait_until(lambda: replica_dirs(broker.bootstrap).get((TOPIC, 0)) == [(target, False)], timeout=60,
               what="the partition in its new dir with no copy left")
    wait_until(lambda: on_disk(broker) == [(target.rsplit("/", 1)[1], f"{TOPIC}-0")], timeout=30,
               what=f"one dir for {TOPIC}-0 and nothing else (found {on_disk(broker)})")
    text = broker.stderr_text(200_000).split("===== start #2", 1)[1]
    if point in ("move.copied_half", "swap.future_complete"):
        assert f"resuming the move of {TOPIC}-0" in text
    else:
        assert f"finished the swap of {TOPIC}-0" in text or f"moved {TOPIC}-0" in text
    acked.update(produce(broker.bootstrap, 4000, 200))
    read = kafka_python_consume(broker.bootstrap, TOPIC, [0], timeout=60)
    keys = Counter(r.key for r in read)
    assert not [k for k, n in keys.items() if n > 1], "records read twice"
    offsets = {r.key: r.offset for r in read}
    lost = [seq for seq in acked if offsets.get(b"k%d" % seq) != acked[seq]]
    assert not lost, f"{len(lost)} acknowledged records lost or moved, e.g. {lost[:5]}"
    assert [r.offset for r in read] == list(range(len(read)))
    assert broker.is_running() and time.monotonic() - started < 90
    with broker.wire() as wire:
        (topic,) = wire.metadata([TOPIC], version=5).topics
    (state,) = topic.partitions
    assert (topic.error_code, state.error_code, state.leader_id, list(state.replica_nodes), list(state.isr_nodes),
            list(state.offline_replicas)) == (0, 0, 1, [1], [1], [])
