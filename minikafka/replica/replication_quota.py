"""Replication throttles (KIP-73): the byte rate that throttled replicas may replicate at.

Two throttles per broker, one per direction: the leader's (bytes it returns to followers' fetches,
``leader.replication.throttled.rate``) and the follower's (bytes its fetchers take from leaders,
``follower.replication.throttled.rate``). Which replicas each covers is a topic config
(``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``:
``partition:broker,...`` or ``*``); an entry counts on the broker it names.

A throttled replica that is in sync is never held back (its bytes still count), so a throttle
never slows acks=all or the high watermark: only replicas that are catching up wait, as in Kafka.
Client produce and fetch are neither counted nor delayed.

Event-loop thread only; time comes from the injected clock (seconds, monotonic).
"""

from __future__ import annotations

import enum
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from prometheus_client import Counter, Gauge

log = logging.getLogger(__name__)

UNLIMITED_RATE = 2**63 - 1
# Bytes a quota may lend ahead of time after an idle spell, in seconds of its rate: small, so the
# rate holds over short spans; any single transfer may still exceed it (it then runs into debt).
BURST_SECONDS = 0.2
# The longest a held-back fetch waits before looking again, so a raised rate applies at once.
RECHECK_SECONDS = 0.1

LEADER_KEY = "leader.replication.throttled.replicas"
FOLLOWER_KEY = "follower.replication.throttled.replicas"

THROTTLED_BYTES = Counter(
    "minikafka_replication_throttled_bytes",
    "Bytes of throttled replicas replicated, per direction (leader: returned to followers; follower: fetched)",
    ["direction"])
THROTTLE_RATE = Gauge("minikafka_replication_throttled_rate_bytes_per_second",
                      "The replication throttle of this broker, per direction (9.2e18: unlimited)", ["direction"])
HELD_BACK = Counter("minikafka_replication_throttled_holds",
                    "Partitions left out of a replication fetch because the throttle was exceeded, per direction",
                    ["direction"])
REPLICATION_BYTES_IN = Counter("kafka_server_BrokerTopicMetrics_ReplicationBytesIn",
                               "Bytes this broker fetched as follower from leaders")
REPLICATION_BYTES_OUT = Counter("kafka_server_BrokerTopicMetrics_ReplicationBytesOut",
                                "Bytes this broker returned as leader to followers' fetches")


