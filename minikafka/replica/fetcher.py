"""Follower replication: fetch from each partition's leader and append as follower.

``ReplicaFetcherManager`` owns one ``LeaderFetcher`` task per leader broker (more when
num.replica.fetchers asks for it; a partition always goes to the same one). A partition is
added when LeaderAndIsr makes this broker its follower and removed when it leads, stops or
goes offline. Before a partition's first fetch from a new leader its log is truncated to what
that leader has (OffsetForLeaderEpoch, KIP-101/KIP-279), so a tail the old leader wrote and
nobody else received is dropped, never served. The leader serves these fetches from its
segment files with sendfile, like any fetch. A response is read into the connection's one
buffer, parsed in place, and each partition's batches are written to its log from there; while
a follower is far behind (every new end below the leader's high watermark) the next Fetch goes
out before those writes, so that the leader sends while this broker writes (``may_fetch_ahead``).
A partition its leader answers with an error for sits out a while on its own, briefly when that
leader has only not yet heard of its leadership (``_Followed.failed``); the others go on.
Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from minikafka.net.client import BrokerClient, BrokerUnreachable
from minikafka.replica.partition import Partition
from minikafka.replica.replica_manager import ReplicaManager, TopicPartition
from minikafka.replica.replication_quota import REPLICATION_BYTES_IN
from minikafka.security.client import PLAINTEXT_CLIENT, ClientSecurity
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.log import ZERO_UUID
from protocol import MalformedResponse
from protocol.errors import ErrorCode
from protocol.fetch_view import FetchedPartition, parse_fetch_response
from protocol.records import CorruptRecordError, UnsupportedMagic, whole_batches

log = logging.getLogger(__name__)

FETCH = 1
OFFSET_FOR_LEADER_EPOCH = 23
# The versions of inter.broker.protocol.version (config/inter_broker_protocol.py) are given in
# FetcherConfig. Fetch v12 is the oldest this follower reads (the first flexible one), and the one
# it falls back to, as Kafka's does, while some partition's topic id is not known (v13 on names
# topics by id).
FETCH_VERSION_BY_NAME = 12
FETCH_TOPIC_IDS_FROM = 13
FETCH_REPLICA_STATE_FROM = 15  # the follower's id and broker epoch move into ReplicaState (KIP-903)
# Room in the receive buffer beyond replica.fetch.response.max.bytes for the response's own
# fields; a larger response (one batch over the limit) grows the buffer.
RESPONSE_OVERHEAD = 64 * 1024
# A leader that answers as if it did not lead the partition yet (its LeaderAndIsr is still on its
# way; the controller sends them to every broker at once) is asked again after this, doubling up
# to replica.fetch.backoff.ms. Waiting the whole backoff, as Kafka's follower does, held every
# acks=all produce to the partition for that second in a rolling restart.
LEADER_BEHIND_RETRY_S = 0.01
# Partition errors of a leader that has not yet heard of the leadership this follower has.
LEADER_BEHIND = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID})


@dataclass(frozen=True)
class FetcherConfig:
    broker_id: int
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    partition_max_bytes: int = 1048576  # replica.fetch.max.bytes
    response_max_bytes: int = 10485760  # replica.fetch.response.max.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    fetchers_per_leader: int = 1  # num.replica.fetchers
    request_timeout_ms: int = 30000
    security: ClientSecurity = PLAINTEXT_CLIENT  # the inter-broker listener's TLS and SASL
    fetch_version: int = 17  # inter.broker.protocol.version's (3.9-IV0: 17)
    offset_for_leader_epoch_version: int = 4
    # This broker's epoch (its registration's), which Fetch v15 on tells the leader (KIP-903).
    broker_epoch: Callable[[], int] = lambda: -1


@dataclass
class _Followed:
    partition: Partition
    leader_epoch: int
    truncated: bool = False  # set once the log matches the leader's history
    # Whether the last fetch brought the log up to the leader's high watermark: a throttled
    # replica that is caught up is not held back (KIP-73).
    in_sync: bool = False
    # After an error the partition sits out the fetches until this time (time.monotonic()); the
    # fetcher's other partitions go on.
    retry_at: float = 0.0
    failures: int = 0  # errors in a row

    def ready(self, now: float) -> bool:
        return self.retry_at <= now

    def failed(self, error: ErrorCode, backoff_s: float, now: float) -> None:
        """Sit out until the leader may answer otherwise: soon when it is only behind this
        follower's news, replica.fetch.backoff.ms otherwise."""
        delay = min(LEADER_BEHIND_RETRY_S * 2 ** self.failures, backoff_s) if error in LEADER_BEHIND else backoff_s
        self.failures += 1
        self.retry_at = now + delay

    def answered(self) -> None:
        self.failures = 0
        self.retry_at = 0.0


