"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-546) on one embedded broker: AlterClientQuotas and
DescribeClientQuotas with their filters, Kafka's checks of bad entries, the quotas kept across a
restart; a producer held to its producer_byte_rate while an unquoted one is not throttled, and a
change of the quota at run time followed within seconds; a consumer over consumer_byte_rate and
a client over request_percentage told throttle_time_ms, and their connection not read meanwhile.

Rates are measured from the clients' own deliveries over several quota windows after the first
burst (a new client's rate is taken over the whole quota window, so its start is fast)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

from tests.integration.broker_process import BrokerProcess, KafkaWire, wait_until
from tests.integration.clients import (
    QuotaEntity,
    alter_client_quotas,
    confluent_produce,
    create_topic,
    describe_client_quotas,
)

pytestmark = pytest.mark.integration

MiB = 1 << 20
RECORD_SIZE = 16 * 1024
# The producers' run, and when the held one's quota changes.
WINDOW_S = 2
CHANGE_AT_S = 8
RUN_S = CHANGE_AT_S + 3 * WINDOW_S + 1
# Two samples of a second: a new producer's first burst is a second of its quota, and a changed
# quota holds within about two seconds. A producer held to its quota sends in a cycle of the
# window's length (what the window forgets, it may send again), so its rate is measured over
# whole windows.
QUOTA_BROKER = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
INVALID_REQUEST = 42
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("quotas"), overrides=QUOTA_BROKER)
    try:
        yield broker.start()
    finally:
        broker.close()


def alter(broker: BrokerProcess, entity: QuotaEntity, ops: dict[str, float | None],
          validate_only: bool = False) -> tuple[int, str | None]:
    return alter_client_quotas(broker.address, entity, ops, validate_only)


def describe(broker: BrokerProcess, components: list[tuple[str, int, str | None]],
             strict: bool = False) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    return describe_client_quotas(broker.address, components, strict)


