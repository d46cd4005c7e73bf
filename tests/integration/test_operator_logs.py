"""A real broker's log under a client that keeps retrying a refused produce: the refusal is
logged once, not once per retry (the count follows a minute later, see
tests/unit/test_operator_logs.py)."""

from __future__ import annotations

import json

import confluent_kafka
import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import create_topic

pytestmark = pytest.mark.integration


def test_a_refused_produce_retried_for_seconds_is_logged_once(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "strict", 1, {"min.insync.replicas": "2"})  # more than its one replica
    produce_requests: list[int] = []

    def count_requests(stats: str) -> None:
        produce_requests.append(sum(b.get("req", {}).get("Produce", 0) for b in json.loads(stats)["brokers"].values()))

    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                                         "message.timeout.ms": 4000, "retry.backoff.ms": 50,
                                         "retry.backoff.max.ms": 50, "statistics.interval.ms": 200,
                                         "stats_cb": count_requests})
    failures: list[confluent_kafka.KafkaError] = []
    for i in range(5):
        producer.produce("strict", b"v%d" % i, on_delivery=lambda err, _: failures.append(err))
    assert producer.flush(30) == 0
    producer.poll(0.5)
    # librdkafka retries until the message times out, then reports the time-out (what users see).
    assert len(failures) == 5 and all(f is not None for f in failures), failures
    assert produce_requests and produce_requests[-1] >= 10, produce_requests  # refused again and again
    refusals = [line for line in broker.stderr_text().splitlines() if "refused: NOT_ENOUGH_REPLICAS" in line]
    assert len(refusals) == 1, refusals
    assert "produce to strict-0 refused: NOT_ENOUGH_REPLICAS" in refusals[0]
