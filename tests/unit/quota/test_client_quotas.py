"""Client quotas without a broker: Kafka's precedence of quota entities, its sampled rate and
throttle time, entity paths as Kafka writes them, and the checks of an AlterClientQuotas entry."""

from __future__ import annotations

import pytest

from minikafka.quota.entity import DEFAULT, QuotaEntity, QuotaError, checked_value, entity_from_wire
from minikafka.quota.manager import ClientQuotas
from minikafka.quota.rate import SampledRate

RATE = "producer_byte_rate"


def test_the_most_specific_entity_applies_each_key_on_its_own() -> None:
    quotas = ClientQuotas()
    order = [QuotaEntity("alice", "app"), QuotaEntity("alice", DEFAULT), QuotaEntity("alice", None),
             QuotaEntity(DEFAULT, "app"), QuotaEntity(DEFAULT, DEFAULT), QuotaEntity(DEFAULT, None),
             QuotaEntity(None, "app"), QuotaEntity(None, DEFAULT)]
    quotas.replace_all({entity: {RATE: float(rank)} for rank, entity in enumerate(order)})
    expected_tags = [("alice", "app")] * 2 + [("alice", "")] + [("alice", "app")] * 2 + [("alice", "")] + [("", "app")] * 2
    for rank, tags in enumerate(expected_tags):
        assert quotas.quota(RATE, "alice", "app") == (float(rank), tags)
        quotas.set_entity(order[rank], {})  # the next one down applies
    assert quotas.quota(RATE, "alice", "app") is None
    quotas.replace_all({QuotaEntity("alice", None): {RATE: 1.0}, QuotaEntity(None, DEFAULT): {"consumer_byte_rate": 2.0}})
    assert quotas.quota("consumer_byte_rate", "alice", "app") == (2.0, ("", "app"))
    assert quotas.quota(RATE, "bob", "app") is None


def test_a_rate_is_taken_over_the_whole_window_until_it_has_one() -> None:
    rate = SampledRate(samples=3, sample_ms=1000)
    rate.record(2000, now_ms=0)
    assert rate.window_ms(0) == 2000 and rate.rate(0) == 1000  # a new client is measured over 2 samples
    rate.record(2000, now_ms=2500)
    assert rate.rate(2500) == 4000 / 2.5
    # The first sample is as old as the window: forgotten, and the rest is taken over 2 samples again.
    assert rate.rate(3000) == 2000 / 2.5


def test_the_throttle_brings_the_rate_back_to_the_quota() -> None:
    now = [0.0]
    quotas = ClientQuotas(samples=3, sample_ms=1000, clock=lambda: now[0])
    quotas.set_entity(QuotaEntity(None, "app"), {RATE: 1000.0})
    assert quotas.record(RATE, "u", "app", 1500) == 0  # 750 B/s over the 2 s window
    throttle = quotas.record(RATE, "u", "app", 1500)  # 1500 B/s: half again the quota
    assert throttle == 1000  # (1500 - 1000) / 1000 of the 2 s window
    assert quotas.record(RATE, "u", "other", 10**9) == 0  # another client id has no quota
    now[0] = 500.0
    assert quotas.record(RATE, "u", "app", 10**9) == 3000  # never longer than the whole window


@pytest.mark.parametrize("entity, path", [
    (QuotaEntity("alice", None), "users/alice"),
    (QuotaEntity(DEFAULT, None), "users/<default>"),
    (QuotaEntity(None, "my app"), "clients/my%20app"),
    (QuotaEntity("a/b", DEFAULT), "users/a%2Fb/clients/<default>"),
])
def test_entity_paths_are_kafkas(entity: QuotaEntity, path: str) -> None:
    assert entity.path == path and QuotaEntity.from_path(path) == entity


def test_alter_entries_are_checked_as_kafka_checks_them() -> None:
    assert entity_from_wire([("user", None), ("client-id", "app")]) == QuotaEntity(DEFAULT, "app")
    for bad in ([], [("user", "a"), ("user", "b")], [("group", "g")], [("ip", "1.2.3.4")]):
        with pytest.raises(QuotaError):
            entity_from_wire(bad)
    assert checked_value(RATE, 1048576.0) == "1048576" and checked_value("request_percentage", 50) == "50.0"
    for key, value in ((RATE, 1.5), (RATE, 0), ("fetch_rate", 1)):
        with pytest.raises(QuotaError):
            checked_value(key, value)


def test_the_rate_of_a_client_idle_for_an_hour_is_forgotten() -> None:
    now = [0.0]
    quotas = ClientQuotas(samples=3, sample_ms=1000, clock=lambda: now[0])
    quotas.set_entity(QuotaEntity(None, DEFAULT), {RATE: 1000.0})
    quotas.record(RATE, "u", "gone", 10)
    now[0] = 3600 * 1000.0
    quotas.record(RATE, "u", "active", 10)
    assert list(quotas._rates) == [(RATE, ("", "active"))]
