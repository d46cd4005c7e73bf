"""KIP-848 consumer groups: the group state machine, reconciliation, and their coordinator.

A consumer group has a group epoch (bumped when its members, their subscriptions or the
subscribed topics' partitions change), a target assignment computed by a server-side
assignor for one group epoch (the assignment epoch), and per member a current assignment
with its member epoch. A member converges on its target one heartbeat at a time:

- it first revokes what its target no longer holds (UNREVOKED_PARTITIONS, its epoch kept);
- once its heartbeat's owned partitions show the revocation done, it moves to the target
  epoch and gets the target's partitions that no other member owns (still holds or is
  still revoking); the rest it gets on a later heartbeat (UNRELEASED_PARTITIONS).

So a partition has one owner at a time. `ConsumerGroup` is only the state the records of
consumer_records.py describe, changed only by `replay`: the coordinator writes the records
of a change to __consumer_offsets first and replays them after, the same code a coordinator
taking over the partition runs when it loads. `reconcile` and the assignors are pure
functions. `ConsumerGroups` (the coordinator part) owns every group, their session and
rebalance timers, and runs ConsumerGroupHeartbeat; event-loop thread only.

Regular expressions are RE2/J's syntax in Kafka; Python's `re` reads the common patterns
(classes, alternation, repetition, anchors) the same way, and like Kafka the whole topic
name must match. Internal topics never match a regular expression.
"""

from __future__ import annotations

import copy
import enum
import io
import logging
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from minikafka.group import consumer_records as records
from minikafka.group.assignors import ASSIGNORS, AssignmentSpec, assign
from minikafka.group.group import Group, GroupState, Member, TimerHandle
from minikafka.group.results import GroupListing, JoinResult, SyncResult
from minikafka.group.schemas import (
    CONSUMER_ASSIGNMENT,
    CONSUMER_PROTOCOL_TYPE,
    CONSUMER_SUBSCRIPTION,
    RecordFormatError,
    encode_group_key,
)
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from minikafka.group.coordinator import GroupCoordinator
    from minikafka.group.membership import JoinRequest

log = logging.getLogger(__name__)

TopicId = uuid.UUID
Partitions = Mapping[TopicId, frozenset[int]]
KeyValue = tuple[bytes, bytes | None]
CONSUMER_GROUP_TYPE = "consumer"
LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2
EMPTY: Partitions = {}


class MemberState(enum.IntEnum):
    """Kafka's MemberState, valued as the CurrentMemberAssignment record stores it."""

    UNKNOWN = -1
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2


