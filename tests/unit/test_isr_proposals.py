"""The controller's judgement of AlterPartition proposals (Kafka brokers' ISR changes)."""

from __future__ import annotations

import pytest

from minikafka.controller.isr_proposals import RECOVERING, IsrProposal, Unchanged, judge
from minikafka.zk.kafka_zk import LeaderIsr
from protocol.errors import ErrorCode

CURRENT = LeaderIsr(leader=1, leader_epoch=4, isr=(1, 2, 3), controller_epoch=2)
REPLICAS = (1, 2, 3)
LIVE = {1: 100, 2: 200, 3: 300}


def proposal(isr: tuple[int, ...], *, leader_epoch: int = 4, partition_epoch: int = 7,
             epochs: dict[int, int] | None = None, recovery: int = 0) -> IsrProposal:
    return IsrProposal(leader_epoch, isr, epochs or {}, recovery, partition_epoch)


def test_a_shrink_by_the_leader_is_the_new_state() -> None:
    assert judge(1, proposal((1, 2)), CURRENT, 7, REPLICAS, LIVE) == LeaderIsr(1, 4, (1, 2), 2)


def test_an_expansion_with_the_members_epochs_is_the_new_state() -> None:
    current = LeaderIsr(1, 4, (1,), 2)
    assert judge(1, proposal((1, 3), epochs={1: 100, 3: 300}), current, 7, REPLICAS, LIVE) == \
        LeaderIsr(1, 4, (1, 3), 2)


def test_a_retry_of_an_applied_proposal_is_answered_with_the_current_state() -> None:
    assert judge(1, proposal((1, 2, 3), partition_epoch=6), CURRENT, 7, REPLICAS, LIVE) == Unchanged()


@pytest.mark.parametrize("leader, made, error", [
    (2, proposal((1, 2)), ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (1, proposal((1, 2), leader_epoch=3), ErrorCode.FENCED_LEADER_EPOCH),
    (1, proposal((1, 2), partition_epoch=6), ErrorCode.INVALID_UPDATE_VERSION),
    (1, proposal((1, 2), recovery=RECOVERING), ErrorCode.INVALID_REQUEST),
    (1, proposal((1, 2), recovery=5), ErrorCode.INVALID_REQUEST),
    (1, proposal(()), ErrorCode.INVALID_REQUEST),
    (1, proposal((1, 1)), ErrorCode.INVALID_REQUEST),
    (1, proposal((1, 4)), ErrorCode.INELIGIBLE_REPLICA),  # not a replica
    (1, proposal((1, 2), epochs={2: 199}), ErrorCode.INELIGIBLE_REPLICA),  # a restarted broker's old epoch
])
def test_a_proposal_that_cannot_stand_is_refused(leader: int, made: IsrProposal, error: ErrorCode) -> None:
    assert judge(leader, made, CURRENT, 7, REPLICAS, LIVE) == error


def test_a_member_that_is_not_live_is_ineligible() -> None:
    current = LeaderIsr(1, 4, (1,), 2)
    assert judge(1, proposal((1, 3)), current, 7, REPLICAS, {1: 100, 2: 200}) == ErrorCode.INELIGIBLE_REPLICA