def test_quotas_are_altered_described_by_filter_and_kept_across_a_restart(quota_broker: BrokerProcess) -> None:
    assert alter(quota_broker, {"user": "alice"}, {"producer_byte_rate": 1024, "consumer_byte_rate": 2048}) == (0, None)
    assert alter(quota_broker, {"user": "alice", "client-id": "app"}, {"request_percentage": 50.5}) == (0, None)
    assert alter(quota_broker, {"user": None}, {"producer_byte_rate": 4096}) == (0, None)  # the default user
    assert alter(quota_broker, {"client-id": "app"}, {"consumer_byte_rate": 8192}) == (0, None)
    assert alter(quota_broker, {"client-id": None, "user": None}, {"producer_byte_rate": 100}) == (0, None)
    alice, alice_app = (("user", "alice"),), (("client-id", "app"), ("user", "alice"))
    default_user, app = (("user", None),), (("client-id", "app"),)

    everything = describe(quota_broker, [])
    assert everything[alice] == {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
    assert everything[alice_app] == {"request_percentage": 50.5}
    assert set(everything) >= {alice, alice_app, default_user, app, (("client-id", None), ("user", None))}
    # A user filter finds the user's per-client quotas too, unless strict.
    assert set(describe(quota_broker, [("user", MATCH_EXACT, "alice")])) == {alice, alice_app}
    assert set(describe(quota_broker, [("user", MATCH_EXACT, "alice")], strict=True)) == {alice}
    assert set(describe(quota_broker, [("user", MATCH_DEFAULT, None)], strict=True)) == {default_user}
    assert set(describe(quota_broker, [("client-id", MATCH_ANY, None)], strict=True)) == {app}
    assert set(describe(quota_broker, [("user", MATCH_ANY, None), ("client-id", MATCH_EXACT, "app")])) == {alice_app}
    assert describe(quota_broker, [("ip", MATCH_ANY, None)]) == {}

    # Kafka's checks, each entry answered on its own; validate_only writes nothing.
    assert alter(quota_broker, {"user": "bob"}, {"producer_byte_rate": 10.5})[0] == INVALID_REQUEST
    code, message = alter(quota_broker, {"user": "bob"}, {"fetch_rate": 10})
    assert code == INVALID_REQUEST and "fetch_rate" in (message or "")
    assert alter(quota_broker, {}, {"producer_byte_rate": 10})[0] == INVALID_REQUEST
    assert alter(quota_broker, {"user": "bob"}, {"producer_byte_rate": 0})[0] == INVALID_REQUEST
    assert alter(quota_broker, {"user": "bob"}, {"producer_byte_rate": 10}, validate_only=True) == (0, None)
    assert describe(quota_broker, [("user", MATCH_EXACT, "bob")]) == {}

    # Removing a key leaves the others; removing the last one removes the entity.
    assert alter(quota_broker, {"user": "alice"}, {"consumer_byte_rate": None}) == (0, None)
    assert alter(quota_broker, {"client-id": None, "user": None}, {"producer_byte_rate": None}) == (0, None)
    quota_broker.restart()
    everything = describe(quota_broker, [])
    assert everything[alice] == {"producer_byte_rate": 1024.0}
    assert (("client-id", None), ("user", None)) not in everything
    for entity in ({"user": "alice"}, {"user": "alice", "client-id": "app"}, {"user": None}, {"client-id": "app"}):
        assert alter(quota_broker, entity, dict.fromkeys(
            ("producer_byte_rate", "consumer_byte_rate", "request_percentage"))) == (0, None)
    assert describe(quota_broker, []) == {}


def _throttle_max(statistics: str) -> list[int]:
    """The longest throttle time librdkafka saw from each broker, from its statistics JSON."""
    return [broker.get("throttle", {}).get("max", 0) for broker in json.loads(statistics).get("brokers", {}).values()]


class _Producer(threading.Thread):
    """Produces as fast as its client lets it, noting when each delivered record was acknowledged.
    A large local queue keeps the client supplied whenever its quota lets it send."""

    def __init__(self, bootstrap: str, topic: str, client_id: str, seconds: float, config: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1, "linger.ms": 1,
            "queue.buffering.max.kbytes": 8 * 1024, "statistics.interval.ms": 500, "stats_cb": self._stats,
            **config})
        self.topic, self.value, self.seconds = topic, bytes(RECORD_SIZE), seconds
        self.delivered: list[float] = []
        self.throttle_max_ms = 0
        self.errors: list[str] = []

    def _stats(self, text: str) -> None:
        self.throttle_max_ms = max([self.throttle_max_ms, *_throttle_max(text)])

    def _report(self, err: Any, _msg: Any) -> None:
        if err is not None:
            if err.code() != confluent_kafka.KafkaError._PURGE_QUEUE:
                self.errors.append(str(err))
        else:
            self.delivered.append(time.monotonic())

    def run(self) -> None:
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline:
            try:
                self.producer.produce(self.topic, self.value, on_delivery=self._report)
            except BufferError:
                self.producer.poll(0.01)
                continue
            self.producer.poll(0)
        # What is still queued at the end is dropped: a held producer would take seconds to send it.
        self.producer.purge(in_queue=True, in_flight=False)
        self.producer.flush(30)
        self.producer.close()

    def rate(self, start: float, end: float) -> float:
        """Bytes of records per second acknowledged between two monotonic times."""
        return sum(1 for t in self.delivered if start <= t < end) * len(self.value) / (end - start)


