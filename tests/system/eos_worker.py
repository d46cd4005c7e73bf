"""A consume-transform-produce worker, run as its own process so that a test can kill it with
kill -9 at any point: it reads ``in-<i>`` records of the input topic from its group's committed
offsets (read_committed), writes ``out-<i>`` to the output topic and commits the input offsets in
the same transaction (send_offsets_to_transaction), a few records per transaction; every
seventh transaction it aborts once its offsets are sent, as an application that hit an error
would, and does that work again. It exits 0 once its committed offsets reach the input's end
offsets, which the test gives it; given ``null`` for them, it works until SIGTERM (a test whose input
keeps growing), finishes the transaction at hand and exits 0.

A transaction that must be aborted (an abortable error) is aborted and done again from the
committed offsets; any other error (fenced, or a commit that timed out) ends the process with
status 3, and the test starts another worker, as an operator's supervisor would.

Each output record carries its transaction in a ``txn`` header (``<pid>-<n>``); given an
OUTCOMES file, the worker appends ``committed <txn>`` or ``aborted <txn>`` to it once
commit_transaction or abort_transaction returned, so that a test knows which transactions were
aborted and can check that no read_committed reader is given their records.

Usage: python -m tests.system.eos_worker BOOTSTRAP INPUT OUTPUT GROUP TXN_ID END_OFFSETS_JSON [OUTCOMES]
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

RECORDS_PER_TXN = 25
ABORT_EVERY = 7
GAVE_UP = 3


def transform(value: bytes) -> bytes:
    """What the worker writes for an input record's value."""
    return value.replace(b"in-", b"out-")


def _committed(consumer: Consumer, topic: str, partitions: list[int]) -> dict[int, int]:
    found = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=30)
    return {tp.partition: max(tp.offset, 0) for tp in found}


def _rewind(consumer: Consumer, source: str, partitions: list[int]) -> dict[int, int]:
    """Read again from the committed offsets (after an abort): its positions, logged (a test
    that finds input consumed but not transformed compares them with the offsets the
    transactions sent)."""
    positions = _committed(consumer, source, partitions)
    print(f"eos worker: {time.strftime('%H:%M:%S')} reading from the committed offsets {positions}",
          file=sys.stderr, flush=True)
    consumer.assign([TopicPartition(source, p, positions[p]) for p in partitions])
    return positions


def main(bootstrap: str, source: str, sink: str, group: str, transactional_id: str, ends_json: str,
         outcomes_path: str | None = None) -> int:
    given = json.loads(ends_json)
    ends = None if given is None else {int(p): offset for p, offset in given.items()}
    stopping: list[int] = []
    if ends is None:
        signal.signal(signal.SIGTERM, lambda number, _frame: stopping.append(number))
    outcomes = Path(outcomes_path) if outcomes_path else None

    def outcome(word: str, txn: str) -> None:
        if outcomes is not None:
            with outcomes.open("a") as log:
                log.write(f"{word} {txn}\n")

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    # librdkafka's log of the transaction's steps, of its connections and of every request it
    # sends and every answer (about 600 KB a run, into the test's log file): a worker that stops
    # committing shows which request went to which broker and what came back.
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 2,
                         "transaction.timeout.ms": 20_000, "debug": "eos,broker,protocol"})
    producer.init_transactions(60)  # fences the worker this one replaces and aborts its transaction
    partitions = sorted(ends) if ends is not None else \
        sorted(consumer.list_topics(source, timeout=30).topics[source].partitions)
    positions = _rewind(consumer, source, partitions)
    transactions = begun = 0
    while not stopping and (ends is None or any(positions[p] < ends[p] for p in ends)):
        messages = [m for m in consumer.consume(RECORDS_PER_TXN, timeout=1) if m.error() is None]
        if not messages:
            continue
        begun += 1
        txn = f"{os.getpid()}-{begun}"
        try:
            producer.begin_transaction()
            for message in messages:
                producer.produce(sink, key=message.key(), value=transform(message.value() or b""),
                                 headers=[("txn", txn.encode())])
                positions[message.partition()] = (message.offset() or 0) + 1
            producer.send_offsets_to_transaction(
                [TopicPartition(source, p, offset) for p, offset in positions.items()],
                consumer.consumer_group_metadata(), 60)
            print(f"eos worker: {time.strftime('%H:%M:%S')} transaction {txn}: {len(messages)} records, offsets "
                  f"{positions} sent", file=sys.stderr, flush=True)
            transactions += 1
            if transactions % ABORT_EVERY == 0:
                # Its records reach the log first (an abort drops those not yet sent): the tests
                # check that a read_committed reader is not given records that are there.
                producer.flush(60)
                producer.abort_transaction(60)
                outcome("aborted", txn)
                positions = _rewind(consumer, source, partitions)
                continue
            producer.commit_transaction(60)
            outcome("committed", txn)
        except KafkaException as exc:
            error = exc.args[0]
            if error.fatal() or not error.txn_requires_abort():
                print(f"eos worker: {error.name()}: {error.str()}", file=sys.stderr, flush=True)
                return GAVE_UP
            producer.abort_transaction(60)
            outcome("aborted", txn)
            positions = _rewind(consumer, source, partitions)
            time.sleep(0.1)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:8]))
