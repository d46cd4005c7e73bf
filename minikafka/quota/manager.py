"""Which client quota applies to a request, and how long the client is throttled for it.

``ClientQuotas`` holds every entity's quotas (loaded from the QuotaStore, updated on change
notifications) and, per quota key and per the tags of the entity that applies, a SampledRate.
A quota applies as Kafka's default quota callback finds it (KIP-55), most specific first:

1. /config/users/<user>/clients/<client-id>
2. /config/users/<user>/clients/<default>
3. /config/users/<user>
4. /config/users/<default>/clients/<client-id>
5. /config/users/<default>/clients/<default>
6. /config/users/<default>
7. /config/clients/<client-id>
8. /config/clients/<default>

each key on its own (a user's producer_byte_rate may come from 3 and its consumer_byte_rate from
7). The quota is shared by every connection the entity covers: a quota of user alice is the sum
of all of alice's clients, a default quota is each user's (or client id's) own.

A use above the quota is throttled as Kafka does it (KIP-219): the response says
throttle_time_ms = (rate - quota) / quota * window, the time it takes the rate to come back to
the quota, at most the whole window, and the connection is not read for that long
(server/connection.py), so a client that ignores the field is held back all the same.
request_percentage is the share of one request handler's time: 100 is one handler busy all the
time. Here that is the time a request's handler runs on the event loop, its waits left out."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from prometheus_client import Counter, Gauge

from minikafka.quota.entity import (
    CONSUMER_BYTE_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
)
from minikafka.quota.rate import SampledRate
from protocol import Request

QUOTA_LABELS = ["quota", "user", "client_id"]
QUOTA_USE = Gauge("minikafka_client_quota_use",
                  "Measured use of a client quota at its latest request: bytes per second (producer_byte_rate, "
                  "consumer_byte_rate) or percent of one request handler (request_percentage)", QUOTA_LABELS)
QUOTA_LIMIT = Gauge("minikafka_client_quota_limit", "The client quota that applies", QUOTA_LABELS)
THROTTLE_MS = Counter("minikafka_client_quota_throttle_ms",
                      "Milliseconds clients were throttled for going over a quota", QUOTA_LABELS)
# Requests whose handler time is not a client's: the controller's and followers' (Kafka's
# cluster actions), and what a client sends before it has a principal.
REQUEST_QUOTA_EXEMPT = frozenset({4, 5, 6, 7, 17, 18, 27, 36, 56, 67, 73})
INACTIVE_EXPIRY_MS = 3600 * 1000
EXPIRY_CHECK_MS = 60 * 1000
Tags = tuple[str, str]  # (user, client id) of the entity that applies, defaults resolved


def _candidates(user: str, client_id: str) -> list[tuple[QuotaEntity, Tags]]:
    both, user_only, client_only = (user, client_id), (user, ""), ("", client_id)
    return [(QuotaEntity(user, client_id), both), (QuotaEntity(user, DEFAULT), both),
            (QuotaEntity(user, None), user_only), (QuotaEntity(DEFAULT, client_id), both),
            (QuotaEntity(DEFAULT, DEFAULT), both), (QuotaEntity(DEFAULT, None), user_only),
            (QuotaEntity(None, client_id), client_only), (QuotaEntity(None, DEFAULT), client_only)]


class ClientQuotas:
    """The quotas in force on this broker and the rates measured against them. Event-loop
    thread only; the clock (milliseconds) is injected for tests."""

    def __init__(self, samples: int = 11, sample_ms: int = 1000,
                 clock: Callable[[], float] = lambda: time.monotonic() * 1000) -> None:
        self.samples = samples
        self.sample_ms = sample_ms
        self._clock = clock
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}
        self._keys_set: frozenset[str] = frozenset()
        self._rates: dict[tuple[str, Tags], SampledRate] = {}
        self._last_used: dict[tuple[str, Tags], float] = {}
        self._next_expiry = 0.0

    # ---- the quotas in force ---------------------------------------------------------------------
    def replace_all(self, quotas: dict[QuotaEntity, dict[str, float]]) -> None:
        self._quotas = {entity: dict(values) for entity, values in quotas.items() if values}
        self._keys_set = frozenset(key for values in self._quotas.values() for key in values)

    def set_entity(self, entity: QuotaEntity, values: dict[str, float]) -> None:
        quotas = dict(self._quotas)
        quotas[entity] = values
        self.replace_all(quotas)

    def entities(self) -> dict[QuotaEntity, dict[str, float]]:
        return {entity: dict(values) for entity, values in self._quotas.items()}

    @property
    def request_quotas_set(self) -> bool:
        return REQUEST_PERCENTAGE in self._keys_set

    def quota(self, key: str, user: str, client_id: str) -> tuple[float, Tags] | None:
        """The quota ``key`` of this user and client id, and the tags its rate is kept under."""
        if key not in self._keys_set:
            return None
        for entity, tags in _candidates(user, client_id):
            bound = self._quotas.get(entity, {}).get(key)
            if bound is not None:
                return bound, tags
        return None

    # ---- enforcement ---------------------------------------------------------------------------
    def record(self, key: str, user: str, client_id: str | None, value: float) -> int:
        """Record a use; the milliseconds to throttle the client for, 0 within its quota."""
        found = self.quota(key, user, client_id or "")
        if found is None:
            return 0
        bound, tags = found
        rate_key = (key, tags)
        rate = self._rates.get(rate_key)
        if rate is None:
            rate = self._rates[rate_key] = SampledRate(self.samples, self.sample_ms)
        now = self._clock()
        self._last_used[rate_key] = now
        if now >= self._next_expiry:
            self._expire(now)
        rate.record(value, now)
        measured = rate.rate(now)
        labels = (key, *tags)
        QUOTA_USE.labels(*labels).set(measured)
        QUOTA_LIMIT.labels(*labels).set(bound)
        if measured <= bound:
            return 0
        throttle = min(round((measured - bound) / bound * rate.window_ms(now)), self.samples * self.sample_ms)
        THROTTLE_MS.labels(*labels).inc(throttle)
        return throttle

    def _expire(self, now: float) -> None:
        """Forget the rates (and their metrics) of clients idle for an hour, as Kafka expires its
        quota sensors: client ids come and go, and a default quota makes a rate for each."""
        self._next_expiry = now + EXPIRY_CHECK_MS
        for rate_key, used in list(self._last_used.items()):
            if now - used >= INACTIVE_EXPIRY_MS:
                del self._last_used[rate_key], self._rates[rate_key]
                labels = (rate_key[0], *rate_key[1])
                for metric in (QUOTA_USE, QUOTA_LIMIT, THROTTLE_MS):
                    try:
                        metric.remove(*labels)
                    except KeyError:  # a rate that was never over its quota has no throttle series
                        pass

    def produced(self, user: str, request: Request) -> int:
        """A Produce request of ``request.size`` bytes: the throttle of producer_byte_rate."""
        return self.record(PRODUCER_BYTE_RATE, user, request.header.client_id, request.size)

    def fetched(self, user: str, request: Request, size: int) -> int:
        """A consumer's Fetch that returns ``size`` bytes of records: the throttle of
        consumer_byte_rate (a follower's fetch is replication, under its own throttles)."""
        return self.record(CONSUMER_BYTE_RATE, user, request.header.client_id, size)

    async def timed(self, handling: Awaitable[Any], user: str, request: Request) -> Any:
        """Run a handler, record the time it ran against request_percentage, and throttle its
        response (the larger of this and a byte-rate throttle the handler set)."""
        timer = _HandlerTime(handling)
        body = await timer
        throttle = self.record(REQUEST_PERCENTAGE, user, request.header.client_id, timer.seconds * 100)
        if throttle and isinstance(body, dict) and "throttle_time_ms" in body:
            body["throttle_time_ms"] = max(body["throttle_time_ms"], throttle)
        return body


class _HandlerTime(Awaitable[Any]):
    """Awaits a coroutine and adds up the time it runs between its waits."""

    def __init__(self, coroutine: Awaitable[Any]) -> None:
        self._coroutine = coroutine
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self._coroutine.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                waiting_on = steps.throw(thrown) if thrown is not None else steps.send(sent)
            except StopIteration as done:
                self.seconds += time.perf_counter() - started
                return done.value
            except BaseException:
                self.seconds += time.perf_counter() - started
                raise
            self.seconds += time.perf_counter() - started
            try:
                sent, thrown = (yield waiting_on), None
            except BaseException as exc:  # a cancellation, passed on to the handler
                sent, thrown = None, exc
