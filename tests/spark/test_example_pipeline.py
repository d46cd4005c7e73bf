"""The example pipeline (examples/windowed_counts.py) against a real broker: exact window counts,
also when the query is stopped mid-stream and restarted from its checkpoint."""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from examples import windowed_counts
from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import confluent_produce, create_topic

pytestmark = pytest.mark.integration

START = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
TIMEOUT_S = 180


def _events(count: int, first_minute: int, minutes: int, seed: int) -> list[dict[str, object]]:
    """Events in event-time order, as a well-behaved producer sends them (the test adds malformed ones)."""
    rng = random.Random(seed)
    at = sorted(START + timedelta(minutes=first_minute, milliseconds=rng.randrange(minutes * 60_000))
                for _ in range(count))
    return [{"user": f"user-{rng.randrange(4)}", "event_time": t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
             "amount": rng.randrange(1, 50)} for t in at]


def _produce(kafka: BrokerProcess, topic: str, events: list[dict[str, object]]) -> None:
    confluent_produce(kafka.bootstrap, topic, [(str(e["user"]).encode(), json.dumps(e).encode()) for e in events])


def _expected(events: list[dict[str, object]]) -> dict[tuple[str, str], tuple[int, int]]:
    counts: Counter[tuple[str, str]] = Counter()
    amounts: Counter[tuple[str, str]] = Counter()
    for e in events:
        at = datetime.strptime(str(e["event_time"]), "%Y-%m-%dT%H:%M:%S.%fZ")
        key = (at.replace(second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ"), str(e["user"]))
        counts[key] += 1
        amounts[key] += int(e["amount"])  # type: ignore[arg-type]
    return {key: (counts[key], amounts[key]) for key in counts}


def test_window_counts_are_exact_across_a_stop_and_restart(spark: SparkSession, kafka: BrokerProcess, topic_name,
                                                          tmp_path: Path):
    source, target = topic_name("events"), topic_name("counts")
    create_topic(kafka.bootstrap, source, 3)
    create_topic(kafka.bootstrap, target, 1)
    early = _events(1500, first_minute=0, minutes=3, seed=1)
    late = _events(500, first_minute=3, minutes=2, seed=2)
    watermark_mover = {"user": "closer", "event_time": "2024-05-01T13:00:00Z", "amount": 0}
    checkpoint = str(tmp_path / "checkpoint")

    def start(available_now: bool):
        return windowed_counts.start(spark, bootstrap=kafka.bootstrap, input_topic=source, output_topic=target,
                                     checkpoint=checkpoint, window="1 minute", watermark="2 minutes",
                                     max_offsets_per_trigger=250, available_now=available_now,
                                     trigger_interval="200 milliseconds")

    _produce(kafka, source, early)
    confluent_produce(kafka.bootstrap, source, [(b"junk", b"not json"), (b"junk", b'{"user": null}')])
    first = start(available_now=False)
    try:
        wait_until(lambda: sum(1 for p in first.recentProgress if p["numInputRows"]) >= 2, timeout=TIMEOUT_S,
                   what="two micro-batches of the first run")
    finally:
        first.stop()
    assert first.exception() is None
    read_before_stop = sum(p["numInputRows"] for p in first.recentProgress)
    assert 0 < read_before_stop < len(early), "the first run was to stop mid-stream"

    _produce(kafka, source, late + [watermark_mover])
    second = start(available_now=True)
    try:
        assert second.awaitTermination(TIMEOUT_S), "the restarted query did not finish"
    finally:
        if second.isActive:
            second.stop()
    assert second.exception() is None

    rows = (spark.read.format("minikafka").option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("subscribe", target).load().selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v")
            .collect())
    results: dict[tuple[str, str], set[tuple[int, int]]] = defaultdict(set)
    for row in rows:
        value = json.loads(row.v)
        assert row.k == value["user"]
        assert value["window_end"] > value["window_start"]
        results[(value["window_start"], value["user"])].add((value["events"], value["amount"]))
    # The sink writes at least once: a window may come twice if a stop fell between writing and
    # committing a batch, but every copy must carry the same, exact count.
    assert {key: next(iter(found)) for key, found in results.items()} == _expected(early + late)
    assert all(len(found) == 1 for found in results.values()), results
