"""The state of one consumer group (classic protocol): members, generation, committed offsets.

These are plain data holders with small queries; every transition is made by the
GroupCoordinator, which owns all Group objects and is the only code that mutates them.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from minikafka.group.results import JoinResult, SyncResult
from minikafka.group.schemas import CONSUMER_PROTOCOL_TYPE, subscribed_topics

TopicPartition = tuple[str, int]


class GroupState(enum.Enum):
    """Kafka's classic group states, valued with the names DescribeGroups and ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class TimerHandle:
    """What a Scheduler returns: something that can be cancelled."""

    def cancel(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(eq=False)
class Member:
    """One member of a group. `join_future` / `sync_future` are set while its JoinGroup /
    SyncGroup waits for the rebalance; `deadline_ms` is when its session expires."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    deadline_ms: int = 0
    session_timer: TimerHandle | None = None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def same_protocols(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]


@dataclass(eq=False)
class Group:
    group_id: str
    partition: int = -1  # of __consumer_offsets, where this group is stored
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: dict[str, TimerHandle | None] = field(default_factory=dict)  # MEMBER_ID_REQUIRED issued
    pending_sync: set[str] = field(default_factory=set)  # joined this generation, no SyncGroup yet
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    # producer id -> offsets its open transaction committed (TxnOffsetCommit): they count once
    # the transaction commits, and go if it aborts.
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    current_state_timestamp: int = -1
    rebalance_timer: TimerHandle | None = None
    join_deadline_ms: int = 0
    initial_join_limit_ms: int = -1  # >= 0 while the first join of an empty group is held back

    @property
    def is_empty(self) -> bool:
        return not self.members

    def has_pending_txn_offset(self, tp: TopicPartition) -> bool:
        return any(tp in offsets for offsets in self.pending_txn_offsets.values())

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.join_future is not None for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports_protocols(self, protocol_type: str, protocols: Sequence[str]) -> bool:
        """Whether a member with these protocols may join: same type, and (if the group has
        members) at least one protocol every member supports."""
        if not protocol_type or not protocols:
            return False
        if self.is_empty:
            return True
        if protocol_type != self.protocol_type:
            return False
        return bool(self.candidate_protocols() & set(protocols))

    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names)
        for member in members[1:]:
            common &= set(member.protocol_names)
        return common

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those all members support;
        the most votes win, a tie goes to the protocol that got its first vote earliest."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(name for name in member.protocol_names if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def subscribed_topics(self) -> set[str] | None:
        """Every topic a member of this consumer group subscribes to; None when unknown
        (not the consumer protocol, or a subscription that does not parse)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            member_topics = subscribed_topics(member.metadata_for(self.protocol_name))
            if member_topics is None:
                return None
            topics |= member_topics
        return topics