def test_a_producer_is_held_to_its_byte_rate_and_follows_a_change_at_run_time(quota_broker: BrokerProcess) -> None:
    create_topic(quota_broker.bootstrap, "quoted", 1)
    create_topic(quota_broker.bootstrap, "unquoted", 1)
    assert alter(quota_broker, {"client-id": "held"}, {"producer_byte_rate": 10 * MiB}) == (0, None)
    started = time.monotonic()
    # Requests of at most 512 KiB: the rate is then even over a few seconds (a quota holds over its
    # window; larger requests make it lumpier within the window). Five in flight, so that the
    # producer's own round trips, slow on a loaded machine, do not hold it under its quota.
    held = _Producer(quota_broker.bootstrap, "quoted", "held", RUN_S, {"batch.size": 512 * 1024,
                                                                        "max.in.flight.requests.per.connection": 5})
    free = _Producer(quota_broker.bootstrap, "unquoted", "free", RUN_S, {"batch.size": 1 << 20})
    held.start()
    free.start()
    wait_until(lambda: time.monotonic() > started + CHANGE_AT_S, CHANGE_AT_S + 5, interval=0.2,
               what="the first phase")
    changing = time.monotonic()
    assert alter(quota_broker, {"client-id": "held"}, {"producer_byte_rate": 4 * MiB}) == (0, None)
    changed = time.monotonic()
    held.join(30)
    free.join(30)
    assert not held.errors and not free.errors, (held.errors[:3], free.errors[:3])
    # Measured over whole windows: the first seconds hold the new client's burst (its rate is
    # taken over the whole window), and the first window after the change its throttle.
    first = held.rate(changing - 3 * WINDOW_S, changing)
    after = held.rate(changed + WINDOW_S, changed + 3 * WINDOW_S)
    unquoted = free.rate(started + 3, started + RUN_S)
    rates = f"held {first / MiB:.2f} then {after / MiB:.2f} MiB/s, unquoted {unquoted / MiB:.2f} MiB/s"
    print(rates, [round(held.rate(started + s, started + s + 1) / MiB, 1) for s in range(RUN_S)])  # pytest -rP
    # 20%: measured from the client's acknowledgements, which bunch up on a loaded machine (a full
    # run saw 11.95 MiB/s once); the unquoted producer beside it runs an order of magnitude faster.
    assert abs(first - 10 * MiB) <= 2 * MiB, rates
    # Within a window of the change the producer is held to its new quota: over these two windows
    # the rate follows it only roughly (a two-sample window lets a held client burst once a
    # window), so the check is that it left 10 MiB/s for about 4, not a tolerance of 10%.
    assert abs(after - 4 * MiB) <= 2 * MiB, rates
    # The other producer is never throttled: a quota is its client's alone.
    assert free.throttle_max_ms == 0 and held.throttle_max_ms > 0, rates
    metrics = quota_broker.metrics_text()
    assert 'minikafka_client_quota_limit{client_id="held",quota="producer_byte_rate",user=""} 4.194304e+06' \
        in metrics, rates
    assert 'client_id="free"' not in metrics


def test_consumer_and_request_quotas_throttle_and_mute_the_connection(quota_broker: BrokerProcess) -> None:
    topic = "fetched-under-quota"
    create_topic(quota_broker.bootstrap, topic, 1)
    confluent_produce(quota_broker.bootstrap, topic, [(None, bytes(100_000))] * 20, partition=0)
    assert alter(quota_broker, {"user": "ANONYMOUS", "client-id": "slow-reader"},
                 {"consumer_byte_rate": 200_000}) == (0, None)
    throttled: list[int] = []
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": quota_broker.bootstrap, "group.id": "quota-reader", "client.id": "slow-reader",
        "auto.offset.reset": "earliest", "fetch.max.bytes": 1 << 20, "statistics.interval.ms": 200,
        "stats_cb": lambda text: throttled.extend(_throttle_max(text))})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        wait_until(lambda: consumer.poll(0.1) is not None and any(throttled), 15,
                   what="the consumer told by a Fetch response to back off")
    finally:
        consumer.close()
    assert 'minikafka_client_quota_throttle_ms_total{client_id="slow-reader",quota="consumer_byte_rate",' \
           'user="ANONYMOUS"}' in quota_broker.metrics_text()

    # request_percentage: time in the handlers; a tiny share is spent by a few requests.
    assert alter(quota_broker, {"client-id": "busy"}, {"request_percentage": 0.001}) == (0, None)
    with KafkaWire(quota_broker.address, client_id="busy") as wire:
        throttle = 0
        for _ in range(50):
            throttle = wire.request(MetadataRequest(topics=None, allow_auto_topic_creation=False), 8,
                                    MetadataResponse).throttle_time_ms
            if throttle:
                break
        assert throttle > 0
        # The connection is not read until the throttle is over: the next answer comes after it.
        asked = time.monotonic()
        wire.request(ApiVersionsRequest(), 3, ApiVersionsResponse)
        assert time.monotonic() - asked >= throttle / 1000 * 0.9
    assert alter(quota_broker, {"client-id": "busy"}, {"request_percentage": None}) == (0, None)
