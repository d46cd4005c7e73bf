"""A Partition's replication rules on a real Log, with time passed in (no sockets, no sleeping):
the high watermark is the smallest log end of the ISR, followers join the ISR when caught up
and leave it after replica.lag.time.max.ms, an ISR change takes effect only once committed, and
the controller's elections pick leaders as Kafka does."""

from __future__ import annotations

from pathlib import Path

import pytest

from minikafka.controller import elections
from minikafka.replica.partition import IsrProposal, Partition, Role
from tests.unit.replica.helpers import leader_partition, recorded_proposals
from tests.unit.storage.helpers import make_batch

ME, F1, F2 = 1, 2, 3
LAG_MS = 30_000


@pytest.fixture
def leader(tmp_path: Path) -> Partition:
    return leader_partition(tmp_path, ME, (ME, F1, F2), (ME, F1, F2))


def test_the_high_watermark_is_the_smallest_log_end_of_the_isr(leader: Partition) -> None:
    leader.append(make_batch(10), now=1)
    assert leader.log.log_end_offset == 10 and leader.log.high_watermark == 0
    assert not leader.update_follower(F1, 10, now=2), "one follower is not the whole ISR"
    assert leader.update_follower(F2, 4, now=2)
    assert leader.log.high_watermark == 4
    assert leader.update_follower(F2, 10, now=3)
    assert leader.log.high_watermark == 10
    leader.update_follower(F2, 6, now=4)  # a follower that truncated never moves it back
    assert leader.log.high_watermark == 10


def test_a_lagging_follower_leaves_the_isr_only_once_the_change_is_committed(leader: Partition) -> None:
    proposals = recorded_proposals(leader)
    leader.append(make_batch(10), now=0)
    leader.update_follower(F1, 10, now=1)
    leader.update_follower(F2, 2, now=0)  # its last move forward
    leader.maybe_shrink_isr(now=LAG_MS, max_lag_ms=LAG_MS)
    assert proposals == [], "not yet past the lag window"
    leader.maybe_shrink_isr(now=LAG_MS + 1, max_lag_ms=LAG_MS)
    assert proposals == [IsrProposal((ME, F1), 5, (ME, F1, F2), 7)]
    assert leader.isr == (ME, F1, F2) and leader.log.high_watermark == 2, "nothing changes before the commit"
    leader.maybe_shrink_isr(now=LAG_MS + 2, max_lag_ms=LAG_MS)
    assert len(proposals) == 1, "one proposal in flight at a time"
    leader.isr_committed(proposals[0], partition_epoch=8)
    assert (leader.isr, leader.partition_epoch, leader.log.high_watermark) == ((ME, F1), 8, 10)


def test_a_refused_isr_change_changes_nothing(leader: Partition) -> None:
    proposals = recorded_proposals(leader)
    leader.maybe_shrink_isr(now=LAG_MS + 1, max_lag_ms=LAG_MS)
    assert [p.isr for p in proposals] == [(ME,)]
    leader.isr_refused(proposals[0])  # the controller changed the partition meanwhile
    assert leader.isr == (ME, F1, F2) and leader.pending_isr is None


def _shrunk_to(leader: Partition, isr: tuple[int, ...], partition_epoch: int) -> None:
    leader.make_leader(leader.leader_epoch, isr, leader.replicas, partition_epoch, now=0)


def test_a_follower_rejoins_the_isr_when_caught_up_to_the_high_watermark(leader: Partition) -> None:
    proposals = recorded_proposals(leader)
    _shrunk_to(leader, (ME, F1), 8)
    leader.append(make_batch(10), now=1)
    leader.update_follower(F1, 10, now=2)
    leader.update_follower(F2, 5, now=2)
    assert proposals == [], "behind the high watermark"
    leader.update_follower(F2, 10, now=3)
    assert [p.isr for p in proposals] == [(ME, F1, F2)], "the ISR keeps the replicas' order"


def test_while_a_replica_joins_the_high_watermark_waits_for_it_too(leader: Partition) -> None:
    # Once the write lands the controller may elect it: it must hold what was acknowledged.
    proposals = recorded_proposals(leader)
    _shrunk_to(leader, (ME, F1), 8)
    leader.append(make_batch(10), now=1)
    leader.update_follower(F1, 10, now=2)
    leader.update_follower(F2, 10, now=2)
    assert [p.isr for p in proposals] == [(ME, F1, F2)] and leader.log.high_watermark == 10
    leader.append(make_batch(5), now=3)
    leader.update_follower(F1, 15, now=4)
    assert leader.log.high_watermark == 10, "F2, joining, does not have offsets 10-14 yet"
    leader.update_follower(F2, 15, now=4)
    assert leader.log.high_watermark == 15
    leader.isr_committed(proposals[0], partition_epoch=9)
    assert (leader.isr, leader.partition_epoch, leader.maximal_isr) == ((ME, F1, F2), 9, (ME, F1, F2))


