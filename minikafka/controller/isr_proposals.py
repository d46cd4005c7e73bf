"""The controller's judgement of an AlterPartition proposal (KIP-497, KIP-903), apart from
ZooKeeper: a Kafka broker at inter.broker.protocol.version 2.7-IV2 or later, leading a
partition, proposes its new ISR to the controller instead of writing the state znode itself.

``judge`` compares one proposal with the partition's current state as Kafka's ZooKeeper-mode
controller does (KafkaController.processAlterPartition) and answers an error, the current
state (the proposal is already applied: a retry), or the state to write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from minikafka.zk.kafka_zk import LeaderIsr
from protocol.errors import ErrorCode

RECOVERED, RECOVERING = 0, 1  # LeaderRecoveryState (KIP-704)
UNKNOWN_BROKER_EPOCH = -1  # AlterPartition v3's mark of a member whose epoch the leader does not know


@dataclass(frozen=True)
class IsrProposal:
    """One partition of an AlterPartition request."""

    leader_epoch: int
    isr: tuple[int, ...]
    # v3 (KIP-903): each proposed member's broker epoch as the leader knows it.
    member_epochs: Mapping[int, int]
    leader_recovery_state: int
    partition_epoch: int  # the zk version of the state znode the leader last heard of


@dataclass(frozen=True)
class Unchanged:
    """The proposal is the current state already (a retry of an applied proposal)."""


def judge(leader: int, proposal: IsrProposal, current: LeaderIsr, zk_version: int, replicas: tuple[int, ...],
          live_epochs: Mapping[int, int]) -> ErrorCode | Unchanged | LeaderIsr:
    """``leader`` proposes ``proposal`` for a partition whose state znode holds ``current`` at
    ``zk_version``, assigned to ``replicas``; ``live_epochs`` has the broker epoch of each live
    broker not shutting down."""
    if current.leader != leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if proposal.leader_epoch != current.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if proposal.isr == current.isr and proposal.leader_recovery_state == RECOVERED:
        return Unchanged()
    if proposal.partition_epoch < zk_version:
        return ErrorCode.INVALID_UPDATE_VERSION
    if proposal.leader_recovery_state not in (RECOVERED, RECOVERING) or (
            proposal.leader_recovery_state == RECOVERING and len(proposal.isr) > 1):
        return ErrorCode.INVALID_REQUEST
    if not proposal.isr or len(set(proposal.isr)) != len(proposal.isr):
        return ErrorCode.INVALID_REQUEST
    for member in proposal.isr:
        known = proposal.member_epochs.get(member, UNKNOWN_BROKER_EPOCH)
        if member not in replicas or member not in live_epochs or (
                known != UNKNOWN_BROKER_EPOCH and known != live_epochs[member]):
            return ErrorCode.INELIGIBLE_REPLICA
    return replace(current, isr=proposal.isr)