def may_fetch_ahead(new_ends: list[tuple[int, int]]) -> bool:
    """Whether the next Fetch may go out before the records of this response are written, with
    the log ends those writes will reach as its fetch offsets: ``new_ends`` holds, for each
    partition that brought records, (that end, the high watermark the leader reported).

    The leader takes a fetch offset as what the follower holds. One below the high watermark can
    neither move the high watermark (it only moves up, to the smallest fetch offset of the ISR)
    nor bring the follower into the ISR (that needs the high watermark), so nothing is
    acknowledged on the word of writes not made yet, even if this broker dies before them. So
    a follower catching up has the leader send while it writes, instead of both taking turns;
    near the high watermark the next Fetch waits for the writes, as in Kafka.
    """
    return bool(new_ends) and all(end < high_watermark for end, high_watermark in new_ends)


@dataclass(frozen=True)
class _SentFetch:
    """A Fetch on its way: the offset it asked each partition from, and how long to wait."""

    correlation_id: int
    offsets: dict[TopicPartition, int]
    timeout_s: float
    version: int
    names: dict[uuid.UUID, str]  # the topics by id, for the answer of v13 on


@dataclass
class LeaderFetcher:
    """Fetches every partition this broker follows from one leader, one request in flight at a time."""

    leader_id: int
    endpoint: Callable[[], tuple[str, int] | None]
    replica_manager: ReplicaManager
    config: FetcherConfig
    partitions: dict[TopicPartition, _Followed] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    fetched_bytes: int = 0
    stopped: bool = False
    _in_flight: _SentFetch | None = None

    async def run(self) -> None:
        client: BrokerClient | None = None
        failing = False
        try:
            while not self.stopped:
                if not self.partitions:
                    self.changed.clear()
                    await self.changed.wait()
                    continue
                address = self.endpoint()
                if address is None:
                    await self._pause()
                    continue
                if client is None or (client.host, client.port) != address:
                    if client is not None:
                        client.close()
                    client = BrokerClient(*address, client_id=f"replica-fetcher-{self.config.broker_id}",
                                          receive_buffer_bytes=self.config.response_max_bytes + RESPONSE_OVERHEAD,
                                          security=self.config.security)
                    self._in_flight = None
                try:
                    # A Fetch sent ahead is answered first: answers come in request order.
                    if self._in_flight is not None or not await self._truncate(client):
                        await self._fetch(client)
                    if failing:
                        log.info("fetching from broker %d again", self.leader_id)
                        failing = False
                except BrokerUnreachable as exc:
                    self._in_flight = None  # its connection is closed
                    if not failing:  # once per outage, not once per retry
                        log.warning("cannot fetch from broker %d: %s; retrying every %d ms until it answers or "
                                    "another broker leads", self.leader_id, exc, self.config.backoff_ms)
                        failing = True
                    await self._pause()
        finally:
            if client is not None:
                client.close()

    async def _pause(self, seconds: float | None = None) -> None:
        """Wait replica.fetch.backoff.ms (or ``seconds``), less if the followed partitions change."""
        self.changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.config.backoff_ms / 1000 if seconds is None else seconds):
                await self.changed.wait()

    def _until_one_ready(self, now: float) -> float | None:
        """Seconds until the first partition sitting out after an error may be asked again;
        None when none is sitting out."""
        waiting = [f.retry_at for f in self.partitions.values() if not f.ready(now)]
        return max(min(waiting) - now, 0.0) if waiting else None

    async def _truncate(self, client: BrokerClient) -> bool:
        """Truncate every newly followed partition to the leader's history; True if any was
        asked for (so the loop comes back here before fetching it)."""
        now = time.monotonic()
        pending = {tp: f for tp, f in self.partitions.items() if not f.truncated and f.ready(now)}
        if not pending:
            return False
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), followed in pending.items():
            latest = followed.partition.log.latest_epoch
            by_topic.setdefault(topic, []).append({
                "partition": index, "current_leader_epoch": followed.leader_epoch,
                "leader_epoch": latest if latest is not None else -1})
        response = await client.request(OFFSET_FOR_LEADER_EPOCH, self.config.offset_for_leader_epoch_version, {
            "replica_id": self.config.broker_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
        }, self.config.request_timeout_ms / 1000)
        self._epoch_ends_answered(response, time.monotonic())
        return True

    def _epoch_ends_answered(self, response: Any, now: float) -> None:
        """Truncate each partition the OffsetForLeaderEpoch ``response`` answers for; one the
        leader cannot answer for yet sits out a while (``_Followed.failed``), the others go on."""
        for topic in response.topics:
            for answer in topic.partitions:
                pending_one = self.partitions.get((topic.topic, answer.partition))
                if pending_one is None or pending_one.truncated:
                    continue
                if answer.error_code != ErrorCode.NONE:
                    error = ErrorCode(answer.error_code)
                    if pending_one.failures == 0:  # once per wait, not once per retry
                        log.info("%s-%d: leader %d cannot tell its epoch end offsets yet (%s); asking again",
                                 topic.topic, answer.partition, self.leader_id, error.name)
                    pending_one.failed(error, self.config.backoff_ms / 1000, now)
                    continue
                pending_one.answered()
                self._truncate_one(pending_one, answer.leader_epoch, answer.end_offset)

    def _truncate_one(self, followed: _Followed, leader_epoch: int, leader_end: int) -> None:
        partition = followed.partition
        log_ = partition.log
        end = log_.log_end_offset
        if leader_epoch < 0 or leader_end < 0:
            # The leader knows no epoch at or below ours: keep only what was committed.
            target = min(log_.high_watermark, end)
        else:
            own_end = log_.end_offset_for_epoch(leader_epoch)[1]
            target = min(leader_end, own_end if own_end >= 0 else end, end)
        if target < end:
            log.warning("%s-%d: truncating from offset %d to %d, where this replica's history diverges from "
                        "leader %d's (records the old leader wrote and no other replica received)",
                        partition.topic, partition.index, end, target, self.leader_id)
            log_.truncate_to(target)
        followed.truncated = True

    def _send_fetch(self, client: BrokerClient, claimed: Mapping[TopicPartition, int] | None = None
                    ) -> _SentFetch | None:
        """Send a Fetch of every followed partition from its log end (or from ``claimed``, the
        end its log will have once the appends under way are done). None when every partition
        sits this fetch out (a spent follower throttle)."""
        throttle = self.replica_manager.replication_throttles.follower
        by_topic: dict[str, list[dict[str, Any]]] = {}
        offsets: dict[TopicPartition, int] = {}
        held_back = False
        now = time.monotonic()
        sitting_out_until = math.inf  # the first time a partition sitting out after an error may ask again
        for key, followed in self.partitions.items():
            if not followed.ready(now):
                sitting_out_until = min(sitting_out_until, followed.retry_at)
                continue
            if not followed.truncated:
                continue
            # Throttled replicas that are catching up sit this fetch out while the throttle is
            # spent; the others of this leader are fetched as usual.
            if throttle.holds_back(key[0], key[1], followed.in_sync):
                held_back = True
                continue
            log_ = followed.partition.log
            offset = offsets[key] = (claimed or {}).get(key, log_.log_end_offset)
            by_topic.setdefault(key[0], []).append({
                "partition": key[1], "current_leader_epoch": followed.leader_epoch,
                "fetch_offset": offset, "log_start_offset": log_.log_start_offset,
                "partition_max_bytes": self.config.partition_max_bytes})
        if not by_topic:
            return None
        max_wait_ms = self.config.fetch_max_wait_ms
        if held_back:
            # Come back for the held-back replicas as soon as the throttle has room again.
            max_wait_ms = min(max_wait_ms, int(throttle.wait_seconds() * 1000))
        if sitting_out_until < math.inf:  # and for those sitting out after an error, once they may ask again
            max_wait_ms = min(max_wait_ms, int((sitting_out_until - now) * 1000))
        ids = {followed.partition.topic: followed.partition.topic_id for followed in self.partitions.values()}
        version = self.config.fetch_version
        if version >= FETCH_TOPIC_IDS_FROM and any(ids.get(topic, ZERO_UUID) == ZERO_UUID for topic in by_topic):
            version = FETCH_VERSION_BY_NAME
        correlation_id = client.send(FETCH, version, {
            "replica_id": self.config.broker_id,
            "replica_state": {"replica_id": self.config.broker_id, "replica_epoch": self.config.broker_epoch()},
            "max_wait_ms": max_wait_ms,
            "min_bytes": self.config.fetch_min_bytes,
            "max_bytes": self.config.response_max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "topic_id": ids[t], "partitions": ps} for t, ps in by_topic.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        })
        return _SentFetch(correlation_id, offsets, (self.config.request_timeout_ms + max_wait_ms) / 1000, version,
                          {ids[t]: t for t in by_topic})

    async def _fetch(self, client: BrokerClient) -> None:
        """Receive the answer to the Fetch in flight (sending one first if none is) and store
        it; the next Fetch may go out before the records are written (``may_fetch_ahead``)."""
        sent, self._in_flight = self._in_flight, None
        if sent is None:
            await client.connect()
            sent = self._send_fetch(client)
            if sent is None:  # every partition waits: sitting out after an error, or held back by the throttle
                now = time.monotonic()
                waits = [self._until_one_ready(now)]
                if any(f.ready(now) for f in self.partitions.values()):
                    waits.append(self.replica_manager.replication_throttles.follower.wait_seconds())
                await self._pause(min((w for w in waits if w is not None), default=None))
                return
        payload = await client.receive(sent.correlation_id, sent.timeout_s)
        try:
            backoff = self._store(client, sent, payload)
        finally:
            client.release()
        if backoff:
            await self._pause()

    def _store(self, client: BrokerClient, sent: _SentFetch, payload: memoryview) -> bool:
        """Append what the Fetch response brought; True when the whole fetcher should back off
        (the response failed as a whole: a partition that failed sits out on its own)."""
        try:
            response = parse_fetch_response(payload, sent.version)
        except MalformedResponse as exc:
            client.close()  # as for any other bad answer: the next request starts a new connection
            raise BrokerUnreachable(f"broker {self.leader_id} sent an unreadable Fetch response: {exc}") from exc
        backoff = response.error_code != ErrorCode.NONE
        appends: list[tuple[_Followed, FetchedPartition, memoryview]] = []
        claimed: dict[TopicPartition, int] = {}
        below_high_watermark: list[tuple[int, int]] = []
        for answer in response.partitions:
            topic = answer.topic if answer.topic_id is None else sent.names.get(answer.topic_id)
            key = (topic or "", answer.partition)
            followed = self.partitions.get(key)
            # The partition may have changed hands, or its log been truncated, while the request
            # was out: what came for the old position is dropped and fetched again.
            if (followed is None or not followed.truncated or self.replica_manager.get_partition(*key) is None
                    or followed.partition.log.log_end_offset != sent.offsets.get(key)):
                continue
            if answer.error_code != ErrorCode.NONE:
                self._fetch_failed(followed, answer)
                continue
            records, end = whole_batches(answer.records or memoryview(b""))
            appends.append((followed, answer, records))
            if end is not None:
                claimed[key] = end
                below_high_watermark.append((end, answer.high_watermark))
        # Not ahead of a new SASL login either: it needs the connection without a request in flight.
        if not backoff and not self.stopped and not client.login_due and may_fetch_ahead(below_high_watermark):
            self._in_flight = self._send_fetch(client, claimed)
        for followed, answer, records in appends:
            self._append(followed, answer, records)
        return backoff

    def _append(self, followed: _Followed, answer: FetchedPartition, records: memoryview) -> None:
        """Store one partition's fetched batches; one that cannot be stored sits out a while."""
        partition = followed.partition
        high_watermark = partition.log.high_watermark
        try:
            if records:
                # The batches' CRCs are checked once, here, as Kafka's follower does
                # (analyzeAndValidateRecords): a batch corrupted in the leader's memory or on the
                # way would otherwise become part of every replica.
                partition.append_as_follower(records, answer.high_watermark)
                self.fetched_bytes += len(records)
                REPLICATION_BYTES_IN.inc(len(records))
                self.replica_manager.replication_throttles.follower.record(
                    partition.topic, partition.index, len(records))
            else:
                partition.follow_high_watermark(answer.high_watermark)
            followed.in_sync = partition.log.log_end_offset >= answer.high_watermark
            if partition.log.high_watermark != high_watermark:
                self.replica_manager.follower_high_watermark_moved(partition)
            followed.answered()
        except KafkaStorageError as exc:
            log.error("%s-%d: cannot store replicated records: %s", partition.topic, partition.index, exc)
            followed.failed(ErrorCode.KAFKA_STORAGE_ERROR, self.config.backoff_ms / 1000, time.monotonic())
        except (CorruptRecordError, UnsupportedMagic) as exc:
            log.error("%s-%d: leader %d sent records that cannot be appended (%s); truncating again",
                      partition.topic, partition.index, self.leader_id, exc)
            followed.truncated = False
            followed.failed(ErrorCode.CORRUPT_MESSAGE, self.config.backoff_ms / 1000, time.monotonic())

    def _fetch_failed(self, followed: _Followed, answer: FetchedPartition) -> None:
        """React to a partition's Fetch error: it sits out a while (``_Followed.failed``)."""
        partition = followed.partition
        error = ErrorCode(answer.error_code)
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range(followed, answer)
            return
        if error in LEADER_BEHIND or error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR):
            # The leader has not yet heard of this follower's leadership news (LEADER_BEHIND), or
            # this follower not of the leader's: the controller's LeaderAndIsr settles it.
            log.debug("%s-%d: leader %d answered %s", partition.topic, partition.index, self.leader_id, error.name)
        else:
            log.warning("%s-%d: fetch from leader %d failed: %s", partition.topic, partition.index, self.leader_id,
                        error.name)
        followed.failed(error, self.config.backoff_ms / 1000, time.monotonic())

    def _out_of_range(self, followed: _Followed, answer: FetchedPartition) -> None:
        """Our log end is outside the leader's log: below its start (it deleted what we miss:
        start over from its start) or above its end (truncate again)."""
        log_ = followed.partition.log
        leader_start = answer.log_start_offset
        if 0 <= leader_start and log_.log_end_offset < leader_start:
            log.warning("%s-%d: the leader's log starts at %d, after this replica's end %d; starting over there",
                        log_.topic, log_.partition, leader_start, log_.log_end_offset)
            log_.truncate_fully_and_start_at(leader_start)
        else:
            followed.truncated = False


