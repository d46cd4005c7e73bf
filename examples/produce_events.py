"""Produce JSON events for examples/windowed_counts.py: random users and amounts, event times
spread over a few minutes, then one event far later that moves the watermark past them all.

    .venv/bin/python examples/produce_events.py --bootstrap 127.0.0.1:9092 --topic events --count 10000
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from datetime import UTC, datetime, timedelta

import confluent_kafka


def events(count: int, users: int, minutes: int, seed: int, start: datetime) -> list[dict[str, object]]:
    """`count` events in event-time order, as a source that timestamps what it sends would produce."""
    rng = random.Random(seed)
    times = sorted(start + timedelta(milliseconds=rng.randrange(minutes * 60_000)) for _ in range(count))
    return [{"user": f"user-{rng.randrange(users)}", "event_time": at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
             "amount": rng.randrange(1, 100)} for at in times]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="events")
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--users", type=int, default=5)
    parser.add_argument("--minutes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    start = datetime.now(UTC).replace(second=0, microsecond=0)
    batch = events(args.count, args.users, args.minutes, args.seed, start)
    late = start + timedelta(hours=1)
    batch.append({"user": "watermark", "event_time": late.strftime("%Y-%m-%dT%H:%M:%SZ"), "amount": 0})
    producer = confluent_kafka.Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": True,
                                         "linger.ms": 20})
    for event in batch:
        while True:
            try:
                producer.produce(args.topic, key=str(event["user"]).encode(), value=json.dumps(event).encode())
                break
            except BufferError:
                producer.poll(0.1)
    left = producer.flush(60)
    print(f"{len(batch) - left} events to {args.topic} ({args.count} from {start:%H:%M}Z over {args.minutes} "
          f"minutes, and one at {late:%H:%M}Z to close their windows)", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
