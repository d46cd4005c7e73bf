"""Membership of classic groups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the rebalance
state machine and its timers (session expiry, rebalance and sync deadlines, the initial join
delay), and the groups' metadata record in __consumer_offsets.

`Membership` owns the `Group` objects of the partitions the GroupCoordinator has loaded (the
offsets inside them are `offsets.Offsets`'s to change; deleting a group here tombstones them
with it), and lists, describes and deletes them. Group metadata is written through the
coordinator runtime; a change that cannot be written is undone, or the group rebalances. A
group of the KIP-848 consumer protocol is `ConsumerGroups`'s, which takes the classic requests
of its members. Only the GroupCoordinator and `Offsets` (which checks a committing member
here) call it; timers it schedules call back into it. Event-loop thread only.

The assignors run in the clients: the coordinator picks the protocol every member
supports, elects a leader, hands the leader the members' metadata and everyone their
part of the leader's assignment (eager and cooperative protocols look the same here).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from prometheus_client import Counter, Gauge

from minikafka.coordinator.runtime import CoordinatorRuntime
from minikafka.coordinator.topic import KeyValue
from minikafka.group.consumer_group import ConsumerGroups
from minikafka.group.group import Group, GroupState, Member, TimerHandle
from minikafka.group.results import (
    DescribedMember,
    GroupDescription,
    GroupListing,
    JoinedMember,
    JoinResult,
    SyncResult,
)
from minikafka.group.schemas import encode_group_key, encode_group_value, encode_offset_key
from minikafka.replica.waits import wait_released
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

CLASSIC_GROUP_TYPE = "classic"

REBALANCES = Counter("minikafka_group_rebalances", "Rebalances completed with members (generations handed out)")
GROUPS = Gauge("minikafka_groups", "Groups held by this broker's group coordinator, per state", ["state"])
# Bounds a handler's wait for a rebalance; the coordinator answers long before (rebalance timeout).
_MAX_WAIT_S = 3600.0
ResultT = TypeVar("ResultT", JoinResult, SyncResult)


class Scheduler(Protocol):
    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle: ...

    def call_soon_threadsafe(self, callback: Callable[[], None]) -> None: ...


class LoopScheduler:
    """Timers on the asyncio loop it was created on; wall-clock milliseconds for timestamps.

    `call_later` is for the loop's own thread; `call_soon_threadsafe` for any other."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        return self._loop.call_later(max(delay_ms, 0) / 1000, callback)  # type: ignore[return-value]

    def call_soon_threadsafe(self, callback: Callable[[], None]) -> None:
        self._loop.call_soon_threadsafe(callback)


@dataclass(frozen=True)
class CoordinatorConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_group_size: int = 2**31 - 1
    max_metadata_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000

    @classmethod
    def from_broker(cls, config: Any) -> CoordinatorConfig:
        return cls(
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            max_group_size=config["group.max.size"],
            max_metadata_bytes=config["offset.metadata.max.bytes"],
            offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
        )


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool  # JoinGroup v4+: a new member first gets its id (MEMBER_ID_REQUIRED)
    reason: str | None = None


def join_error(error: ErrorCode, member_id: str = "") -> JoinResult:
    return {"error_code": error, "generation_id": -1, "protocol_type": None, "protocol_name": None,
            "leader": "", "skip_assignment": False, "member_id": member_id, "members": []}


def sync_error(error: ErrorCode) -> SyncResult:
    return {"error_code": error, "protocol_type": None, "protocol_name": None, "assignment": b""}


def _resolve(future: asyncio.Future[ResultT] | None, result: ResultT) -> None:
    if future is not None and not future.done():
        future.set_result(result)


async def _wait_for(future: asyncio.Future[ResultT], on_gone: ResultT) -> ResultT:
    """The future's result, or `on_gone` at once if the client closed its connection meanwhile
    (the member stays in the rebalance, as in Kafka; nobody reads the answer)."""
    if not future.done():
        waker: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda _: None if waker.done() else waker.set_result(None))
        await wait_released(waker, _MAX_WAIT_S)
    if future.done() and not future.cancelled():
        return future.result()
    return on_gone


