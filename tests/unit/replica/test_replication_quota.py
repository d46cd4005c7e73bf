"""Replication throttles (KIP-73): the quota's arithmetic with time passed in, the parsing of the
throttled-replica lists and the broker keys, and the leader's side on a real ReplicaManager and
log dirs (no sockets): throttled replicas catching up are held back once the quota is spent,
everything else in the same fetch is served, consumers are never counted or delayed."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from minikafka.config.broker import DEFINITIONS, BrokerConfig, ConfigError, dynamic_keys
from minikafka.replica.replica_manager import FetchRequestPartition, ReplicaManager
from minikafka.replica.replication_quota import (
    BURST_SECONDS,
    UNLIMITED_RATE,
    Direction,
    ReplicationQuota,
    ReplicationThrottle,
    ReplicationThrottles,
    ThrottledReplicas,
    parse_throttled_replicas,
)
from minikafka.replica.topic_config import InvalidTopicConfig, validate_topic_configs
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import LogConfig
from minikafka.storage.log_manager import LogManager
from protocol.errors import ErrorCode
from tests.unit.storage.helpers import make_batch


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# ---- the quota ---------------------------------------------------------------------------------

def test_a_transfer_is_taken_whole_and_its_debt_repaid_at_the_rate() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(1000, clock)
    assert not quota.exceeded() and quota.delay() == 0
    quota.record(int(1000 * BURST_SECONDS))  # the burst: exactly spent, not exceeded
    assert not quota.exceeded()
    quota.record(500)
    assert quota.exceeded()
    assert quota.delay() == pytest.approx(0.5)
    clock.advance(0.25)
    assert quota.exceeded() and quota.delay() == pytest.approx(0.25)
    clock.advance(0.25)
    assert not quota.exceeded() and quota.delay() == 0


def test_idle_time_buys_no_more_than_the_burst() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(1000, clock)
    clock.advance(3600)
    quota.record(int(1000 * BURST_SECONDS) + 1)
    assert quota.exceeded(), "an hour of idling must not be saved up"


@pytest.mark.parametrize("chunk", [25_000, 64_000, 1_000_000, 8_000_000])
def test_the_long_run_rate_is_the_configured_one_whatever_the_transfer_size(chunk: int) -> None:
    clock = ManualClock()
    rate, span, step = 50_000_000, 20.0, 0.0005  # every chunk size here could go faster than the rate
    quota = ReplicationQuota(rate, clock)
    sent = 0
    started = clock.now
    while clock.now - started < span:
        if not quota.exceeded():
            quota.record(chunk)
            sent += chunk
        clock.advance(step)
    assert sent <= rate * span + rate * BURST_SECONDS + chunk
    assert sent >= rate * (span - step) - chunk


def test_a_new_rate_applies_at_once_and_forgives_the_old_debt() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(10, clock)
    quota.record(1_000_000)
    assert quota.delay() > 1000
    quota.set_rate(UNLIMITED_RATE)
    assert quota.unlimited and not quota.exceeded() and quota.delay() == 0
    quota.record(10**12)
    assert not quota.exceeded()
    quota.set_rate(1000)
    assert not quota.exceeded(), "nothing recorded while unlimited is owed afterwards"
    quota.set_rate(0)
    quota.record(1)
    assert quota.exceeded() and quota.delay() == float("inf")
    with pytest.raises(ValueError):
        quota.set_rate(-1)


# ---- which replicas ------------------------------------------------------------------------------

def test_throttled_replica_lists_parse_as_kafka_writes_them() -> None:
    assert parse_throttled_replicas("*") == ThrottledReplicas(every_replica=True)
    assert parse_throttled_replicas(" * ").covers(7, 42)
    parsed = parse_throttled_replicas("0:1, 1:2,0 : 3,")
    assert parsed.pairs == {(0, 1), (1, 2), (0, 3)}
    assert parsed.covers(1, 2) and not parsed.covers(1, 1) and not parsed.covers(2, 2)
    assert str(parsed) == "0:1,0:3,1:2"
    assert parse_throttled_replicas("") == ThrottledReplicas()


@pytest.mark.parametrize(("text", "item"), [
    ("0:1,0-2", "'0-2'"), ("0:1:2", "'0:1:2'"), ("a:1", "'a:1'"), ("0:", "'0:'"), ("-1:2", "'-1:2'"),
    ("0:1,*", "'*'"),
])
def test_a_malformed_list_is_refused_naming_the_key_and_the_item(text: str, item: str) -> None:
    with pytest.raises(ValueError, match=item):
        parse_throttled_replicas(text)
    for key in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas"):
        with pytest.raises(InvalidTopicConfig) as refused:
            validate_topic_configs({key: text})
        assert key in str(refused.value) and item in str(refused.value)
    assert validate_topic_configs({"leader.replication.throttled.replicas": " 0:1 ,1:2"}) == {
        "leader.replication.throttled.replicas": "0:1 ,1:2"}


def _metric(name: str, direction: str) -> float:
    return REGISTRY.get_sample_value(name, {"direction": direction}) or 0.0


def test_a_throttle_covers_the_entries_naming_its_broker_and_counts_only_them() -> None:
    clock = ManualClock()
    throttles = ReplicationThrottles(broker_id=2, clock=clock)
    throttles.update_topic("t", {"follower.replication.throttled.replicas": "0:2,1:3",
                                 "leader.replication.throttled.replicas": "*"})
    follower = throttles.follower
    assert follower.covers("t", 0) and not follower.covers("t", 1) and not follower.covers("u", 0)
    assert throttles.leader.covers("t", 5)
    follower.set_rate(100)
    before = _metric("minikafka_replication_throttled_bytes_total", "follower")
    follower.record("t", 1, 10_000)  # not covered: neither counted nor charged
    assert not follower.holds_back("t", 0, in_sync=False)
    follower.record("t", 0, 1_000)
    assert _metric("minikafka_replication_throttled_bytes_total", "follower") - before == 1_000
    assert follower.holds_back("t", 0, in_sync=False)
    assert not follower.holds_back("t", 0, in_sync=True), "an in-sync replica is never held back"
    assert not follower.holds_back("t", 1, in_sync=False)
    assert _metric("minikafka_replication_throttled_rate_bytes_per_second", "follower") == 100
    throttles.update_topic("t", {})  # the lists removed: nothing is throttled any more
    assert not follower.covers("t", 0) and not throttles.leader.covers("t", 0)
    throttles.update_topic("t", {"leader.replication.throttled.replicas": "bad"})  # unvalidated store: ignored
    assert not throttles.leader.covers("t", 0)


def test_the_rate_keys_are_dynamic_longs_unlimited_by_default() -> None:
    config = BrokerConfig({})
    for key in ("leader.replication.throttled.rate", "follower.replication.throttled.rate"):
        assert key in dynamic_keys()
        assert config[key] == DEFINITIONS[key].default == 2**63 - 1
        assert config.parse_dynamic({key: "5000000"}) == {key: 5_000_000}
        with pytest.raises(ConfigError, match=key):
            config.parse_dynamic({key: "-1"})
        with pytest.raises(ConfigError, match=key):
            config.parse_dynamic({key: "5MB"})
    seen: list[int] = []
    config.on_change("follower.replication.throttled.rate", lambda _key, rate: seen.append(rate))
    config.apply_dynamic({"follower.replication.throttled.rate": "1000"}, {})
    assert seen == [1000]


# ---- the leader's side ---------------------------------------------------------------------------

ME, CATCHING_UP, IN_SYNC = 1, 2, 3
BATCH_BYTES = len(make_batch(10, value_size=100))


@pytest.fixture
def leader(tmp_path: Path):
    dirs = [str(tmp_path / "d1")]
    manager = LogManager(dirs, ME, "cluster", LogConfig(), LogDirFailureChannel())
    manager.startup()
    replicas = ReplicaManager(ME, manager)
    clock = ManualClock()
    replicas.replication_throttles = ReplicationThrottles(ME, clock=clock)
    for index in (0, 1):
        replicas.become_leader("t", index, uuid.UUID(int=7), 0, LogConfig(), isr=(ME, IN_SYNC),
                               replicas=(ME, CATCHING_UP, IN_SYNC))
    replicas.replication_throttles.update_topic("t", {"leader.replication.throttled.replicas": f"0:{ME}"})
    replicas.replication_throttles.leader.set_rate(BATCH_BYTES)  # one batch a second
    yield replicas, clock
    manager.shutdown()


def _append(replicas: ReplicaManager, index: int) -> None:
    assert replicas.append("t", index, make_batch(10, value_size=100), 1_000).error == ErrorCode.NONE


async def _fetch(replicas: ReplicaManager, replica_id: int, offsets: tuple[int, int], max_wait_ms: int = 0):
    requests = [FetchRequestPartition("t", index, offset, 1 << 20, replica_id=replica_id)
                for index, offset in zip((0, 1), offsets, strict=True)]
    results = await replicas.fetch(requests, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20)
    sizes = [r.size for r in results]
    for r in results:
        if r.records is not None:
            r.records.close()
    return sizes, [r.held_back for r in results]


async def _in_sync_follower_catches_up(replicas: ReplicaManager) -> None:
    """The in-sync follower fetches at the log end, moving the high watermark there, so that the
    other follower (behind it) stays out of the ISR."""
    ends = tuple(replicas.get_partition("t", index).log.log_end_offset for index in (0, 1))
    assert await _fetch(replicas, IN_SYNC, ends) == ([0, 0], [False, False])


async def test_a_spent_leader_throttle_holds_back_only_throttled_replicas_catching_up(leader) -> None:
    replicas, clock = leader
    counted = _metric("minikafka_replication_throttled_bytes_total", "leader")
    for _ in range(3):
        _append(replicas, 0)
        _append(replicas, 1)
    await _in_sync_follower_catches_up(replicas)
    three = 3 * BATCH_BYTES
    # The quota is unspent: the first fetch takes all three batches (a debt of about two seconds).
    assert await _fetch(replicas, CATCHING_UP, (0, 0)) == ([three, three], [False, False])
    assert _metric("minikafka_replication_throttled_bytes_total", "leader") - counted == three
    _append(replicas, 0)
    _append(replicas, 1)
    await _in_sync_follower_catches_up(replicas)
    # An in-sync follower is not held back (its bytes count all the same).
    assert await _fetch(replicas, IN_SYNC, (30, 30)) == ([BATCH_BYTES, BATCH_BYTES], [False, False])
    # The throttled partition of the catching-up follower waits; the other one is served in full.
    assert await _fetch(replicas, CATCHING_UP, (30, 30)) == ([0, BATCH_BYTES], [True, False])
    # A consumer is neither held back nor counted.
    assert await _fetch(replicas, -1, (0, 0)) == ([4 * BATCH_BYTES] * 2, [False, False])
    assert _metric("minikafka_replication_throttled_bytes_total", "leader") - counted == three + BATCH_BYTES
    clock.advance(10.0)  # the debt is repaid
    assert await _fetch(replicas, CATCHING_UP, (30, 40)) == ([BATCH_BYTES, 0], [False, False])
    assert await _fetch(replicas, CATCHING_UP, (30, 40)) == ([0, 0], [True, False])
    replicas.replication_throttles.leader.set_rate(UNLIMITED_RATE)
    assert await _fetch(replicas, CATCHING_UP, (30, 40)) == ([BATCH_BYTES, 0], [False, False])


async def test_a_held_back_fetch_is_answered_once_the_throttle_has_room(leader) -> None:
    replicas, clock = leader
    for _ in range(3):
        _append(replicas, 0)
    await _in_sync_follower_catches_up(replicas)
    await _fetch(replicas, CATCHING_UP, (0, 0))
    _append(replicas, 0)
    await _in_sync_follower_catches_up(replicas)
    # Nothing new will be appended: only the throttle's recovery can end this wait early.
    poll = asyncio.ensure_future(_fetch(replicas, CATCHING_UP, (30, 0), max_wait_ms=60_000))
    await asyncio.sleep(0.3)
    assert not poll.done()
    clock.advance(10.0)
    assert await asyncio.wait_for(poll, timeout=10) == ([BATCH_BYTES, 0], [False, False])


def test_a_throttle_direction_has_its_own_metric_label() -> None:
    throttle = ReplicationThrottle(Direction.LEADER, 1, 123, clock=ManualClock())
    assert throttle.quota.rate == 123
    assert _metric("minikafka_replication_throttled_rate_bytes_per_second", "leader") == 123