def test_a_proposal_overtaken_by_the_controllers_news_changes_nothing(leader: Partition) -> None:
    proposals = recorded_proposals(leader)
    leader.maybe_shrink_isr(now=LAG_MS + 1, max_lag_ms=LAG_MS)
    # The controller's newer state arrives before the answer to the write: it already holds
    # whatever the write did, and a later proposal is not cleared by the old answer.
    leader.make_leader(6, (ME, F1), (ME, F1, F2), partition_epoch=10, now=LAG_MS + 1)
    leader.maybe_shrink_isr(now=2 * LAG_MS + 2, max_lag_ms=LAG_MS)
    assert [p.isr for p in proposals] == [(ME,), (ME,)]
    assert not leader.isr_committed(proposals[0], partition_epoch=8)
    assert not leader.isr_refused(proposals[0], ((ME,), 8))
    assert (leader.isr, leader.partition_epoch, leader.pending_isr) == ((ME, F1), 10, proposals[1])


def test_a_refused_proposal_takes_the_isr_recorded_for_its_own_leadership(leader: Partition) -> None:
    # The controller dropped F2 from the ISR (same leader epoch, a new version) and its news did
    # not come: the leader's next proposal starts from what is recorded instead of failing for ever.
    proposals = recorded_proposals(leader)
    leader.append(make_batch(10), now=1)
    leader.update_follower(F1, 10, now=2)
    leader.maybe_shrink_isr(now=LAG_MS + 1, max_lag_ms=LAG_MS)
    assert [p.isr for p in proposals] == [(ME, F1)]
    assert leader.isr_refused(proposals[0], ((ME, F1), 9))
    assert (leader.isr, leader.partition_epoch, leader.log.high_watermark) == ((ME, F1), 9, 10)
    assert not leader.isr_refused(proposals[0], ((ME,), 11)), "answered once"


def test_only_assigned_replicas_are_followers(leader: Partition) -> None:
    assert not leader.update_follower(42, 10, now=1)
    assert 42 not in leader.followers


def test_a_follower_takes_the_leaders_high_watermark_up_to_its_own_log_end(leader: Partition) -> None:
    leader.make_follower(F1, 6, (F1, ME), (ME, F1, F2), 9)
    assert leader.role is Role.FOLLOWER and not leader.is_leader and leader.followers == {}
    leader.append_as_follower(make_batch(3), leader_high_watermark=100)
    assert leader.log.high_watermark == leader.log.log_end_offset == 3
    leader.follow_high_watermark(1)
    assert leader.log.high_watermark == 3, "never moves back"


def test_elections_pick_the_first_eligible_replica() -> None:
    replicas = (2, 1, 3)
    assert elections.offline_partition(replicas, (1, 3), {1, 3}) == elections.Election(1, (1, 3))
    assert elections.offline_partition(replicas, (2,), {1, 3}) is None, "no live in-sync replica"
    assert elections.new_partition(replicas, {1, 3}) == elections.Election(1, (1, 3))
    assert elections.controlled_shutdown(replicas, (2, 1, 3), {1, 2, 3}, {2}) == elections.Election(1, (1, 3))
    assert elections.preferred_replica(replicas, (1, 2), {1, 2}) == elections.Election(2, (1, 2))
    assert elections.preferred_replica(replicas, (1, 3), {1, 2, 3}) is None, "the preferred replica lags"
    assert elections.without_replica((3,), 3) == (3,), "the last ISR member stays"


def test_a_follower_moving_forward_within_one_response_of_the_end_stays_in_sync(leader: Partition) -> None:
    # acks=all producers keep ~5 MiB in flight above the high watermark; each follower fetch
    # takes 1 MiB (10 records of 100 KiB) while as much again is appended. Kafka's rule never sees
    # F1 reach the log end of its previous fetch; it is replicating flat out all the same.
    proposals = recorded_proposals(leader)
    record = 100 * 1024
    for _ in range(10):
        leader.append(make_batch(5, value_size=record), now=0)
    fetched = 0
    for step in range(1, 8):
        now = step * LAG_MS
        for _ in range(2):
            leader.append(make_batch(5, value_size=record), now=now)
        fetched += 10
        leader.update_follower(F1, fetched, now=now)
        leader.update_follower(F2, 5, now=now)  # alive, but stuck at one offset
        assert leader.log.log_end_offset - fetched == 50
        leader.maybe_shrink_isr(now=now, max_lag_ms=LAG_MS)
    assert [p.isr for p in proposals] == [(ME, F1)], "only the follower that stopped moving leaves"


def test_a_follower_further_behind_than_one_response_is_not_kept_in_sync(leader: Partition) -> None:
    proposals = recorded_proposals(leader)
    for _ in range(24):  # 12 MiB
        leader.append(make_batch(5, value_size=100 * 1024), now=0)
    for step in range(1, 4):
        leader.update_follower(F1, step, now=step * LAG_MS)  # moving, but 11+ MiB behind
        leader.update_follower(F2, leader.log.log_end_offset, now=step * LAG_MS)
        leader.maybe_shrink_isr(now=step * LAG_MS, max_lag_ms=LAG_MS)
    assert [p.isr for p in proposals] == [(ME, F2)]
