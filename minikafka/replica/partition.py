"""One partition replica on this broker (``Partition``): its role as a table of allowed
transitions, and as leader the ISR, the followers' positions and the high watermark.

Owned by the ReplicaManager; event-loop thread only.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from minikafka.storage.log import AppendResult, Log
from minikafka.storage.producer_state import ProducerEntry
from protocol.errors import ErrorCode
from protocol.record_codec import ControlMarker


class Role(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


# Which role a hosted replica may take next (None: just created). A replica that goes offline
# leaves the ReplicaManager's partitions altogether (see ReplicaManager.take_offline).
ROLE_TRANSITIONS: dict[Role | None, frozenset[Role]] = {
    None: frozenset({Role.LEADER, Role.FOLLOWER}),
    Role.LEADER: frozenset({Role.LEADER, Role.FOLLOWER}),
    Role.FOLLOWER: frozenset({Role.LEADER, Role.FOLLOWER}),
}


# How far behind the log end a follower that keeps moving forward may be and still count as caught
# up: one whole follower fetch response (replica.fetch.response.max.bytes' default).
IN_SYNC_WINDOW_BYTES = 10 * 1024 * 1024


@dataclass
class FollowerState:
    """What the leader knows of one follower, from its fetches."""

    log_end_offset: int = -1
    # The last time the follower had everything the leader had (Kafka's lastCaughtUpTimeMs).
    last_caught_up_ms: int = 0
    # The leader's log end offset when the follower last fetched, and when that was.
    leader_end_at_last_fetch: int = -1
    last_fetch_ms: int = 0


@dataclass(frozen=True)
class IsrProposal:
    """An ISR change a leader asked to record, with the state it was decided from: the
    conditional write holds only while the recorded state is still that one."""

    isr: tuple[int, ...]
    leader_epoch: int
    base_isr: tuple[int, ...]
    base_partition_epoch: int


IsrProposer = Callable[["Partition", IsrProposal], None]


class Partition:
    """One partition replica on this broker: its log, role, leader epoch, and as leader the
    ISR, the followers' positions and the high watermark.

    The leader moves the high watermark to the smallest log end offset of the ISR (with one
    replica, its own log end); a follower takes the leader's high watermark, bounded by its own
    log end. An ISR change is proposed through ``propose_isr`` and takes effect only when
    ``isr_committed`` confirms it (in a cluster: the controller's AlterPartition answer, or below
    inter.broker.protocol.version 2.7-IV2 a conditional ZooKeeper write), so a leader
    that has been replaced can never shrink the ISR to itself and acknowledge alone. While an
    expansion is pending the high watermark waits for the joining replica too (Kafka's maximal
    ISR): once the write lands, the controller may elect it, so it must hold what was acknowledged.
    Touched only by the ReplicaManager and the fetchers, on the event loop.
    """

    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, leader_epoch: int, log_: Log,
                 broker_id: int = -1) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.leader_epoch = leader_epoch
        self.log = log_
        self.broker_id = broker_id
        self.role: Role | None = None
        self.leader_id = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.partition_epoch = 0  # the zk version of the partition's state, for conditional ISR writes
        self.followers: dict[int, FollowerState] = {}
        self.pending_isr: IsrProposal | None = None
        self.propose_isr: IsrProposer | None = None
        # Counts the times this replica followed another broker, whose log may have cut its tail
        # back: an append's acks=all answer is due only while it stays the same (``leadership``).
        self.leaderships_followed = 0
        # Resigned on its own (its ZooKeeper session ended), until the controller's news: produce
        # requests wait for that news rather than being refused (ReplicaManager.leadership_confirmed).
        self.leadership_unconfirmed = False
        # producer id -> the token of a transactional produce being verified with its coordinator
        # (KIP-890); a marker for the producer ends it, so a batch verified before the marker
        # cannot open a transaction after it.
        self.verification_guards: dict[int, object] = {}

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def resigned(self) -> bool:
        """A follower of no leader: it stopped leading (its leadership unconfirmed, or the
        controller named no leader) and follows nobody yet, so its log is as it led it."""
        return self.role is Role.FOLLOWER and self.leader_id < 0

    @property
    def leadership(self) -> tuple[Partition, int]:
        """Which leadership of this replica an append belongs to (see ``leaderships_followed``)."""
        return self, self.leaderships_followed

    def _transition(self, role: Role) -> None:
        if role not in ROLE_TRANSITIONS[self.role]:
            raise ValueError(f"{self.topic}-{self.index}: {self.role} cannot become {role}")
        self.role = role

    def make_leader(self, leader_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...],
                    partition_epoch: int, now: int) -> None:
        self._transition(Role.LEADER)
        self.leadership_unconfirmed = False
        self.leader_id = self.broker_id
        self.leader_epoch = max(self.leader_epoch, leader_epoch)
        self.isr, self.replicas, self.partition_epoch = isr or (self.broker_id,), replicas, partition_epoch
        self.pending_isr = None
        # Followers get a full lag window before they can be shrunk out of the ISR.
        self.followers = {b: FollowerState(last_caught_up_ms=now) for b in replicas if b != self.broker_id}
        # A no-op when the log already knows this epoch (a restart), news otherwise.
        self.log.assign_epoch(self.leader_epoch, self.log.log_end_offset)
        self._advance_high_watermark()

    def make_follower(self, leader_id: int, leader_epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...],
                      partition_epoch: int) -> None:
        self._transition(Role.FOLLOWER)
        self.leadership_unconfirmed = False
        if leader_id >= 0:
            self.leaderships_followed += 1
        self.leader_id = leader_id
        self.leader_epoch = max(self.leader_epoch, leader_epoch)
        self.isr, self.replicas, self.partition_epoch = isr, replicas, partition_epoch
        self.followers = {}
        self.pending_isr = None
        self.log.high_watermark = min(self.log.high_watermark, self.log.log_end_offset)

    def resign(self) -> None:
        """Stop leading until the controller says who leads (this broker's ZooKeeper session
        ended, so it cannot confirm its leadership); the log stays as it led it."""
        self.make_follower(-1, self.leader_epoch, self.isr, self.replicas, self.partition_epoch)
        self.leadership_unconfirmed = True

    def active_producers(self) -> list[ProducerEntry]:
        """The producers this replica's log holds state for (DescribeProducers)."""
        return list(self.log.producer_state.producers.values())

    # ---- leader --------------------------------------------------------------------------
    def append(self, records: bytes | memoryview, now: int, coordinator: bool = False) -> AppendResult:
        """Append as leader; with no other ISR member the high watermark follows at once.
        ``coordinator``: the broker's own write (see Log.append_as_leader)."""
        result = self.log.append_as_leader(records, self.leader_epoch, now, coordinator)
        self._advance_high_watermark()
        return result

    def append_marker(self, producer_id: int, producer_epoch: int, marker: ControlMarker, now: int) -> AppendResult:
        """Append as leader the marker that ends a producer's transaction here."""
        result = self.log.append_marker(producer_id, producer_epoch, marker, self.leader_epoch, now)
        self.verification_guards.pop(producer_id, None)
        self._advance_high_watermark()
        return result

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR, with the replicas a pending expansion adds."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(b for b in self.pending_isr.isr if b not in self.isr)

    def _advance_high_watermark(self) -> bool:
        ends = [self.log.log_end_offset]
        for broker in self.maximal_isr:
            if broker != self.broker_id:
                follower = self.followers.get(broker)
                ends.append(follower.log_end_offset if follower is not None else -1)
        candidate = min(ends)
        if candidate > self.log.high_watermark:
            self.log.high_watermark = candidate
            return True
        return False

    def update_follower(self, broker_id: int, fetch_offset: int, now: int) -> bool:
        """A follower fetched from ``fetch_offset``: it has everything below it. Returns True
        when that moved the high watermark."""
        follower = self.followers.get(broker_id)
        if follower is None:
            if broker_id not in self.replicas:
                return False
            follower = self.followers[broker_id] = FollowerState()
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            follower.last_caught_up_ms = now
        elif fetch_offset >= follower.leader_end_at_last_fetch >= 0:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        elif (broker_id in self.isr and fetch_offset > follower.log_end_offset
              and self.log.bytes_from(fetch_offset) <= IN_SYNC_WINDOW_BYTES):
            # Kafka's rule alone drops a follower that replicates flat out behind a busy leader:
            # producers waiting on acks=all keep their in-flight batches above the high
            # watermark, often more than one fetch of the partition takes, so no fetch reaches
            # where the log ended at the one before. A follower that moved forward since its last
            # fetch and lacks no more than one full follower response is in sync too; one that
            # stops moving still leaves after replica.lag.time.max.ms.
            follower.last_caught_up_ms = now
        follower.log_end_offset = fetch_offset
        follower.leader_end_at_last_fetch = leader_end
        follower.last_fetch_ms = now
        if broker_id not in self.isr and self._caught_up(follower):
            self._propose(tuple(sorted({*self.isr, broker_id}, key=self._replica_order)))
        return self._advance_high_watermark()

    def _caught_up(self, follower: FollowerState) -> bool:
        """Kafka's rule to join the ISR: at the high watermark, and past the start of the
        current leader epoch (so it holds nothing a previous leader wrote that was lost)."""
        epoch_start = self.log.leader_epochs.end_offset_for(self.leader_epoch - 1, self.log.log_end_offset)[1]
        return follower.log_end_offset >= max(self.log.high_watermark, epoch_start if epoch_start >= 0 else 0)

    def _replica_order(self, broker: int) -> int:
        return self.replicas.index(broker) if broker in self.replicas else len(self.replicas)

    def out_of_sync(self, now: int, max_lag_ms: int) -> tuple[int, ...]:
        """The followers in the ISR that have not caught up for longer than ``max_lag_ms``."""
        return tuple(b for b in self.isr if b != self.broker_id
                     and now - self.followers.setdefault(b, FollowerState(last_caught_up_ms=now)).last_caught_up_ms
                     > max_lag_ms)

    def maybe_shrink_isr(self, now: int, max_lag_ms: int) -> None:
        lagging = self.out_of_sync(now, max_lag_ms)
        if lagging and self.is_leader:
            self._propose(tuple(b for b in self.isr if b not in lagging))

    def _propose(self, isr: tuple[int, ...]) -> None:
        if self.pending_isr is not None or isr == self.isr:
            return
        proposal = self.pending_isr = IsrProposal(isr, self.leader_epoch, self.isr, self.partition_epoch)
        if self.propose_isr is None:
            self.isr_committed(proposal, self.partition_epoch + 1)
            return
        self.propose_isr(self, proposal)

    def isr_committed(self, proposal: IsrProposal, partition_epoch: int) -> bool:
        """The proposed ISR is recorded as version ``partition_epoch``; returns True when that
        moved the high watermark. A proposal the controller's news overtook meanwhile (a newer
        LeaderAndIsr) changes nothing: that news already includes whatever it recorded."""
        if self.pending_isr is not proposal:
            return False
        self.pending_isr = None
        self.isr, self.partition_epoch = proposal.isr, partition_epoch
        return self._advance_high_watermark()

    def isr_refused(self, proposal: IsrProposal, recorded: tuple[tuple[int, ...], int] | None = None) -> bool:
        """The proposal was not recorded. ``recorded``: the (ISR, version) found instead, when it
        is still this leadership's (same leader and leader epoch; the controller dropped a
        replica, or an earlier write of this leader landed though its answer was lost); it is
        taken as this leader's own, so the next proposal starts from it rather than failing for
        ever. Otherwise wait for the controller's news. True when the high watermark moved."""
        if self.pending_isr is not proposal:
            return False
        self.pending_isr = None
        if recorded is None or recorded[1] <= self.partition_epoch:
            return False
        self.isr, self.partition_epoch = recorded
        return self._advance_high_watermark()

    # ---- follower ------------------------------------------------------------------------
    def append_as_follower(self, records: bytes | memoryview, leader_high_watermark: int) -> AppendResult:
        result = self.log.append_as_follower(records)
        self.follow_high_watermark(leader_high_watermark)
        return result

    def follow_high_watermark(self, leader_high_watermark: int) -> None:
        self.log.high_watermark = max(self.log.high_watermark,
                                      min(leader_high_watermark, self.log.log_end_offset))

    def check_epoch(self, current_leader_epoch: int) -> ErrorCode:
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch > self.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.FENCED_LEADER_EPOCH
