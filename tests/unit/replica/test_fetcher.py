"""The follower fetchers' rules, without sockets. When a follower may send its next Fetch before
writing what the last one brought: only when every new log end stays below the high watermark
the leader reported; checked against the rule itself and against the leader's side (a real
Partition on a real Log), where a fetch offset below the high watermark moves nothing, whether
the follower is in the ISR, out of it, or joining. And num.replica.fetchers: one leader's
partitions spread over that many fetchers, each partition always to the same one."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from minikafka.replica.fetcher import FetcherConfig, ReplicaFetcherManager, may_fetch_ahead
from minikafka.replica.partition import IsrProposal, Partition
from minikafka.replica.replica_manager import ReplicaManager
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import LogConfig
from minikafka.storage.log_manager import LogManager
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
