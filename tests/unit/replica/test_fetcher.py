"""The follower fetchers' rules, without sockets. When a follower may send its next Fetch before
writing what the last one brought: only when every new log end stays below the high watermark
the leader reported; checked against the rule itself and against the leader's side (a real
Partition on a real Log), where a fetch offset below the high watermark moves nothing, whether
the follower is in the ISR, out of it, or joining. And num.replica.fetchers: one leader's
partitions spread over that many fetchers, each partition always to the same one. And a
partition its leader cannot serve yet sits out on its own, briefly when the leader has only not
heard of its leadership yet, while the fetcher's other partitions go on."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from minikafka.net.client import BrokerClient
from minikafka.replica.fetcher import (
    FETCH,
    LEADER_BEHIND_RETRY_S,
    OFFSET_FOR_LEADER_EPOCH,
    FetcherConfig,
    LeaderFetcher,
    ReplicaFetcherManager,
    _Followed,
    _SentFetch,
    may_fetch_ahead,
)
from minikafka.replica.partition import IsrProposal, Partition
from minikafka.replica.replica_manager import ReplicaManager
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import LogConfig
from minikafka.storage.log_manager import LogManager
from protocol import decode_body, encode_body, encode_response_bytes
from protocol.errors import ErrorCode
from tests.unit.replica.helpers import leader_partition, recorded_proposals
from tests.unit.storage.helpers import make_batch

ME, IN_SYNC, CATCHING_UP = 1, 2, 3


def test_ahead_only_when_every_new_end_is_below_its_high_watermark() -> None:
    assert may_fetch_ahead([(100, 1000)])
    assert may_fetch_ahead([(100, 1000), (5, 6)])
    assert not may_fetch_ahead([(1000, 1000)]), "at the high watermark the fetch offset would move it"
    assert not may_fetch_ahead([(100, 1000), (7, 6)]), "one partition near its high watermark holds all back"
    assert not may_fetch_ahead([]), "nothing to write: nothing to overlap"


@pytest.fixture
def leader(tmp_path: Path) -> Partition:
    return leader_partition(tmp_path, ME, (ME, IN_SYNC), (ME, IN_SYNC, CATCHING_UP))


def test_a_fetch_offset_below_the_high_watermark_moves_nothing_on_the_leader(leader: Partition) -> None:
    proposals = recorded_proposals(leader)
    leader.append(make_batch(100), now=1)
    leader.update_follower(IN_SYNC, 60, now=2)
    high_watermark = leader.log.high_watermark
    assert high_watermark == 60
    # What a follower fetching ahead would claim: below the high watermark it was last told.
    for follower, claimed in ((CATCHING_UP, 59), (IN_SYNC, 59), (CATCHING_UP, 0)):
        assert may_fetch_ahead([(claimed, high_watermark)])
        assert not leader.update_follower(follower, claimed, now=3)
        assert leader.log.high_watermark == high_watermark
        assert proposals == [], "a replica below the high watermark is not caught up"
    # At the high watermark the claim counts: the catching-up replica is proposed for the ISR,
    # and while that is pending the high watermark waits for it too: no fetching ahead there.
    assert not may_fetch_ahead([(high_watermark, high_watermark)])
    leader.update_follower(CATCHING_UP, high_watermark, now=4)
    assert proposals == [IsrProposal((ME, IN_SYNC, CATCHING_UP), 5, (ME, IN_SYNC), 7)]


async def test_num_replica_fetchers_spreads_one_leaders_partitions_over_that_many_fetchers(tmp_path: Path) -> None:
    manager = LogManager([str(tmp_path / "d1")], ME, "cluster", LogConfig(), LogDirFailureChannel())
    manager.startup()
    replicas = ReplicaManager(ME, manager)
    # No endpoint: the fetchers wait for one, so nothing leaves this test.
    fetchers = ReplicaFetcherManager(replicas, lambda _leader: None, FetcherConfig(ME, fetchers_per_leader=3))
    try:
        for index in range(24):
            partition = replicas.become_follower("t", index, uuid.UUID(int=7), 0, LogConfig(), leader_id=IN_SYNC,
                                                 is_new_replica=True, isr=(IN_SYNC,), replicas=(IN_SYNC, ME),
                                                 partition_epoch=0)
            assert partition is not None
            fetchers.follow(partition, IN_SYNC, 0)
        by_fetcher = [sorted(f.partitions) for f in fetchers._fetchers.values()]
        assert len(by_fetcher) == 3 and all(by_fetcher), by_fetcher
        assert sorted(tp for tps in by_fetcher for tp in tps) == [("t", i) for i in range(24)]
        before = {key: fetcher for key, fetcher in fetchers._fetcher_of.items()}
        fetchers.follow(replicas.partitions[("t", 5)], IN_SYNC, 1)  # a new leader epoch, same leader
        assert fetchers._fetcher_of[("t", 5)] is before[("t", 5)], "a partition always goes to the same one"
    finally:
        await fetchers.shutdown()
        manager.shutdown()


async def test_a_leaving_broker_keeps_fetching_what_it_follows_and_follows_no_new_leader(tmp_path: Path) -> None:
    # A stopping broker that the controller's handover makes a follower must not fetch its way
    # back into the ISR it was just taken out of: acks=all would then wait for it once it is gone.
    manager = LogManager([str(tmp_path / "d")], ME, "cluster", LogConfig(), LogDirFailureChannel())
    manager.startup()
    replicas = ReplicaManager(ME, manager)
    fetchers = ReplicaFetcherManager(replicas, lambda _leader: None, FetcherConfig(ME))
    try:
        def follower(index: int, leader: int) -> Partition:
            partition = replicas.become_follower("t", index, uuid.UUID(int=7), 0, LogConfig(), leader_id=leader,
                                                 is_new_replica=True, isr=(leader, ME), replicas=(leader, ME),
                                                 partition_epoch=0)
            assert partition is not None
            return partition

        fetchers.follow(follower(0, IN_SYNC), IN_SYNC, 0)
        fetchers.leave()
        fetchers.follow(follower(1, IN_SYNC), IN_SYNC, 0)
        assert fetchers.leader_of(("t", 0)) == IN_SYNC, "what it followed, it still fetches (it may be in the ISR)"
        assert fetchers.leader_of(("t", 1)) is None, "a leaving broker started following a new leader"
        fetchers.follow(follower(0, CATCHING_UP), CATCHING_UP, 1)
        assert fetchers.leader_of(("t", 0)) is None, "a leaving broker followed a partition's new leader"
    finally:
        await fetchers.shutdown()
        manager.shutdown()


BACKOFF_MS = 1000


@pytest.fixture
def following(tmp_path: Path) -> Iterator[LeaderFetcher]:
    """A fetcher of t-0 and t-1 from leader IN_SYNC at leader epoch 3, both logs empty; no task runs it."""
    manager = LogManager([str(tmp_path / "d")], ME, "cluster", LogConfig(), LogDirFailureChannel())
    manager.startup()
    replicas = ReplicaManager(ME, manager)
    fetcher = LeaderFetcher(IN_SYNC, lambda: None, replicas, FetcherConfig(ME, backoff_ms=BACKOFF_MS))
    for index in (0, 1):
        partition = replicas.become_follower("t", index, uuid.UUID(int=7), 3, LogConfig(), leader_id=IN_SYNC,
                                             is_new_replica=True, isr=(IN_SYNC, ME), replicas=(IN_SYNC, ME),
                                             partition_epoch=0)
        assert partition is not None
        fetcher.partitions[("t", index)] = _Followed(partition, 3)
    yield fetcher
    manager.shutdown()


def epoch_ends(*answers: tuple[int, ErrorCode]) -> object:
    """An OffsetForLeaderEpoch v4 response, through the wire: each partition at leader epoch 3, end 0."""
    body = {"throttle_time_ms": 0, "topics": [{"topic": "t", "partitions": [
        {"partition": index, "error_code": error, "leader_epoch": 3 if error == ErrorCode.NONE else -1,
         "end_offset": 0 if error == ErrorCode.NONE else -1} for index, error in answers]}]}
    return decode_body(OFFSET_FOR_LEADER_EPOCH, 4, False, encode_body(OFFSET_FOR_LEADER_EPOCH, 4, False, body))


def test_a_leader_that_has_not_heard_of_its_leadership_is_asked_again_soon_for_that_partition_only(
        following: LeaderFetcher) -> None:
    t0, t1 = following.partitions[("t", 0)], following.partitions[("t", 1)]
    now = 100.0
    following._epoch_ends_answered(epoch_ends((0, ErrorCode.NOT_LEADER_OR_FOLLOWER), (1, ErrorCode.NONE)), now)
    assert t1.truncated and t1.ready(now), "the partition the leader answered for goes on"
    assert not t0.truncated and not t0.ready(now)
    assert t0.ready(now + LEADER_BEHIND_RETRY_S), "the leader's LeaderAndIsr is on its way: ask again soon"
    assert following._until_one_ready(now) == pytest.approx(LEADER_BEHIND_RETRY_S)
    # Still not leading: asked again less and less often, never less often than the backoff.
    delays = []
    for _ in range(12):
        following._epoch_ends_answered(epoch_ends((0, ErrorCode.UNKNOWN_LEADER_EPOCH)), now)
        delays.append(t0.retry_at - now)
    assert delays == sorted(delays) and delays[1] == pytest.approx(2 * delays[0])
    assert delays[-1] == pytest.approx(BACKOFF_MS / 1000)
    following._epoch_ends_answered(epoch_ends((0, ErrorCode.NONE)), now + 1)
    assert t0.truncated and t0.ready(now + 1) and t0.failures == 0


def fetch_response(correlation_id: int, body: dict[str, object]) -> memoryview:
    """A Fetch v12 response as the fetcher receives it: the frame without its size prefix."""
    return memoryview(encode_response_bytes(FETCH, 12, correlation_id, body))[4:]


def test_a_fetch_error_on_one_partition_holds_back_neither_the_fetcher_nor_its_other_partitions(
        following: LeaderFetcher) -> None:
    for followed in following.partitions.values():
        followed.truncated = True
    batch = make_batch(5)
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": ErrorCode.UNKNOWN_LEADER_EPOCH, "high_watermark": -1,
         "records": None},
        {"partition_index": 1, "error_code": 0, "high_watermark": 5, "log_start_offset": 0, "records": batch},
    ]}]}
    sent = _SentFetch(1, {("t", 0): 0, ("t", 1): 0}, 30.0, 12, {})
    client = BrokerClient("127.0.0.1", 9, client_id="test")  # never connected: the answer is already here
    before = time.monotonic()
    backoff = following._store(client, sent, fetch_response(1, body))
    after = time.monotonic()
    assert not backoff, "one partition's error paused every partition of this leader"
    t0, t1 = following.partitions[("t", 0)], following.partitions[("t", 1)]
    assert t1.partition.log.log_end_offset == 5
    assert before + LEADER_BEHIND_RETRY_S <= t0.retry_at <= after + LEADER_BEHIND_RETRY_S
    # FENCED_LEADER_EPOCH: this follower is the one behind; its own LeaderAndIsr comes, no hurry.
    body["responses"][0]["partitions"] = [{"partition_index": 1, "error_code": ErrorCode.FENCED_LEADER_EPOCH,
                                           "high_watermark": -1, "records": None}]
    sent = _SentFetch(2, {("t", 1): 5}, 30.0, 12, {})
    before = time.monotonic()
    assert not following._store(client, sent, fetch_response(2, body))
    after = time.monotonic()
    assert t1.failures == 1 and before + BACKOFF_MS / 1000 <= t1.retry_at <= after + BACKOFF_MS / 1000
