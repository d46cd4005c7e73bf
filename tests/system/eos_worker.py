"""A consume-transform-produce worker, run as its own process so that a test can kill it with
kill -9 at any point: it reads ``in-<i>`` records of the input topic from its group's committed
offsets (read_committed), writes ``out-<i>`` to the output topic and commits the input offsets in
the same transaction (send_offsets_to_transaction), a few records per transaction; every
seventh transaction it aborts once its offsets are sent, as an application that hit an error
would, and does that work again. It exits 0 once its committed offsets reach the input's end
offsets, which the test gives it.

A transaction that must be aborted (an abortable error) is aborted and done again from the
committed offsets; any other error (fenced, or a commit that timed out) ends the process with
status 3, and the test starts another worker, as an operator's supervisor would.

Usage: python -m tests.system.eos_worker BOOTSTRAP INPUT OUTPUT GROUP TXN_ID END_OFFSETS_JSON
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

RECORDS_PER_TXN = 25
ABORT_EVERY = 7
GAVE_UP = 3


def _committed(consumer: Consumer, topic: str, partitions: list[int]) -> dict[int, int]:
    found = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=30)
    return {tp.partition: max(tp.offset, 0) for tp in found}


def _rewind(consumer: Consumer, source: str, ends: dict[int, int]) -> dict[int, int]:
    """Read again from the committed offsets (after an abort): its positions."""
    positions = _committed(consumer, source, list(ends))
    consumer.assign([TopicPartition(source, p, positions[p]) for p in ends])
    return positions


def main(bootstrap: str, source: str, sink: str, group: str, transactional_id: str, ends_json: str) -> int:
    ends = {int(p): offset for p, offset in json.loads(ends_json).items()}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    # librdkafka's log of the transaction's steps, of its connections and of every request it
    # sends and every answer (about 600 KB a run, into the test's log file): a worker that stops
    # committing shows which request went to which broker and what came back.
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 2,
                         "transaction.timeout.ms": 20_000, "debug": "eos,broker,protocol"})
    producer.init_transactions(60)  # fences the worker this one replaces and aborts its transaction
    positions = _rewind(consumer, source, ends)
    transactions = 0
    while any(positions[p] < ends[p] for p in ends):
        messages = [m for m in consumer.consume(RECORDS_PER_TXN, timeout=1) if m.error() is None]
        if not messages:
            continue
        try:
            producer.begin_transaction()
            for message in messages:
                producer.produce(sink, key=message.key(), value=(message.value() or b"").replace(b"in-", b"out-"))
                positions[message.partition()] = (message.offset() or 0) + 1
            producer.send_offsets_to_transaction(
                [TopicPartition(source, p, offset) for p, offset in positions.items()],
                consumer.consumer_group_metadata(), 60)
            transactions += 1
            if transactions % ABORT_EVERY == 0:
                producer.abort_transaction(60)
                positions = _rewind(consumer, source, ends)
                continue
            producer.commit_transaction(60)
        except KafkaException as exc:
            error = exc.args[0]
            if error.fatal() or not error.txn_requires_abort():
                print(f"eos worker: {error.name()}: {error.str()}", file=sys.stderr, flush=True)
                return GAVE_UP
            producer.abort_transaction(60)
            positions = _rewind(consumer, source, ends)
            time.sleep(0.1)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:7]))