class Direction(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(frozen=True)
class ThrottledReplicas:
    """The value of one topic's ``*.replication.throttled.replicas``: every replica, or the
    (partition, broker) pairs named."""

    every_replica: bool = False
    pairs: frozenset[tuple[int, int]] = frozenset()

    def covers(self, partition: int, broker: int) -> bool:
        return self.every_replica or (partition, broker) in self.pairs

    def __str__(self) -> str:
        if self.every_replica:
            return "*"
        return ",".join(f"{p}:{b}" for p, b in sorted(self.pairs))


NO_REPLICAS = ThrottledReplicas()
_PAIR = re.compile(r"([0-9]+)\s*:\s*([0-9]+)")


def parse_throttled_replicas(text: str) -> ThrottledReplicas:
    """``*`` or ``partition:broker,...`` (spaces allowed, empty items skipped); a ValueError names
    the item that is neither."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if items == ["*"]:
        return ThrottledReplicas(every_replica=True)
    pairs = set()
    for item in items:
        if item == "*":
            raise ValueError("'*' must be the whole value, not one item of a list")
        match = _PAIR.fullmatch(item)
        if match is None:
            raise ValueError(f"{item!r} is not partition:broker (expected * or partition:broker,partition:broker,...)")
        pairs.add((int(match.group(1)), int(match.group(2))))
    return ThrottledReplicas(pairs=frozenset(pairs))


class ReplicationQuota:
    """The arithmetic of one throttle: a token bucket of bytes refilled at ``rate`` per second,
    holding at most ``BURST_SECONDS`` of it.

    A transfer is never split: ``record`` takes its whole size, and may leave the bucket in debt;
    the quota is exceeded until that debt is repaid. So however large each fetch is, when
    transfers start only while the quota is not exceeded, the bytes recorded over any span of T
    seconds stay under ``rate * T + burst + one transfer``.
    """

    def __init__(self, bytes_per_second: int, clock: Callable[[], float] = time.monotonic) -> None:
        if bytes_per_second < 0:
            raise ValueError("a replication throttle cannot be negative")
        self._clock = clock
        self.rate = bytes_per_second
        self._tokens = float(self._burst())
        self._updated = clock()

    @property
    def unlimited(self) -> bool:
        return self.rate >= UNLIMITED_RATE

    def _burst(self) -> float:
        return self.rate * BURST_SECONDS

    def _refill(self) -> float:
        now = self._clock()
        self._tokens = min(self._burst(), self._tokens + (now - self._updated) * self.rate)
        self._updated = now
        return self._tokens

    def set_rate(self, bytes_per_second: int) -> None:
        """Change the rate; a debt run up at the old rate is forgiven, so a raised rate applies at once."""
        if bytes_per_second < 0:
            raise ValueError("a replication throttle cannot be negative")
        self._refill()
        self.rate = bytes_per_second
        self._tokens = min(max(self._tokens, 0.0), self._burst())

    def exceeded(self) -> bool:
        return not self.unlimited and self._refill() < 0

    def record(self, nbytes: int) -> None:
        if self.unlimited or nbytes <= 0:
            return
        self._refill()
        self._tokens -= nbytes

    def delay(self) -> float:
        """Seconds until the quota is no longer exceeded (0 if it is not; inf at rate 0)."""
        tokens = self._refill()
        if self.unlimited or tokens >= 0:
            return 0.0
        if self.rate == 0:
            return float("inf")
        return -tokens / self.rate


class ReplicationThrottle:
    """One direction's throttle on this broker: its quota, and which replicas it covers (the
    entries of each topic's list that name this broker)."""

    def __init__(self, direction: Direction, broker_id: int, bytes_per_second: int = UNLIMITED_RATE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.direction = direction
        self.broker_id = broker_id
        self.quota = ReplicationQuota(bytes_per_second, clock)
        self._replicas: dict[str, ThrottledReplicas] = {}
        self._throttled_bytes = THROTTLED_BYTES.labels(direction.value)
        self._holds = HELD_BACK.labels(direction.value)
        THROTTLE_RATE.labels(direction.value).set(bytes_per_second)

    def set_rate(self, bytes_per_second: int) -> None:
        self.quota.set_rate(bytes_per_second)
        THROTTLE_RATE.labels(self.direction.value).set(bytes_per_second)

    def set_replicas(self, topic: str, replicas: ThrottledReplicas) -> None:
        if replicas == NO_REPLICAS:
            self._replicas.pop(topic, None)
        else:
            self._replicas[topic] = replicas

    def replicas(self, topic: str) -> ThrottledReplicas:
        return self._replicas.get(topic, NO_REPLICAS)

    def covers(self, topic: str, partition: int) -> bool:
        replicas = self._replicas.get(topic)
        return replicas is not None and replicas.covers(partition, self.broker_id)

    def holds_back(self, topic: str, partition: int, in_sync: bool) -> bool:
        """Whether this replica's next bytes must wait: it is throttled, catching up, and the
        quota is spent."""
        held = not in_sync and self.covers(topic, partition) and self.quota.exceeded()
        if held:
            self._holds.inc()
        return held

    def record(self, topic: str, partition: int, nbytes: int) -> None:
        if nbytes > 0 and self.covers(topic, partition):
            self.quota.record(nbytes)
            self._throttled_bytes.inc(nbytes)

    def wait_seconds(self) -> float:
        """How long a fetch that held replicas back should wait before looking again."""
        return min(self.quota.delay(), RECHECK_SECONDS)


class ReplicationThrottles:
    """This broker's two replication throttles, and the topic configs that say what they cover."""

    def __init__(self, broker_id: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.leader = ReplicationThrottle(Direction.LEADER, broker_id, clock=clock)
        self.follower = ReplicationThrottle(Direction.FOLLOWER, broker_id, clock=clock)

    def update_topic(self, topic: str, configs: Mapping[str, str]) -> None:
        """Take a topic's configs; a key left out throttles none of its replicas."""
        for throttle, key in ((self.leader, LEADER_KEY), (self.follower, FOLLOWER_KEY)):
            try:
                replicas = parse_throttled_replicas(configs.get(key, ""))
            except ValueError as exc:  # written to the metadata store by something that did not validate it
                log.error("topic %s: %s=%r ignored: %s", topic, key, configs[key], exc)
                replicas = NO_REPLICAS
            if replicas != throttle.replicas(topic):
                log.info("topic %s: %s throttle now covers %s", topic, throttle.direction.value,
                         replicas if replicas != NO_REPLICAS else "none of its replicas")
            throttle.set_replicas(topic, replicas)

    def forget_topic(self, topic: str) -> None:
        self.leader.set_replicas(topic, NO_REPLICAS)
        self.follower.set_replicas(topic, NO_REPLICAS)