class ConsumerGroupState(enum.Enum):
    """Kafka's ConsumerGroupState, valued with the names ListGroups and ConsumerGroupDescribe report."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class TopicInfo:
    topic_id: TopicId
    name: str
    partitions: int


@dataclass(frozen=True)
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # A member speaking the classic protocol (JoinGroup/SyncGroup/Heartbeat), as after an online
    # upgrade: its session timeout and the protocols (assignor name, subscription) it joined with.
    classic_session_timeout_ms: int = -1
    classic_protocols: tuple[tuple[str, bytes], ...] | None = None

    @property
    def is_classic(self) -> bool:
        return self.classic_protocols is not None


@dataclass(frozen=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Partitions
    pending_revocation: Partitions


NEW_MEMBER = CurrentAssignment(0, -1, MemberState.STABLE, EMPTY, EMPTY)


def _count(partitions: Partitions) -> int:
    return sum(len(p) for p in partitions.values())


def _normalise(partitions: Mapping[TopicId, Iterable[int]]) -> dict[TopicId, frozenset[int]]:
    return {topic: frozenset(parts) for topic, parts in partitions.items() if parts}


def _is_subset(owned: Partitions, of: Partitions) -> bool:
    return all(parts <= of.get(topic, frozenset()) for topic, parts in owned.items())


def _overlaps(owned: Partitions, other: Partitions) -> bool:
    return any(parts & other.get(topic, frozenset()) for topic, parts in owned.items())


def reconcile(current: CurrentAssignment, target_epoch: int, target: Partitions, owned: Partitions | None,
              owned_by_other: Any) -> CurrentAssignment:
    """The member's next current assignment (Kafka's CurrentAssignmentBuilder).

    `owned` is what the member's heartbeat says it owns (None: not sent, so a revocation
    cannot be taken as done); `owned_by_other(topic_id, partition)` whether
    another member still holds or is still revoking that partition."""
    if current.state == MemberState.UNREVOKED_PARTITIONS:
        if owned is None or _overlaps(owned, current.pending_revocation):
            return current
        return _next(current.member_epoch, current.assigned, target_epoch, target, owned, owned_by_other)
    if current.state == MemberState.UNRELEASED_PARTITIONS or current.member_epoch != target_epoch:
        return _next(current.member_epoch, current.assigned, target_epoch, target, owned, owned_by_other)
    return current


def _next(member_epoch: int, assigned: Partitions, target_epoch: int, target: Partitions, owned: Partitions | None,
          owned_by_other: Any) -> CurrentAssignment:
    kept: dict[TopicId, set[int]] = {}
    revoking: dict[TopicId, set[int]] = {}
    unreleased = False
    for topic, parts in assigned.items():
        wanted = target.get(topic, frozenset())
        kept[topic] = set(parts & wanted)
        revoking[topic] = set(parts - wanted)
    # A member that says it no longer owns what it must give up (an eager classic member revokes
    # everything before it rejoins) has nothing left to revoke.
    if any(revoking.values()) and (owned is None or _overlaps(owned, _normalise(revoking))):
        return CurrentAssignment(member_epoch, member_epoch, MemberState.UNREVOKED_PARTITIONS,
                                 _normalise(kept), _normalise(revoking))
    for topic, wanted in target.items():
        for partition in wanted - assigned.get(topic, frozenset()):
            if owned_by_other(topic, partition):
                unreleased = True
            else:
                kept.setdefault(topic, set()).add(partition)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return CurrentAssignment(target_epoch, member_epoch, state, _normalise(kept), EMPTY)


class ConsumerGroup:
    """The state of one consumer group, exactly what its records in __consumer_offsets say.

    Changed only by `replay`; `ConsumerGroups` copies it, replays a change's records on the
    copy, writes them and keeps the copy once they are stored."""

    def __init__(self, group_id: str, partition: int) -> None:
        self.group_id = group_id
        self.partition = partition  # of __consumer_offsets
        self.epoch = 0
        self.exists = False  # a ConsumerGroupMetadata record is stored (no tombstone after it)
        self.topics: dict[TopicId, TopicInfo] = {}  # the subscribed topics' metadata the target was computed on
        self.members: dict[str, MemberMetadata] = {}
        self.target_epoch = 0
        self.targets: dict[str, Partitions] = {}
        self.current: dict[str, CurrentAssignment] = {}
        self.owners: dict[tuple[TopicId, int], str] = {}  # partition -> member holding or revoking it

    def copy(self) -> ConsumerGroup:
        clone = copy.copy(self)
        for name in ("topics", "members", "targets", "current", "owners"):
            setattr(clone, name, dict(getattr(self, name)))
        return clone

    def replay(self, record: records.ConsumerRecord) -> None:
        kind, member_id, value = record.record_type, record.member_id, record.value
        if kind == records.METADATA:
            self.exists = value is not None
            self.epoch = value.epoch if value is not None else 0
        elif kind == records.PARTITION_METADATA:
            self.topics = {} if value is None else {
                t.topic_id: TopicInfo(t.topic_id, t.topic_name, t.num_partitions) for t in value.topics}
        elif kind == records.MEMBER_METADATA:
            assert member_id is not None
            if value is None:
                self.members.pop(member_id, None)
            else:
                classic = value.classic_member_metadata
                self.members[member_id] = MemberMetadata(
                    value.instance_id, value.rack_id, value.client_id, value.client_host,
                    tuple(value.subscribed_topic_names), value.subscribed_topic_regex, value.rebalance_timeout_ms,
                    value.server_assignor,
                    classic.session_timeout_ms if classic is not None else -1,
                    None if classic is None else tuple((p.name, bytes(p.metadata)) for p in classic.supported_protocols))
        elif kind == records.TARGET_METADATA:
            self.target_epoch = value.assignment_epoch if value is not None else 0
        elif kind == records.TARGET_MEMBER:
            assert member_id is not None
            if value is None:
                self.targets.pop(member_id, None)
            else:
                self.targets[member_id] = records.from_topic_partitions(value.topic_partitions)
        elif kind == records.CURRENT_MEMBER:
            assert member_id is not None
            for tp in [tp for tp, owner in self.owners.items() if owner == member_id]:
                del self.owners[tp]
            if value is None:
                self.current.pop(member_id, None)
                return
            current = CurrentAssignment(
                value.member_epoch, value.previous_member_epoch, MemberState(value.state),
                records.from_topic_partitions(value.assigned_partitions),
                records.from_topic_partitions(value.partitions_pending_revocation))
            self.current[member_id] = current
            for partitions in (current.assigned, current.pending_revocation):
                for topic, parts in partitions.items():
                    for partition in parts:
                        self.owners[(topic, partition)] = member_id

    # Queries.

    def member_assignment(self, member_id: str) -> CurrentAssignment:
        return self.current.get(member_id, NEW_MEMBER)

    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.target_epoch < self.epoch:
            return ConsumerGroupState.ASSIGNING
        for member_id in self.members:
            current = self.member_assignment(member_id)
            if current.state != MemberState.STABLE or current.member_epoch != self.target_epoch:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def static_member(self, instance_id: str) -> str | None:
        return next((mid for mid, m in self.members.items() if m.instance_id == instance_id), None)

    def topic_names(self) -> dict[str, TopicInfo]:
        return {info.name: info for info in self.topics.values()}

    def subscribed_topic_names(self) -> set[str]:
        """Names of the topics some member subscribes to (by name or through a regex, as far as
        the group's topic metadata knows them)."""
        known = set(self.topic_names())
        names: set[str] = set()
        for member in self.members.values():
            names |= subscribed_names(member, known)
        return names


def compile_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def subscribed_names(member: MemberMetadata, topic_names: Iterable[str]) -> set[str]:
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        try:
            pattern = compile_regex(member.subscribed_topic_regex)
        except re.error:
            return names
        names |= {name for name in topic_names if not name.startswith("__") and pattern.fullmatch(name)}
    return names


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5000
    assignors: tuple[str, ...] = ("uniform", "range")
    max_size: int = 2**31 - 1
    enabled: bool = True  # "consumer" in group.coordinator.rebalance.protocols
    migration_policy: str = "bidirectional"  # group.consumer.migration.policy

    @classmethod
    def from_broker(cls, config: Any) -> ConsumerGroupConfig:
        return cls(
            session_timeout_ms=config["group.consumer.session.timeout.ms"],
            heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
            assignors=tuple(config["group.consumer.assignors"]),
            max_size=config["group.consumer.max.size"],
            enabled="consumer" in config["group.coordinator.rebalance.protocols"],
            migration_policy=config["group.consumer.migration.policy"],
        )


@dataclass(frozen=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeat, as the handler read it off the wire (None: unchanged)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(frozen=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


@dataclass
class _Change:
    """A change being made to a group: its copy with the records replayed so far."""

    group: ConsumerGroup
    records: list[KeyValue] = field(default_factory=list)

    def write(self, kind: int, member_id: str | None, value: Mapping[str, Any] | None) -> None:
        key, encoded = records.encode(kind, self.group.group_id, member_id, value)
        self.records.append((key, encoded))
        self.group.replay(records.decode(key, encoded))


def _member_value(member: MemberMetadata) -> dict[str, Any]:
    return {"instance_id": member.instance_id, "rack_id": member.rack_id, "client_id": member.client_id,
            "client_host": member.client_host, "subscribed_topic_names": list(member.subscribed_topic_names),
            "subscribed_topic_regex": member.subscribed_topic_regex,
            "rebalance_timeout_ms": member.rebalance_timeout_ms, "server_assignor": member.server_assignor,
            "classic_member_metadata": None if member.classic_protocols is None else {
                "session_timeout_ms": member.classic_session_timeout_ms,
                "supported_protocols": [{"name": name, "metadata": metadata}
                                        for name, metadata in member.classic_protocols]}}


def _current_value(current: CurrentAssignment) -> dict[str, Any]:
    return {"member_epoch": current.member_epoch, "previous_member_epoch": current.previous_member_epoch,
            "state": int(current.state), "assigned_partitions": records.topic_partitions(current.assigned),
            "partitions_pending_revocation": records.topic_partitions(current.pending_revocation)}


class _Refused(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class ConsumerGroups:
    """The consumer-protocol groups of the __consumer_offsets partitions the group coordinator
    leads, and their timers. Committed offsets stay with the GroupCoordinator (its Group per
    group id), which asks `check_commit` whether a commit comes from a current member."""

    def __init__(self, config: ConsumerGroupConfig, coordinator: GroupCoordinator,
                 topics: Callable[[], Mapping[str, TopicInfo]] | None = None) -> None:
        self.config = config
        self.coordinator = coordinator
        # The broker's topics by name, for classic members (whose JoinGroup names topics, not ids).
        self.topics = topics or dict
        self.groups: dict[str, ConsumerGroup] = {}
        self._loading: dict[int, dict[str, ConsumerGroup]] = {}
        self._session_timers: dict[tuple[str, str], TimerHandle] = {}
        self._rebalance_timers: dict[tuple[str, str], tuple[int, TimerHandle]] = {}

    # Loading and unloading with the partitions of __consumer_offsets.

    def replay_loaded(self, partition: int, key: bytes, value: bytes | None) -> None:
        """One record of a partition being loaded; RecordFormatError if it does not decode."""
        record = records.decode(key, value)
        if record.record_type == records.REGULAR_EXPRESSION:
            return
        loading = self._loading.setdefault(partition, {})
        group = loading.get(record.group_id)
        if group is None:
            group = loading[record.group_id] = ConsumerGroup(record.group_id, partition)
        group.replay(record)
        if record.record_type == records.METADATA and value is None:
            del loading[record.group_id]  # deleted

    def finish_load(self, partition: int) -> int:
        """Install the groups the partition's records left; each member's session starts now,
        as Kafka does on load, so members that are gone expire."""
        loaded = self._loading.pop(partition, {})
        for group_id, group in loaded.items():
            if not group.exists:
                continue
            self.groups[group_id] = group
            for member_id in group.members:
                self._arm_session(group, member_id)
        return len(loaded)

    def unload_partition(self, partition: int) -> None:
        for group in [g for g in self.groups.values() if g.partition == partition]:
            self._drop(group.group_id)

    def shutdown(self) -> None:
        for group_id in list(self.groups):
            self._drop(group_id)

    def _drop(self, group_id: str) -> None:
        self.groups.pop(group_id, None)
        for key in [k for k in self._session_timers if k[0] == group_id]:
            self._session_timers.pop(key).cancel()
        for key in [k for k in self._rebalance_timers if k[0] == group_id]:
            self._rebalance_timers.pop(key)[1].cancel()

    # Queries the classic coordinator makes.

    def is_consumer_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def check_commit(self, group_id: str, member_id: str, member_epoch: int) -> ErrorCode | None:
        """None if the group is not a consumer group; else whether this commit (OffsetCommit v9+'s
        member epoch, or a transactional commit's generation) may go through (Kafka's
        ConsumerGroup.validateOffsetCommit)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not group.members:
            return ErrorCode.NONE  # an admin or a consumer without group management
        return self._check_member(group, member_id, member_epoch)

    def check_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """None if the group is not a consumer group; else whether a member may read its offsets
        (OffsetFetch v9+ names the member and its epoch; an admin or a consumer without group
        management names neither), as Kafka's ConsumerGroup.validateOffsetFetch."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        return self._check_member(group, member_id, member_epoch)

    @staticmethod
    def _check_member(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode:
        """A member's request against its epoch here: a classic member's generation must match;
        a consumer-protocol member behind is stale (it catches up by heartbeat), one ahead of
        what the coordinator knows is fenced (Kafka's validateMemberEpoch)."""
        if member_id is None or member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        expected = group.member_assignment(member_id).member_epoch
        if group.members[member_id].is_classic:
            return ErrorCode.NONE if member_epoch == expected else ErrorCode.ILLEGAL_GENERATION
        if member_epoch > expected:
            return ErrorCode.FENCED_MEMBER_EPOCH
        if member_epoch < expected:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def list_groups(self, loaded: AbstractSet[int], states: set[str], types: set[str]) -> list[GroupListing]:
        """ListGroups' entries of the consumer groups (`states` and `types` lower-case filters, empty
        for all)."""
        if types and CONSUMER_GROUP_TYPE not in types:
            return []
        listed: list[GroupListing] = []
        for group in self.groups.values():
            state = group.state().value
            if group.partition in loaded and (not states or state.lower() in states):
                listed.append({"group_id": group.group_id, "protocol_type": CONSUMER_PROTOCOL_TYPE,
                               "group_state": state, "group_type": CONSUMER_GROUP_TYPE})
        return listed

    def delete(self, group_id: str) -> ErrorCode | None:
        """DeleteGroups of a consumer group (None: not one). Only an empty group goes; its
        offsets go with the GroupCoordinator's own deletion."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        change = _Change(group.copy())
        self._tombstone_group(change)
        error = self.coordinator.runtime.write(group.partition, change.records)
        if error == ErrorCode.NONE:
            self._drop(group_id)
        return error

    def delete_empty(self, has_offsets: Callable[[str], bool]) -> None:
        """Delete every group left without members or committed offsets (with the offsets' expiry,
        as Kafka cleans up groups)."""
        for group_id, group in list(self.groups.items()):
            if group.members or has_offsets(group_id) or group.partition not in self.coordinator.loaded_partitions:
                continue
            if self.delete(group_id) == ErrorCode.NONE:
                log.info("consumer group %s deleted: no members and no committed offsets", group_id)

    def _tombstone_group(self, change: _Change) -> None:
        group = change.group
        for member_id in list(group.members):
            self._tombstone_member(change, member_id)
        change.write(records.TARGET_METADATA, None, None)
        change.write(records.PARTITION_METADATA, None, None)
        change.write(records.METADATA, None, None)

    def convert_empty_to_classic(self, group_id: str) -> ErrorCode:
        """A classic JoinGroup for an empty consumer group: the group becomes classic (Kafka
        converts an empty group to the protocol its next member speaks)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE
        if group.members:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        error = self.delete(group_id)
        if error == ErrorCode.NONE:
            log.info("empty consumer group %s converted to a classic group", group_id)
        return error or ErrorCode.NONE

    # ConsumerGroupHeartbeat.

    def heartbeat(self, req: HeartbeatRequest, topics: Mapping[str, TopicInfo]) -> HeartbeatResult:
        """One heartbeat; `topics` is the broker's topic metadata by name. Writes the change's
        records; the caller waits for them to be replicated before answering."""
        if not self.config.enabled:
            return HeartbeatResult(ErrorCode.UNSUPPORTED_VERSION, "the consumer group protocol is not enabled "
                                   "(group.coordinator.rebalance.protocols)")
        try:
            self._validate(req)
            error = self.coordinator.partition_error(req.group_id)
            if error != ErrorCode.NONE:
                return HeartbeatResult(error)
            return self._heartbeat(req, topics)
        except _Refused as refused:
            return HeartbeatResult(refused.error, refused.message)

    def _validate(self, req: HeartbeatRequest) -> None:
        def invalid(message: str) -> _Refused:
            return _Refused(ErrorCode.INVALID_REQUEST, message)

        if not req.group_id:
            raise invalid("GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id:
            raise invalid("InstanceId can't be empty.")
        if req.api_version >= 1 and not req.member_id:
            raise invalid("MemberId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or req.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif req.member_epoch == LEAVE_STATIC_EPOCH:
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_STATIC_EPOCH:
            raise invalid(f"MemberEpoch is invalid: {req.member_epoch}")
        if req.subscribed_topic_regex is not None:
            try:
                compile_regex(req.subscribed_topic_regex)
            except re.error as exc:
                raise _Refused(ErrorCode.INVALID_REGULAR_EXPRESSION,
                               f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular "
                               f"expression: {exc}.") from exc
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            raise _Refused(ErrorCode.UNSUPPORTED_ASSIGNOR,
                           f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                           f"{', '.join(self.config.assignors)}.")

    def _group_for(self, req: HeartbeatRequest) -> tuple[ConsumerGroup, list[KeyValue], Group | None]:
        """The group, the records that take the place of a classic group of the same id, and
        that classic group when its members are to be upgraded with it."""
        group = self.groups.get(req.group_id)
        if group is not None:
            return group, [], None
        classic = self.coordinator.groups.get(req.group_id)
        extra: list[KeyValue] = []
        if classic is not None and classic.state != GroupState.DEAD:
            if classic.state != GroupState.EMPTY:
                if (req.member_epoch != 0 or classic.protocol_type != CONSUMER_PROTOCOL_TYPE
                        or self.config.migration_policy not in ("upgrade", "bidirectional")):
                    raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
                if len(classic.members) >= self.config.max_size:
                    raise _Refused(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                   f"The consumer group has reached its maximum capacity of {self.config.max_size} "
                                   "members.")
                extra.append((encode_group_key(req.group_id), None))
                return ConsumerGroup(req.group_id, classic.partition), extra, classic
            if classic.protocol_type is not None:
                # An empty classic group becomes a consumer group; its offsets stay.
                extra.append((encode_group_key(req.group_id), None))
        if req.member_epoch != 0:
            # Kafka answers so (not GROUP_ID_NOT_FOUND): the member rejoins, e.g. after a failover
            # that lost the group's last records.
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Consumer group {req.group_id} not found.")
        return ConsumerGroup(req.group_id, self.coordinator.partition_for(req.group_id)), extra, None

    def _heartbeat(self, req: HeartbeatRequest, topics: Mapping[str, TopicInfo]) -> HeartbeatResult:
        group, extra, upgraded = self._group_for(req)
        change = _Change(group.copy())
        change.records.extend(extra)
        if upgraded is not None:
            self._take_over_classic_members(change, upgraded, topics)
        member_id = req.member_id or f"{uuid.uuid4()}"
        if req.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            return self._leave(group, change, req)
        full_request = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None and req.owned is not None)
        bump = False
        if not change.group.exists:
            change.write(records.METADATA, None, {"epoch": 0})
        if req.member_epoch == 0:
            bump |= self._join(change, req, member_id)
        else:
            self._check_epoch(change.group, member_id, req)
        old = change.group.members.get(member_id) or MemberMetadata(
            req.instance_id, req.rack_id, req.client_id, req.client_host, (), None, req.rebalance_timeout_ms, None)
        updated = replace(
            old,
            instance_id=req.instance_id if req.instance_id is not None else old.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else old.rack_id,
            client_id=req.client_id, client_host=req.client_host,
            subscribed_topic_names=(tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None
                                    else old.subscribed_topic_names),
            subscribed_topic_regex=(req.subscribed_topic_regex or None if req.subscribed_topic_regex is not None
                                    else old.subscribed_topic_regex),
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else old.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else old.server_assignor)
        if updated != old or member_id not in change.group.members:
            change.write(records.MEMBER_METADATA, member_id, _member_value(updated))
            bump |= (updated.subscribed_topic_names, updated.subscribed_topic_regex, updated.server_assignor) != (
                old.subscribed_topic_names, old.subscribed_topic_regex, old.server_assignor)
        bump |= self._refresh_topics(change, topics)
        if bump:
            change.write(records.METADATA, None, {"epoch": change.group.epoch + 1})
        self._update_target(change)
        staged = change.group
        before = staged.member_assignment(member_id)
        after = reconcile(before, staged.target_epoch, staged.targets.get(member_id, EMPTY), req.owned,
                          lambda topic, partition: staged.owners.get((topic, partition), member_id) != member_id)
        if after != before or member_id not in group.current:
            change.write(records.CURRENT_MEMBER, member_id, _current_value(after))
        error = self._store(change)
        if error != ErrorCode.NONE:
            return HeartbeatResult(error)
        if extra:
            self.coordinator.detach_classic_members(req.group_id)
            if upgraded is not None:
                log.info("classic group %s upgraded online to a consumer group with its %d member(s), as %s joined "
                         "with the consumer protocol", req.group_id, len(upgraded.members), member_id)
                for other in staged.members:
                    if other != member_id:
                        self._arm_session(staged, other)
            else:
                log.info("empty classic group %s converted to a consumer group", req.group_id)
        self._arm_session(staged, member_id)
        self._arm_rebalance(staged, member_id, after)
        if after.member_epoch != before.member_epoch or after.state != before.state:
            log.info("member %s of consumer group %s: epoch %d -> %d, %s, %d partition(s) assigned, %d to revoke",
                     member_id, req.group_id, before.member_epoch, after.member_epoch, after.state.name,
                     _count(after.assigned), _count(after.pending_revocation))
        send = full_request or after.assigned != before.assigned
        return HeartbeatResult(ErrorCode.NONE, None, member_id, after.member_epoch, self.config.heartbeat_interval_ms,
                               after.assigned if send else None)

    def _take_over_classic_members(self, change: _Change, classic: Group, topics: Mapping[str, TopicInfo]) -> None:
        """Kafka's online upgrade: the classic group's members become classic members of the
        consumer group, each keeping what its last assignment gave it, at the group's generation."""
        generation = classic.generation_id
        change.write(records.METADATA, None, {"epoch": generation})
        for member in classic.members.values():
            protocols = tuple((name, bytes(metadata)) for name, metadata in member.protocols)
            names, _ = _read_subscription(member.metadata_for(classic.protocol_name), topics)
            assigned = _read_assignment(member.assignment, topics)
            change.write(records.MEMBER_METADATA, member.member_id, _member_value(MemberMetadata(
                member.group_instance_id, None, member.client_id, member.client_host, names, None,
                member.rebalance_timeout_ms, None, member.session_timeout_ms, protocols)))
            change.write(records.TARGET_MEMBER, member.member_id, {"topic_partitions": records.topic_partitions(assigned)})
            change.write(records.CURRENT_MEMBER, member.member_id, _current_value(
                CurrentAssignment(generation, generation - 1, MemberState.STABLE, assigned, EMPTY)))
        self._refresh_topics(change, topics)
        change.write(records.TARGET_METADATA, None, {"assignment_epoch": generation})

    def _join(self, change: _Change, req: HeartbeatRequest, member_id: str) -> bool:
        """A member joins (epoch 0); True if this changes the group's membership."""
        group = change.group
        if member_id in group.members:
            return False  # it rejoins (e.g. after being fenced): it keeps what it has
        if req.instance_id is not None:
            previous = group.static_member(req.instance_id)
            if previous is not None:
                if group.member_assignment(previous).member_epoch != LEAVE_STATIC_EPOCH:
                    raise _Refused(ErrorCode.UNRELEASED_INSTANCE_ID,
                                   f"Static member {previous} with instance id {req.instance_id} is present until "
                                   "it leaves or expires.")
                # A restarted static member takes over its old identity and assignment: no rebalance.
                old_meta = group.members[previous]
                old_target = group.targets.get(previous, EMPTY)
                old_current = group.member_assignment(previous)
                self._tombstone_member(change, previous)
                self._cancel_timers(group.group_id, previous)
                change.write(records.MEMBER_METADATA, member_id, _member_value(old_meta))
                change.write(records.TARGET_MEMBER, member_id,
                             {"topic_partitions": records.topic_partitions(old_target)})
                epoch = group.target_epoch if old_current.previous_member_epoch < 0 else old_current.previous_member_epoch
                change.write(records.CURRENT_MEMBER, member_id,
                             _current_value(replace(old_current, member_epoch=epoch)))
                log.info("static member %s of consumer group %s rejoined as %s", req.instance_id, group.group_id,
                         member_id)
                return False
        if len(group.members) >= self.config.max_size:
            raise _Refused(ErrorCode.GROUP_MAX_SIZE_REACHED,
                           f"The consumer group has reached its maximum capacity of {self.config.max_size} members.")
        log.info("member %s joined consumer group %s", member_id, group.group_id)
        return True

    def _check_epoch(self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest) -> None:
        if member_id not in group.members:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID,
                           f"Member {member_id} is not a member of group {group.group_id}.")
        current = group.member_assignment(member_id)
        received = req.member_epoch
        if received == current.member_epoch:
            return
        # A member that missed the answer moving it to a new epoch may come back with the
        # previous one, as long as it owns nothing it was not given.
        if received < current.member_epoch and received == current.previous_member_epoch and (
                req.owned is not None and _is_subset(req.owned, current.assigned)):
            return
        raise _Refused(ErrorCode.FENCED_MEMBER_EPOCH,
                       f"The consumer group member has a {'greater' if received > current.member_epoch else 'smaller'}"
                       f" member epoch ({received}) than the one known by the group coordinator "
                       f"({current.member_epoch}). The member must abandon all its partitions and rejoin.")

    def _leave(self, group: ConsumerGroup, change: _Change, req: HeartbeatRequest) -> HeartbeatResult:
        member_id = req.member_id
        if member_id not in group.members:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID,
                           f"Member {member_id} is not a member of group {group.group_id}.")
        if req.member_epoch == LEAVE_STATIC_EPOCH and group.members[member_id].instance_id is not None:
            # A static member leaves for a restart: it keeps its place (and partitions) until
            # its session expires.
            current = group.member_assignment(member_id)
            change.write(records.CURRENT_MEMBER, member_id, _current_value(
                replace(current, member_epoch=LEAVE_STATIC_EPOCH, previous_member_epoch=current.member_epoch)))
            error = self._store(change)
            if error != ErrorCode.NONE:
                return HeartbeatResult(error)
            log.info("static member %s of consumer group %s left temporarily", member_id, group.group_id)
            self._arm_session(change.group, member_id)
            return HeartbeatResult(ErrorCode.NONE, None, member_id, LEAVE_STATIC_EPOCH,
                                   self.config.heartbeat_interval_ms)
        error = self._remove_member(change, member_id, "left the group")
        return HeartbeatResult(error, None, member_id, LEAVE_EPOCH, self.config.heartbeat_interval_ms)

    def _remove_member(self, change: _Change, member_id: str, why: str) -> ErrorCode:
        if self._downgrades_without(change.group, member_id):
            return self._downgrade(change, member_id, f"the last member of the consumer protocol, {member_id}, {why}")
        self._tombstone_member(change, member_id)
        change.write(records.METADATA, None, {"epoch": change.group.epoch + 1})
        self._update_target(change)
        error = self._store(change)
        if error == ErrorCode.NONE:
            self._cancel_timers(change.group.group_id, member_id)
            log.info("member %s of consumer group %s %s; group epoch %d", member_id, change.group.group_id, why,
                     change.group.epoch)
        return error

    def _downgrades_without(self, group: ConsumerGroup, leaving: str, replaced_by_classic: bool = False) -> bool:
        """Kafka's online downgrade (validateOnlineDowngradeWithFencedMembers, and
        ...WithReplacedMemberId): when the last member of the consumer protocol leaves, is fenced, or
        is replaced by a static member joining with the classic protocol, and classic members
        remain, the group goes back to the classic protocol, if the migration policy allows it and
        they fit in a classic group."""
        rest = [member for member_id, member in group.members.items() if member_id != leaving]
        size = len(rest) + replaced_by_classic
        return (size > 0 and all(member.is_classic for member in rest)
                and self.config.migration_policy in ("downgrade", "bidirectional")
                and size <= self.coordinator.config.max_group_size)

    def _downgrade(self, change: _Change, leaving: str | None, why: str) -> ErrorCode:
        """The consumer group's records give way to a classic group's, whose members are the classic
        members (all but `leaving`) with what they hold now, at the group epoch as generation; it
        then rebalances, so the leaver's partitions go to them (Kafka's convertToClassicGroup)."""
        group = change.group
        classic = Group(group.group_id, group.partition, GroupState.STABLE, group.epoch, CONSUMER_PROTOCOL_TYPE)
        for member_id, member in group.members.items():
            if member_id == leaving:
                continue
            assert member.classic_protocols is not None
            classic.members[member_id] = Member(
                member_id, member.instance_id, member.client_id, member.client_host, member.rebalance_timeout_ms,
                member.classic_session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(member.classic_protocols),
                _encode_assignment(group, group.member_assignment(member_id).assigned))
            if member.instance_id is not None:
                classic.static_members[member.instance_id] = member_id
        classic.protocol_name = classic.select_protocol()
        classic.leader_id = next(iter(classic.members))
        self._tombstone_group(change)
        error = self.coordinator.membership.adopt_downgraded(classic, change.records, why)
        if error != ErrorCode.NONE:
            log.warning("could not downgrade consumer group %s: %s", group.group_id, error.name)
            return error
        self._drop(group.group_id)
        log.info("consumer group %s downgraded online to a classic group with its %d classic member(s), as %s",
                 group.group_id, len(classic.members), why)
        return ErrorCode.NONE

    def _tombstone_member(self, change: _Change, member_id: str) -> None:
        change.write(records.CURRENT_MEMBER, member_id, None)
        change.write(records.TARGET_MEMBER, member_id, None)
        change.write(records.MEMBER_METADATA, member_id, None)

    def _refresh_topics(self, change: _Change, topics: Mapping[str, TopicInfo]) -> bool:
        """Record the metadata of every subscribed topic; True if it changed."""
        group = change.group
        names: set[str] = set()
        for member in group.members.values():
            names |= subscribed_names(member, topics)
        wanted = {topics[name].topic_id: topics[name] for name in names if name in topics}
        if wanted == group.topics:
            return False
        change.write(records.PARTITION_METADATA, None, {"topics": [
            {"topic_id": info.topic_id, "topic_name": info.name, "num_partitions": info.partitions,
             "partition_metadata": []}
            for info in sorted(wanted.values(), key=lambda i: i.name)]})
        return True

    def _assignor(self, group: ConsumerGroup) -> str:
        """The assignor most members ask for (ties: the configured order), else the default."""
        votes: dict[str, int] = {}
        for member in group.members.values():
            if member.server_assignor in self.config.assignors:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        if not votes:
            return self.config.assignors[0]
        return max(self.config.assignors, key=lambda name: (votes.get(name, 0), -self.config.assignors.index(name)))

    def _update_target(self, change: _Change) -> None:
        group = change.group
        if group.target_epoch >= group.epoch:
            return
        by_name = group.topic_names()
        spec = AssignmentSpec(
            subscriptions={mid: frozenset(by_name[name].topic_id for name in subscribed_names(m, by_name)
                                          if name in by_name)
                           for mid, m in group.members.items()},
            partition_counts={info.topic_id: info.partitions for info in group.topics.values()},
            previous=dict(group.targets))
        target = assign(self._assignor(group), spec)
        for member_id, partitions in target.items():
            if group.targets.get(member_id) != partitions or member_id not in group.targets:
                change.write(records.TARGET_MEMBER, member_id, {"topic_partitions": records.topic_partitions(partitions)})
        change.write(records.TARGET_METADATA, None, {"assignment_epoch": group.epoch})

    def _store(self, change: _Change) -> ErrorCode:
        if not change.records:
            return ErrorCode.NONE
        group = change.group
        error = self.coordinator.runtime.write(group.partition, change.records)
        if error != ErrorCode.NONE:
            log.warning("could not store consumer group %s's change: %s", group.group_id, error.name)
            return error
        if group.exists:
            self.groups[group.group_id] = group
        else:
            self._drop(group.group_id)
        return ErrorCode.NONE

    # Classic members (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) of a consumer group.

    def classic_join(self, req: JoinRequest) -> JoinResult:
        """JoinGroup of a classic member of a consumer group: it is reconciled as a consumer-protocol
        member is, the subscription's owned partitions standing for the heartbeat's, and answered at
        once with its member epoch as the generation (no leader: the broker assigned)."""
        group = self.groups[req.group_id]
        member_id = req.member_id
        if req.protocol_type != CONSUMER_PROTOCOL_TYPE or not req.protocols:
            return _join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        # A static member (group.instance.id) that comes back under a new member id replaces its old
        # self, whichever protocol that spoke, and takes over what it held (Kafka's classic rules).
        replaced = None if req.group_instance_id is None else group.static_member(req.group_instance_id)
        if replaced is not None and req.member_id and req.member_id != replaced:
            return _join_error(ErrorCode.FENCED_INSTANCE_ID, req.member_id)
        if not member_id:
            member_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
            if req.require_known_member_id and req.group_instance_id is None:
                return _join_error(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        if replaced == member_id:
            replaced = None
        existing = group.members.get(member_id)
        if existing is not None and not existing.is_classic:
            return _join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        if existing is None and replaced is None and len(group.members) >= self.config.max_size:
            return _join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
        topics = self.topics()
        names, owned = _read_subscription(req.protocols[0][1], topics)
        updated = MemberMetadata(req.group_instance_id, None, req.client_id, req.client_host, names, None,
                                 req.rebalance_timeout_ms, None, req.session_timeout_ms,
                                 tuple((name, bytes(metadata)) for name, metadata in req.protocols))
        change = _Change(group.copy())
        if replaced is not None:
            old_target = group.targets.get(replaced, EMPTY)
            old_current = group.member_assignment(replaced)
            existing = replace(group.members[replaced], classic_session_timeout_ms=req.session_timeout_ms,
                               classic_protocols=updated.classic_protocols)
            self._tombstone_member(change, replaced)
            self._cancel_timers(group.group_id, replaced)
            change.write(records.TARGET_MEMBER, member_id, {"topic_partitions": records.topic_partitions(old_target)})
            change.write(records.CURRENT_MEMBER, member_id, _current_value(replace(
                old_current, member_epoch=max(old_current.member_epoch, old_current.previous_member_epoch))))
        bump = existing is None or existing.subscribed_topic_names != names
        if updated != existing or replaced is not None:
            change.write(records.MEMBER_METADATA, member_id, _member_value(updated))
        bump |= self._refresh_topics(change, topics)
        if bump:
            change.write(records.METADATA, None, {"epoch": change.group.epoch + 1})
        self._update_target(change)
        staged = change.group
        before = staged.member_assignment(member_id)
        after = reconcile(before, staged.target_epoch, staged.targets.get(member_id, EMPTY), owned,
                          lambda topic, partition: staged.owners.get((topic, partition), member_id) != member_id)
        if after != before or member_id not in group.current:
            change.write(records.CURRENT_MEMBER, member_id, _current_value(after))
        downgrade = replaced is not None and self._downgrades_without(group, replaced, replaced_by_classic=True)
        error = self._store(change)
        if error != ErrorCode.NONE:
            return _join_error(error, member_id)
        if replaced is not None:
            log.info("static member %s of consumer group %s rejoined with the classic protocol as %s, replacing %s",
                     req.group_instance_id, req.group_id, member_id, replaced)
            if downgrade:
                # It replaced the last member of the consumer protocol (Kafka's
                # validateOnlineDowngradeWithReplacedMemberId).
                error = self._downgrade(_Change(staged.copy()), None, f"the last member of the consumer protocol, "
                                        f"{replaced}, was replaced by {member_id} with the classic protocol")
                if error != ErrorCode.NONE:
                    return _join_error(error, member_id)
                return {"error_code": ErrorCode.NONE, "generation_id": staged.epoch,
                        "protocol_type": CONSUMER_PROTOCOL_TYPE, "protocol_name": req.protocols[0][0], "leader": "",
                        "skip_assignment": False, "member_id": member_id, "members": []}
        elif existing is None:
            log.info("classic member %s joined consumer group %s", member_id, req.group_id)
        self._arm_session(staged, member_id)
        self._arm_rebalance(staged, member_id, after)
        return {"error_code": ErrorCode.NONE, "generation_id": after.member_epoch,
                "protocol_type": CONSUMER_PROTOCOL_TYPE, "protocol_name": req.protocols[0][0], "leader": "",
                "skip_assignment": False, "member_id": member_id, "members": []}

    def _classic_member(self, group_id: str, member_id: str, generation_id: int) -> tuple[ErrorCode, MemberMetadata | None]:
        group = self.groups[group_id]
        member = group.members.get(member_id)
        if member is None or not member.is_classic:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if generation_id != group.member_assignment(member_id).member_epoch:
            return ErrorCode.ILLEGAL_GENERATION, None
        return ErrorCode.NONE, member

    def classic_sync(self, group_id: str, generation_id: int, member_id: str, protocol_type: str | None,
                     protocol_name: str | None) -> SyncResult:
        """SyncGroup of a classic member: its assigned partitions (not those it is revoking)."""
        def refused(error: ErrorCode) -> SyncResult:
            return {"error_code": error, "protocol_type": None, "protocol_name": None, "assignment": b""}

        error, member = self._classic_member(group_id, member_id, generation_id)
        if member is None:
            return refused(error)
        assert member.classic_protocols is not None
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name not in {name for name, _ in member.classic_protocols}):
            return refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        group = self.groups[group_id]
        self._arm_session(group, member_id)
        assignment = _encode_assignment(group, group.member_assignment(member_id).assigned)
        return {"error_code": ErrorCode.NONE, "protocol_type": CONSUMER_PROTOCOL_TYPE,
                "protocol_name": protocol_name or member.classic_protocols[0][0], "assignment": assignment}

    def classic_heartbeat(self, group_id: str, generation_id: int, member_id: str) -> ErrorCode:
        """Heartbeat of a classic member: REBALANCE_IN_PROGRESS while its assignment is not its
        target's, so that it joins again (and so reconciles)."""
        error, member = self._classic_member(group_id, member_id, generation_id)
        if member is None:
            return error
        group = self.groups[group_id]
        self._arm_session(group, member_id)
        current = group.member_assignment(member_id)
        if current.state != MemberState.STABLE or current.member_epoch != group.target_epoch:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def classic_leave(self, group_id: str, leaving: Sequence[tuple[str, str | None]]) -> list[ErrorCode]:
        results = []
        for member_id, instance_id in leaving:
            group = self.groups.get(group_id)
            if group is None:
                results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            if not member_id and instance_id is not None:
                member_id = group.static_member(instance_id) or ""
            if member_id not in group.members:
                results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            results.append(self._remove_member(_Change(group.copy()), member_id, "left the group (LeaveGroup)"))
        return results

    # Timers.

    def _arm_session(self, group: ConsumerGroup, member_id: str) -> None:
        key = (group.group_id, member_id)
        old = self._session_timers.pop(key, None)
        if old is not None:
            old.cancel()
        member = group.members.get(member_id)
        timeout = member.classic_session_timeout_ms if member is not None and member.is_classic \
            else self.config.session_timeout_ms
        self._session_timers[key] = self.coordinator.scheduler.call_later(
            timeout, lambda: self._expire(key, "session timed out"))

    def _arm_rebalance(self, group: ConsumerGroup, member_id: str, current: CurrentAssignment) -> None:
        key = (group.group_id, member_id)
        armed = self._rebalance_timers.get(key)
        if current.state != MemberState.UNREVOKED_PARTITIONS:
            if armed is not None:
                self._rebalance_timers.pop(key)[1].cancel()
            return
        if armed is not None and armed[0] == current.member_epoch:
            return
        if armed is not None:
            armed[1].cancel()
        timeout = group.members[member_id].rebalance_timeout_ms
        self._rebalance_timers[key] = (current.member_epoch, self.coordinator.scheduler.call_later(
            timeout, lambda: self._expire(key, f"did not revoke its partitions within {timeout} ms")))

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        session = self._session_timers.pop((group_id, member_id), None)
        if session is not None:
            session.cancel()
        rebalance = self._rebalance_timers.pop((group_id, member_id), None)
        if rebalance is not None:
            rebalance[1].cancel()

    def _expire(self, key: tuple[str, str], why: str) -> None:
        group_id, member_id = key
        self._session_timers.pop(key, None)
        self._rebalance_timers.pop(key, None)
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        if self._remove_member(_Change(group.copy()), member_id, f"removed: {why}") != ErrorCode.NONE:
            self._arm_session(group, member_id)  # try again later

    # ConsumerGroupDescribe.

    def describe(self, group_id: str) -> tuple[ErrorCode, str | None, ConsumerGroup | None]:
        error = self.coordinator.partition_error(group_id)
        if error != ErrorCode.NONE:
            return error, None, None
        group = self.groups.get(group_id)
        if group is None:
            classic = self.coordinator.groups.get(group_id)
            if classic is not None and classic.state != GroupState.DEAD and classic.protocol_type is not None:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        return ErrorCode.NONE, None, group

    def assignor_name(self, group: ConsumerGroup) -> str:
        return self._assignor(group)


def _join_error(error: ErrorCode, member_id: str) -> JoinResult:
    return {"error_code": error, "generation_id": -1, "protocol_type": None, "protocol_name": None,
            "leader": "", "skip_assignment": False, "member_id": member_id, "members": []}


def _encode_assignment(group: ConsumerGroup, assigned: Partitions) -> bytes:
    """Partitions as a classic member's SyncGroup assignment (ConsumerProtocolAssignment v0)."""
    names = {info.topic_id: info.name for info in group.topics.values()}
    return CONSUMER_ASSIGNMENT.encode(0, {"assigned_partitions": [
        {"topic": names[topic], "partitions": sorted(parts)} for topic, parts in assigned.items() if topic in names],
        "user_data": None})


def _read_subscription(metadata: bytes, topics: Mapping[str, TopicInfo]) -> tuple[tuple[str, ...], Partitions | None]:
    """A classic member's subscribed topic names and the partitions it says it owns (None before
    subscription v1, which has no owned partitions)."""
    try:
        version = int.from_bytes(metadata[:2], "big", signed=True)
        body = CONSUMER_SUBSCRIPTION.decode_body(min(max(version, 0), 3), io.BytesIO(metadata[2:]))
    except (RecordFormatError, ValueError):
        return (), None
    owned: Partitions | None = None
    if version >= 1:
        owned = _normalise({topics[entry.topic].topic_id: entry.partitions
                            for entry in body.owned_partitions if entry.topic in topics})
    return tuple(sorted(body.topics)), owned


def _read_assignment(assignment: bytes, topics: Mapping[str, TopicInfo]) -> Partitions:
    try:
        version = int.from_bytes(assignment[:2], "big", signed=True)
        body = CONSUMER_ASSIGNMENT.decode_body(min(max(version, 0), 3), io.BytesIO(assignment[2:]))
    except (RecordFormatError, ValueError):
        return EMPTY
    return _normalise({topics[entry.topic].topic_id: entry.partitions
                       for entry in body.assigned_partitions if entry.topic in topics})


def owned_from_wire(entries: Sequence[Any] | None) -> Partitions | None:
    if entries is None:
        return None
    return _normalise({entry.topic_id: entry.partitions for entry in entries})


__all__ = ["ASSIGNORS", "ConsumerGroup", "ConsumerGroupConfig", "ConsumerGroupState", "ConsumerGroups",
           "CurrentAssignment", "HeartbeatRequest", "HeartbeatResult", "MemberState", "RecordFormatError",
           "TopicInfo", "reconcile"]