class Membership:
    """The classic groups of the loaded __consumer_offsets partitions, and their members."""

    def __init__(self, config: CoordinatorConfig, runtime: CoordinatorRuntime, scheduler: Scheduler,
                 consumer_groups: ConsumerGroups, partition_for: Callable[[str], int],
                 partition_error: Callable[[str], ErrorCode]) -> None:
        self.config = config
        self.runtime = runtime
        self.scheduler = scheduler
        self.consumer_groups = consumer_groups
        self.partition_for = partition_for
        self.partition_error = partition_error  # NONE if the group's partition is served (loaded) here
        self.groups: dict[str, Group] = {}
        for state in GroupState:
            if state != GroupState.DEAD:
                GROUPS.labels(state.value).set_function(functools.partial(self._count, state))

    def _count(self, state: GroupState) -> int:
        return sum(1 for group in self.groups.values() if group.state == state)

    # -----------------------------------------------------------------------------------------
    # Loading and unloading.
    # -----------------------------------------------------------------------------------------

    def restore(self, group: Group, value: Any) -> None:
        """A loaded group takes the metadata its record stored."""
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.current_state_timestamp = value.current_state_timestamp
        for m in value.members:
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.rebalance_timeout if m.rebalance_timeout > 0 else m.session_timeout,
                            m.session_timeout, value.protocol_type, [(value.protocol or "", bytes(m.subscription))],
                            bytes(m.assignment))
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        if group.members:
            # As Kafka does: a loaded group with members is Stable; members that are gone expire.
            group.state = GroupState.STABLE
            if group.leader_id not in group.members:
                group.leader_id = next(iter(group.members))
            for member in group.members.values():
                self.arm_session(group, member)
        else:
            group.state = GroupState.EMPTY

    def detach_classic_members(self, group_id: str) -> None:
        """The group became a consumer-protocol group (its members, if any, moved there: Kafka's
        online upgrade): waiting joins and syncs are told to rejoin, and only offsets stay here."""
        group = self.groups.get(group_id)
        if group is None:
            return
        _cancel(group.rebalance_timer)
        group.rebalance_timer = None
        for timer in group.pending_members.values():
            _cancel(timer)
        for member in group.members.values():
            _release(member, ErrorCode.REBALANCE_IN_PROGRESS)
        group.members.clear()
        group.static_members.clear()
        group.pending_members.clear()
        group.pending_sync.clear()
        group.state = GroupState.EMPTY
        group.protocol_type = group.protocol_name = group.leader_id = None
        group.generation_id = 0

    def adopt_downgraded(self, group: Group, replaced: list[KeyValue], reason: str) -> ErrorCode:
        """A consumer group downgraded online: `group` (Stable, its members the classic members of
        the consumer group) is written after `replaced` (the consumer group's tombstones) in one
        batch, takes over the offsets kept under its id, and rebalances, as Kafka does."""
        error = self.runtime.write(group.partition, [*replaced, (encode_group_key(group.group_id),
                                                                 self._group_value(group))])
        if error != ErrorCode.NONE:
            return error
        kept = self.groups.get(group.group_id)
        if kept is not None:
            group.offsets, group.pending_txn_offsets = kept.offsets, kept.pending_txn_offsets
        group.current_state_timestamp = self.scheduler.now_ms()
        self.groups[group.group_id] = group
        for member in group.members.values():
            self.arm_session(group, member)
        self._prepare_rebalance(group, f"downgraded from the consumer protocol: {reason}")
        return ErrorCode.NONE

    def unload_group(self, group: Group, error: ErrorCode) -> None:
        """Forget the group: its timers stop and its waiting members are answered with `error`."""
        _cancel(group.rebalance_timer)
        group.rebalance_timer = None
        for timer in group.pending_members.values():
            _cancel(timer)
        for member in group.members.values():
            _release(member, error)
        group.state = GroupState.DEAD
        self.groups.pop(group.group_id, None)

    # -----------------------------------------------------------------------------------------
    # JoinGroup.
    # -----------------------------------------------------------------------------------------

    async def join_group(self, req: JoinRequest) -> JoinResult:
        result = self._join(req)
        if isinstance(result, dict):
            return result
        return await _wait_for(result, join_error(ErrorCode.REBALANCE_IN_PROGRESS, req.member_id))

    def _join(self, req: JoinRequest) -> JoinResult | asyncio.Future[JoinResult]:
        if not req.group_id:
            return join_error(ErrorCode.INVALID_GROUP_ID, req.member_id)
        if not self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms:
            return join_error(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id)
        error = self.partition_error(req.group_id)
        if error != ErrorCode.NONE:
            return join_error(error, req.member_id)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return join_error(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id)
            group = Group(req.group_id, partition=self.partition_for(req.group_id))
        if group.state == GroupState.DEAD:
            # Deleted meanwhile: the member looks the coordinator up again and retries.
            return join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
        if self.consumer_groups.has_members(req.group_id):
            return self.consumer_groups.classic_join(req)
        error = self.consumer_groups.convert_empty_to_classic(req.group_id)
        if error != ErrorCode.NONE:
            return join_error(error, req.member_id)
        if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            return join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        self.groups.setdefault(req.group_id, group)  # a refused join leaves no group behind
        if not req.member_id:
            return self._join_new_member(group, req)
        return self._join_known_member(group, req)

    def _join_new_member(self, group: Group, req: JoinRequest) -> JoinResult | asyncio.Future[JoinResult]:
        instance_id = req.group_instance_id
        if instance_id is not None and instance_id in group.static_members:
            return self._rejoin_static_member(group, req)
        if len(group.members) + len(group.pending_members) >= self.config.max_group_size:
            return join_error(ErrorCode.GROUP_MAX_SIZE_REACHED)
        member_id = f"{instance_id if instance_id is not None else req.client_id}-{uuid.uuid4()}"
        if instance_id is None and req.require_known_member_id:
            # KIP-394: the member gets its id first and must come back with it, so a client
            # that times out and retries cannot leave ghost members behind.
            group.pending_members[member_id] = self.scheduler.call_later(
                req.session_timeout_ms, lambda: self._expire_pending(group, member_id))
            return join_error(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        return self._add_member_and_rebalance(group, req, member_id)

    def _join_known_member(self, group: Group, req: JoinRequest) -> JoinResult | asyncio.Future[JoinResult]:
        member_id = req.member_id
        if member_id in group.pending_members:
            _cancel(group.pending_members.pop(member_id))
            return self._add_member_and_rebalance(group, req, member_id)
        error = self.member_error(group, member_id, req.group_instance_id)
        if error != ErrorCode.NONE:
            return join_error(error, member_id)
        member = group.members[member_id]
        if group.state == GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, req, "member rejoined")
        if group.state == GroupState.COMPLETING_REBALANCE:
            if member.same_protocols(req.protocols):
                # It missed the JoinGroup answer of this generation: tell it again.
                self.arm_session(group, member)
                return self._join_response(group, member)
            return self._update_member_and_rebalance(group, member, req, "member changed its protocols")
        if group.state == GroupState.STABLE:
            if group.is_leader(member_id):
                # The leader rejoins to have the assignment redone (e.g. new partitions).
                return self._update_member_and_rebalance(group, member, req, "the leader rejoined")
            if not member.same_protocols(req.protocols):
                return self._update_member_and_rebalance(group, member, req, "member changed its protocols")
            self.arm_session(group, member)
            return self._join_response(group, member, with_members=False)
        return join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    def _rejoin_static_member(self, group: Group, req: JoinRequest) -> JoinResult | asyncio.Future[JoinResult]:
        """A static member came back with no member id (a restarted client): it takes over its old
        identity under a new member id, and the old id is fenced."""
        instance_id = req.group_instance_id
        assert instance_id is not None
        old_id = group.static_members[instance_id]
        old = group.members[old_id]
        new_id = f"{instance_id}-{uuid.uuid4()}"
        old_leader = group.leader_id
        _release(old, ErrorCode.FENCED_INSTANCE_ID)
        del group.members[old_id]
        old.member_id = new_id
        group.members[new_id] = old
        group.static_members[instance_id] = new_id
        group.pending_sync.discard(old_id)
        if old_leader == old_id:
            group.leader_id = new_id
        old_protocols, old_timeouts = old.protocols, (old.rebalance_timeout_ms, old.session_timeout_ms)
        old.protocols = list(req.protocols)
        old.rebalance_timeout_ms, old.session_timeout_ms = req.rebalance_timeout_ms, req.session_timeout_ms
        old.client_id, old.client_host = req.client_id, req.client_host
        log.info("static member %s of group %s rejoined as %s", instance_id, group.group_id, new_id)
        if group.state == GroupState.STABLE:
            if group.select_protocol() == group.protocol_name:
                error = self._store_group(group)
                if error != ErrorCode.NONE:
                    # Undo, so that the old identity still matches what is stored.
                    del group.members[new_id]
                    old.member_id, old.protocols = old_id, old_protocols
                    old.rebalance_timeout_ms, old.session_timeout_ms = old_timeouts
                    group.members[old_id] = old
                    group.static_members[instance_id] = old_id
                    group.leader_id = old_leader
                    self.arm_session(group, old)
                    return join_error(error)
                self.arm_session(group, old)
                is_leader = group.is_leader(new_id)
                response = self._join_response(group, old, with_members=is_leader)
                # The old leader id tells a leader that rejoined to keep its assignment (Kafka's trick
                # for clients before JoinGroup v9's skip_assignment).
                response["leader"] = old_leader or ""
                response["skip_assignment"] = is_leader
                return response
            return self._update_member_and_rebalance(group, old, req, "static member changed the group's protocol")
        future = self._await_join(old)
        self._prepare_rebalance(group, f"static member {instance_id} rejoined")
        self._maybe_complete_join(group)
        return future

    def _add_member_and_rebalance(self, group: Group, req: JoinRequest,
                                  member_id: str) -> asyncio.Future[JoinResult]:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host, req.rebalance_timeout_ms,
                        req.session_timeout_ms, req.protocol_type, list(req.protocols))
        group.members[member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        if group.protocol_type is None:
            group.protocol_type = req.protocol_type
        future = self._await_join(member)
        if group.state == GroupState.PREPARING_REBALANCE and group.initial_join_limit_ms >= 0:
            # Each newcomer during the initial delay holds the first rebalance back a little more.
            now = self.scheduler.now_ms()
            group.join_deadline_ms = min(now + self.config.initial_rebalance_delay_ms, group.initial_join_limit_ms)
        self._prepare_rebalance(group, f"adding new member {member_id}"
                                + (f" ({req.reason})" if req.reason else ""))
        self._maybe_complete_join(group)
        return future

    def _update_member_and_rebalance(self, group: Group, member: Member, req: JoinRequest,
                                     reason: str) -> asyncio.Future[JoinResult]:
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        future = self._await_join(member)
        self._prepare_rebalance(group, f"{reason}: {member.member_id}" + (f" ({req.reason})" if req.reason else ""))
        self._maybe_complete_join(group)
        return future

    def _await_join(self, member: Member) -> asyncio.Future[JoinResult]:
        # A retried JoinGroup replaces the one still waiting; the old one gets a retriable error.
        _resolve(member.join_future, join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_future = asyncio.get_running_loop().create_future()
        return member.join_future

    def _join_response(self, group: Group, member: Member, with_members: bool | None = None) -> JoinResult:
        if with_members is None:
            with_members = group.is_leader(member.member_id)
        members: list[JoinedMember] = []
        if with_members:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata_for(group.protocol_name)} for m in group.members.values()]
        return {"error_code": ErrorCode.NONE, "generation_id": group.generation_id,
                "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "leader": group.leader_id or "", "skip_assignment": False, "member_id": member.member_id,
                "members": members}

    # -----------------------------------------------------------------------------------------
    # Rebalance state machine.
    # -----------------------------------------------------------------------------------------

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state == GroupState.PREPARING_REBALANCE:
            return
        if group.state == GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = b""
                if member.sync_future is not None:
                    _resolve(member.sync_future, sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
                    member.sync_future = None
                    self.arm_session(group, member)  # its session restarts with the answer
        group.pending_sync.clear()
        now = self.scheduler.now_ms()
        first = group.state == GroupState.EMPTY and self.config.initial_rebalance_delay_ms > 0
        log.info("preparing to rebalance group %s in state %s with old generation %d: %s",
                 group.group_id, group.state.value, group.generation_id, reason)
        group.state = GroupState.PREPARING_REBALANCE
        group.current_state_timestamp = now
        rebalance_timeout = group.max_rebalance_timeout_ms()
        if first:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_join_limit_ms = now + max(rebalance_timeout, delay)
            group.join_deadline_ms = now + delay
        else:
            group.initial_join_limit_ms = -1
            group.join_deadline_ms = now + rebalance_timeout
        self._arm_rebalance_timer(group, self._on_join_deadline)

    def _arm_rebalance_timer(self, group: Group, action: Callable[[Group, int], None]) -> None:
        _cancel(group.rebalance_timer)
        generation = group.generation_id
        delay = group.join_deadline_ms - self.scheduler.now_ms()
        group.rebalance_timer = self.scheduler.call_later(delay, lambda: action(group, generation))

    def _on_join_deadline(self, group: Group, generation: int) -> None:
        group.rebalance_timer = None
        if self.groups.get(group.group_id) is not group or group.state != GroupState.PREPARING_REBALANCE:
            return
        now = self.scheduler.now_ms()
        if now < group.join_deadline_ms:
            self._arm_rebalance_timer(group, self._on_join_deadline)
            return
        if group.initial_join_limit_ms >= 0:
            # The initial delay is over; from here on it is an ordinary rebalance.
            limit = group.initial_join_limit_ms
            group.initial_join_limit_ms = -1
            if not group.all_members_joined() and now < limit:
                group.join_deadline_ms = limit
                self._arm_rebalance_timer(group, self._on_join_deadline)
                return
        self._complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        if (group.state == GroupState.PREPARING_REBALANCE and group.initial_join_limit_ms < 0
                and group.all_members_joined()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        _cancel(group.rebalance_timer)
        group.rebalance_timer = None
        for member in [m for m in group.members.values() if m.join_future is None]:
            log.info("member %s of group %s did not rejoin in time; removed", member.member_id, group.group_id)
            self._remove_member(group, member)
        for timer in group.pending_members.values():
            _cancel(timer)
        group.pending_members.clear()
        now = self.scheduler.now_ms()
        group.generation_id += 1
        group.current_state_timestamp = now
        if group.is_empty:
            group.state = GroupState.EMPTY
            group.protocol_name = None
            group.leader_id = None
            log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)
            error = self._store_group(group)
            if error != ErrorCode.NONE:
                log.warning("could not store empty group %s: %s", group.group_id, error.name)
            return
        group.protocol_name = group.select_protocol()
        group.protocol_type = next(iter(group.members.values())).protocol_type
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.state = GroupState.COMPLETING_REBALANCE
        group.pending_sync = set(group.members)
        REBALANCES.inc()
        log.info("stabilized group %s generation %d (%d members, protocol %s, leader %s)", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id)
        for member in group.members.values():
            future, member.join_future = member.join_future, None
            _resolve(future, self._join_response(group, member))
            self.arm_session(group, member)
        group.join_deadline_ms = now + group.max_rebalance_timeout_ms()
        self._arm_rebalance_timer(group, self._on_sync_deadline)

    def _on_sync_deadline(self, group: Group, generation: int) -> None:
        group.rebalance_timer = None
        if (self.groups.get(group.group_id) is not group or group.state != GroupState.COMPLETING_REBALANCE
                or group.generation_id != generation):
            return
        late = [group.members[m] for m in group.pending_sync if m in group.members]
        for member in late:
            log.info("member %s of group %s did not sync in time; removed", member.member_id, group.group_id)
            self._remove_member(group, member)
        self._prepare_rebalance(group, "members did not send SyncGroup in time")
        self._maybe_complete_join(group)

    def _remove_member(self, group: Group, member: Member, error: ErrorCode = ErrorCode.UNKNOWN_MEMBER_ID) -> None:
        group.members.pop(member.member_id, None)
        if member.group_instance_id is not None and group.static_members.get(member.group_instance_id) == member.member_id:
            del group.static_members[member.group_instance_id]
        group.pending_sync.discard(member.member_id)
        _release(member, error)
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _rebalance_after_removal(self, group: Group, reason: str) -> None:
        """Members were removed: a settled group rebalances, a rebalancing one may now complete."""
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        self._maybe_complete_join(group)

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is not None:
            log.info("pending member %s of group %s never came back; forgotten", member_id, group.group_id)
            self._maybe_complete_join(group)

    # -----------------------------------------------------------------------------------------
    # Sessions.
    # -----------------------------------------------------------------------------------------

    def arm_session(self, group: Group, member: Member) -> None:
        member.deadline_ms = self.scheduler.now_ms() + member.session_timeout_ms
        if member.session_timer is None:
            member.session_timer = self.scheduler.call_later(
                member.session_timeout_ms, lambda: self._check_session(group, member))

    def _check_session(self, group: Group, member: Member) -> None:
        member.session_timer = None
        if self.groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
            return
        if member.join_future is not None or member.sync_future is not None:
            return  # waiting on the coordinator itself; the rebalance deadlines bound that
        remaining = member.deadline_ms - self.scheduler.now_ms()
        if remaining > 0:
            member.session_timer = self.scheduler.call_later(remaining, lambda: self._check_session(group, member))
            return
        log.info("member %s of group %s timed out (no heartbeat for %d ms); removed",
                 member.member_id, group.group_id, member.session_timeout_ms)
        self._remove_member(group, member)
        self._rebalance_after_removal(group, f"member {member.member_id} session timed out")

    def member_error(self, group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is not None and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    # -----------------------------------------------------------------------------------------
    # SyncGroup, Heartbeat, LeaveGroup.
    # -----------------------------------------------------------------------------------------

    async def sync_group(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: Iterable[tuple[str, bytes]]) -> SyncResult:
        result = self._sync(group_id, generation_id, member_id, instance_id, protocol_type, protocol_name,
                            assignments)
        if isinstance(result, dict):
            return result
        return await _wait_for(result, sync_error(ErrorCode.REBALANCE_IN_PROGRESS))

    def _sync(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
              protocol_type: str | None, protocol_name: str | None,
              assignments: Iterable[tuple[str, bytes]]) -> SyncResult | asyncio.Future[SyncResult]:
        if not group_id:
            return sync_error(ErrorCode.INVALID_GROUP_ID)
        error = self.partition_error(group_id)
        if error != ErrorCode.NONE:
            return sync_error(error)
        if self.consumer_groups.has_members(group_id):
            return self.consumer_groups.classic_sync(group_id, generation_id, member_id, protocol_type, protocol_name)
        group = self.groups.get(group_id)
        if group is None:
            return sync_error(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state == GroupState.DEAD:
            return sync_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = self.member_error(group, member_id, instance_id)
        if error != ErrorCode.NONE:
            return sync_error(error)
        if generation_id != group.generation_id:
            return sync_error(ErrorCode.ILLEGAL_GENERATION)
        if ((protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)):
            return sync_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        if group.state == GroupState.PREPARING_REBALANCE:
            return sync_error(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state == GroupState.STABLE:
            self.arm_session(group, member)
            return self._sync_response(group, member)
        if group.state != GroupState.COMPLETING_REBALANCE:
            return sync_error(ErrorCode.UNKNOWN_MEMBER_ID)
        group.pending_sync.discard(member_id)
        _resolve(member.sync_future, sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_future = future
        if group.is_leader(member_id):
            given = {m: bytes(a) for m, a in assignments}
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            error = self._store_group(group)
            if error != ErrorCode.NONE:
                log.warning("could not store the assignment of group %s generation %d: %s",
                            group.group_id, group.generation_id, error.name)
                for m in group.members.values():
                    m.assignment = b""
                    _resolve(m.sync_future, sync_error(error))
                    m.sync_future = None
                    self.arm_session(group, m)
                self._prepare_rebalance(group, "the assignment could not be stored")
                return future
            _cancel(group.rebalance_timer)
            group.rebalance_timer = None
            group.state = GroupState.STABLE
            group.current_state_timestamp = self.scheduler.now_ms()
            for m in group.members.values():
                waiting, m.sync_future = m.sync_future, None
                _resolve(waiting, self._sync_response(group, m))
                self.arm_session(group, m)
        return future

    def _sync_response(self, group: Group, member: Member) -> SyncResult:
        return {"error_code": ErrorCode.NONE, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol_name, "assignment": member.assignment}

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        error = self.partition_error(group_id)
        if error != ErrorCode.NONE:
            return error
        if self.consumer_groups.has_members(group_id):
            return self.consumer_groups.classic_heartbeat(group_id, generation_id, member_id)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state == GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.member_error(group, member_id, instance_id)
        if error != ErrorCode.NONE:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self.arm_session(group, group.members[member_id])
        if group.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, group_id: str,
                    leaving: Sequence[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members given as (member id, group instance id); returns the request's error and
        one error per member."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        error = self.partition_error(group_id)
        if error != ErrorCode.NONE:
            return error, []
        if self.consumer_groups.has_members(group_id):
            return ErrorCode.NONE, self.consumer_groups.classic_leave(group_id, leaving)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.state == GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results: list[ErrorCode] = []
        removed = False
        for member_id, instance_id in leaving:
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    results.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            elif member_id in group.pending_members:
                _cancel(group.pending_members.pop(member_id))
                results.append(ErrorCode.NONE)
                removed = True
                continue
            member = group.members.get(member_id)
            if member is None:
                results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            log.info("member %s left group %s", member_id, group_id)
            self._remove_member(group, member)
            results.append(ErrorCode.NONE)
            removed = True
        if removed:
            self._rebalance_after_removal(group, "members left the group")
        return ErrorCode.NONE, results

    # -----------------------------------------------------------------------------------------
    # Listing, describing, deleting groups.
    # -----------------------------------------------------------------------------------------

    def list_groups(self, states: Sequence[str] = (), types: Sequence[str] = ()) -> list[GroupListing]:
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        consumer = self.consumer_groups.list_groups(self.runtime.loaded_partitions, wanted_states, wanted_types)
        if wanted_types and CLASSIC_GROUP_TYPE not in wanted_types:
            return consumer
        return consumer + [{"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state.value,
                            "group_type": CLASSIC_GROUP_TYPE}
                           for g in self.groups.values()
                           if g.state != GroupState.DEAD and g.partition in self.runtime.loaded_partitions
                           and not self.consumer_groups.is_consumer_group(g.group_id)
                           and (not wanted_states or g.state.value.lower() in wanted_states)]

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupDescription | None]:
        """(NONE, description), (NONE, None) for an unknown group, or (error, None)."""
        error = self.partition_error(group_id)
        if error != ErrorCode.NONE:
            return error, None
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD or self.consumer_groups.is_consumer_group(group_id):
            return ErrorCode.NONE, None  # a consumer-protocol group is described by ConsumerGroupDescribe
        stable = group.state == GroupState.STABLE
        members: list[DescribedMember] = [
                   {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata_for(group.protocol_name) if stable else b"",
                    "member_assignment": m.assignment if stable else b""}
                   for m in group.members.values()]
        return ErrorCode.NONE, {"group_id": group_id, "group_state": group.state.value,
                                "protocol_type": group.protocol_type or "",
                                "protocol_data": group.protocol_name or "", "members": members}

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            error = self.partition_error(group_id)
            if error != ErrorCode.NONE:
                results[group_id] = error
                continue
            group = self.groups.get(group_id)
            consumer_error = self.consumer_groups.delete(group_id)
            if consumer_error is not None:
                if consumer_error == ErrorCode.NONE and group is not None:
                    consumer_error = self.delete_group(group)  # its committed offsets
                results[group_id] = consumer_error
            elif group is None or group.state == GroupState.DEAD:
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.state != GroupState.EMPTY:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                results[group_id] = self.delete_group(group)
        return results

    def delete_group(self, group: Group) -> ErrorCode:
        """Tombstone the group and its committed offsets; once written, the group is gone."""
        records: list[KeyValue] = [(encode_offset_key(group.group_id, t, p), None) for t, p in group.offsets]
        records.append((encode_group_key(group.group_id), None))

        def forget() -> None:
            log.info("group %s deleted with %d committed offset(s)", group.group_id, len(group.offsets))
            self.unload_group(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return self.runtime.write(group.partition, records, forget)

    # -----------------------------------------------------------------------------------------
    # Persistence of group metadata.
    # -----------------------------------------------------------------------------------------

    def _group_value(self, group: Group) -> bytes:
        return encode_group_value({
            "protocol_type": group.protocol_type or "",
            "generation": group.generation_id,
            "protocol": group.protocol_name,
            "leader": group.leader_id,
            "current_state_timestamp": group.current_state_timestamp,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "rebalance_timeout": m.rebalance_timeout_ms, "session_timeout": m.session_timeout_ms,
                         "subscription": m.metadata_for(group.protocol_name), "assignment": m.assignment}
                        for m in group.members.values()],
        })

    def _store_group(self, group: Group) -> ErrorCode:
        """Write the group's metadata as it is in memory (the caller undoes its change on an error)."""
        return self.runtime.write(group.partition, [(encode_group_key(group.group_id), self._group_value(group))])


def _cancel(timer: TimerHandle | None) -> None:
    if timer is not None:
        timer.cancel()


def _release(member: Member, error: ErrorCode) -> None:
    """Stop the member's session timer and answer its waiting JoinGroup and SyncGroup with `error`."""
    _cancel(member.session_timer)
    member.session_timer = None
    _resolve(member.join_future, join_error(error, member.member_id))
    _resolve(member.sync_future, sync_error(error))
    member.join_future = member.sync_future = None
