"""A partition moved back and forth between the log dirs while a producer writes to it without
pause (acks=all): no produce request fails (the producer may not retry, so any refusal would
show), and the records read back are exactly the ones acknowledged, once each, in order."""

from __future__ import annotations

import threading
import time

import confluent_kafka
import pytest
from kafka import KafkaAdminClient
from kafka.structs import TopicPartitionReplica

from tests.integration.broker_process import wait_until
from tests.integration.clients import confluent_consume, create_topic
from tests.integration.test_a2_move_every_replica import replica_dirs

pytestmark = pytest.mark.integration

TOPIC = "steady"
MOVES = 3


def test_moves_under_a_continuous_acks_all_producer(broker_factory) -> None:
    broker = broker_factory(overrides={"log.segment.bytes": str(256 << 10),
                                       "replica.alter.log.dirs.io.max.bytes.per.second": str(16 << 20)})
    create_topic(broker.bootstrap, TOPIC, 1)
    stop = threading.Event()
    acked: list[tuple[int, bytes]] = []
    failures: list[str] = []
    crashes: list[BaseException] = []

    def run() -> None:
        try:
            producer = confluent_kafka.Producer({
                "bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": False,
                "retries": 0, "linger.ms": 2, "batch.size": 64_000, "max.in.flight.requests.per.connection": 1,
                "message.timeout.ms": 60_000})

            def delivered(err, msg) -> None:
                if err is not None:
                    failures.append(f"{msg.key()!r}: {err}")
                else:
                    acked.append((msg.offset(), msg.key()))

            seq = 0
            while not stop.is_set():
                try:
                    producer.produce(TOPIC, key=b"s%d" % seq, value=b"%d:" % seq + b"p" * 500, partition=0,
                                     on_delivery=delivered)
                    seq += 1
                    if seq % 20 == 0:
                        time.sleep(0.002)  # about 5 MB/s: below the move throttle, so moves can catch up
                except BufferError:
                    producer.poll(0.01)
                producer.poll(0)
            assert producer.flush(60) == 0
        except BaseException as exc:
            crashes.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(acked) > 20_000, timeout=60, what="10 MB written before the first move")
        dirs = [str(d) for d in broker.log_dirs]
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="steady-admin")
        try:
            for i in range(MOVES):
                (here,) = replica_dirs(broker.bootstrap)[(TOPIC, 0)]
                there = dirs[1] if here[0] == dirs[0] else dirs[0]
                result = admin.alter_replica_log_dirs({TopicPartitionReplica(TOPIC, 0, 1): there})
                assert [e.__name__ for e in result.values()] == ["NoError"]
                count = len(acked)
                wait_until(lambda there=there: replica_dirs(broker.bootstrap).get((TOPIC, 0)) == [(there, False)],
                           timeout=60, what=f"move {i + 1} done")
                assert len(acked) > count, "the producer made no progress during the move"
        finally:
            admin.close()
        wait_until(lambda: len(acked) > count + 2_000, timeout=30, what="writes after the last move")
    finally:
        stop.set()
        thread.join(90)
    assert not crashes, crashes
    assert not failures, f"{len(failures)} produce requests failed, e.g. {failures[:3]}"
    # The mover logs a move once it is visible in DescribeLogDirs, so the last line may follow it.
    wait_until(lambda: broker.stderr_text(1_000_000).count(f"moved {TOPIC}-0 from") == MOVES, 10, interval=0.1,
               what=f"{MOVES} moves logged")
    read = confluent_consume(broker.bootstrap, TOPIC, [0], timeout=90)
    assert [(r.offset, r.key) for r in read] == sorted(acked)
    assert [r.offset for r in read] == list(range(len(read)))
    assert [int(r.key[1:]) for r in read] == list(range(len(read))), "records out of order"