class ReplicaFetcherManager:
    """Which leader each followed partition is fetched from; one fetcher task per leader."""

    def __init__(self, replica_manager: ReplicaManager, endpoint_of: Callable[[int], tuple[str, int] | None],
                 config: FetcherConfig) -> None:
        self.replica_manager = replica_manager
        self.endpoint_of = endpoint_of
        self.config = config
        self._fetchers: dict[tuple[int, int], LeaderFetcher] = {}
        self._fetcher_of: dict[TopicPartition, LeaderFetcher] = {}
        self.leaving = False

    def leave(self) -> None:
        """The broker is shutting down: what it follows already it keeps fetching (it may still
        be in those ISRs, where acks=all waits for it), but it follows no new leader. A partition
        the controller's handover makes it a follower of would have it fetch, catch up and be
        added back to the ISR it was just taken out of; once the broker is gone, every acks=all
        produce there would wait replica.lag.time.max.ms for it."""
        self.leaving = True

    def follow(self, partition: Partition, leader_id: int, leader_epoch: int) -> None:
        """Fetch ``partition`` from ``leader_id`` (after truncating it to the leader's history);
        nothing, once the broker is leaving."""
        key = (partition.topic, partition.index)
        self.stop_following([key])
        if self.leaving:
            return
        slot = zlib.crc32(f"{key[0]}-{key[1]}".encode()) % max(self.config.fetchers_per_leader, 1)
        fetcher = self._fetchers.get((leader_id, slot))
        if fetcher is None:
            fetcher = LeaderFetcher(leader_id, lambda: self.endpoint_of(leader_id), self.replica_manager, self.config)
            fetcher.task = asyncio.get_running_loop().create_task(fetcher.run(), name=f"fetcher-{leader_id}-{slot}")
            self._fetchers[(leader_id, slot)] = fetcher
        fetcher.partitions[key] = _Followed(partition, leader_epoch)
        fetcher.changed.set()
        self._fetcher_of[key] = fetcher

    def stop_following(self, keys: list[TopicPartition]) -> None:
        for key in keys:
            fetcher = self._fetcher_of.pop(key, None)
            if fetcher is not None:
                fetcher.partitions.pop(key, None)
                fetcher.changed.set()

    def leader_of(self, key: TopicPartition) -> int | None:
        fetcher = self._fetcher_of.get(key)
        return fetcher.leader_id if fetcher is not None else None

    async def shutdown(self) -> None:
        tasks = [f.task for f in self._fetchers.values() if f.task is not None]
        for fetcher in self._fetchers.values():
            fetcher.stopped = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._fetchers.clear()
        self._fetcher_of.clear()
