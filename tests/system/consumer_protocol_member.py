"""One confluent-kafka consumer with group.protocol=consumer, run as its own process so that a
test can kill it with kill -9: python -m tests.system.consumer_protocol_member BOOTSTRAP GROUP
TOPIC NAME EVENTS_FILE [PROTOCOL]; PROTOCOL "classic" makes it a classic member
(cooperative-sticky assignor, 6 s session), as before an online upgrade.

It writes one JSON line per event to EVENTS_FILE, flushed at once (what a killed process wrote
stays): {"t": wall time, "e": "assign"|"revoke"|"lost", "p": [partitions]}, {"e": "read",
"r": [[partition, offset, key], ...]} per batch, {"e": "commit", "c": {partition: offset}} per
synchronous commit that succeeded. SIGTERM closes the consumer (it leaves the group).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException


def main(bootstrap: str, group: str, topic: str, name: str, events_path: str, protocol: str = "consumer") -> None:
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    with open(events_path, "a", encoding="utf-8") as events:
        def write(event: dict[str, Any]) -> None:
            events.write(json.dumps({"t": time.time(), **event}) + "\n")
            events.flush()

        settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                                    "client.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        if protocol == "classic":
            settings.update({"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 6000,
                             "heartbeat.interval.ms": 500})
        consumer = Consumer(settings)
        consumer.subscribe(
            [topic],
            on_assign=lambda _, parts: write({"e": "assign", "p": [p.partition for p in parts]}),
            on_revoke=lambda _, parts: write({"e": "revoke", "p": [p.partition for p in parts]}),
            on_lost=lambda _, parts: write({"e": "lost", "p": [p.partition for p in parts]}))
        write({"e": "started"})
        while not stopping:
            messages = [m for m in consumer.consume(200, 0.2) if not m.error()]
            if not messages:
                continue
            write({"e": "read", "r": [[m.partition(), m.offset(), m.key().decode()] for m in messages]})
            try:
                committed = consumer.commit(asynchronous=False) or []
            except KafkaException as exc:  # the next batch's commit covers these, as applications do
                write({"e": "commit_failed", "why": str(exc)})
                continue
            write({"e": "commit", "c": {str(tp.partition): tp.offset for tp in committed if tp.error is None}})
        consumer.close()
        write({"e": "closed"})


if __name__ == "__main__":
    main(*sys.argv[1:7])
