"""Committed offsets of groups: OffsetCommit, TxnOffsetCommit (and their transaction's end),
OffsetFetch, OffsetDelete, the offsets of deleted topics, and expiry after
offsets.retention.minutes.

`Offsets` changes the committed offsets held in each `Group` (and, for an open transaction,
its pending offsets); the groups themselves are `membership.Membership`'s, which also says
whether a committing member may commit (a classic group) or `ConsumerGroups` does (a
consumer-protocol group). Every change is written through the coordinator runtime first and
applied only once written. Only the GroupCoordinator calls it. Event-loop thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from minikafka.coordinator.runtime import CoordinatorRuntime
from minikafka.coordinator.topic import KeyValue, TxnProducer
from minikafka.group.consumer_group import ConsumerGroups
from minikafka.group.group import Group, GroupState, OffsetAndMetadata, TopicPartition
from minikafka.group.membership import CoordinatorConfig, Membership, Scheduler
from minikafka.group.schemas import encode_offset_key, encode_offset_value
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CommitEntry:
    offset: int
    leader_epoch: int
    metadata: str | None


class Offsets:
    """The committed offsets of the groups of the loaded __consumer_offsets partitions."""

    def __init__(self, config: CoordinatorConfig, runtime: CoordinatorRuntime, scheduler: Scheduler,
                 membership: Membership, consumer_groups: ConsumerGroups) -> None:
        self.config = config
        self.runtime = runtime
        self.scheduler = scheduler
        self.membership = membership
        self.consumer_groups = consumer_groups
        self.groups = membership.groups
        self.partition_for = membership.partition_for
        self.partition_error = membership.partition_error

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
                       offsets: dict[TopicPartition, CommitEntry], retention_ms: int = -1,
                       unknown_group_error: ErrorCode = ErrorCode.ILLEGAL_GENERATION,
                       txn: TxnProducer | None = None) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit; with ``txn``, TxnOffsetCommit: the offsets are written as part of that
        producer's transaction and count only once it commits (``complete_txn``)."""
        def all_fail(error: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(offsets, error)

        error = self.partition_error(group_id)
        if error != ErrorCode.NONE:
            return all_fail(error)
        group = self.groups.get(group_id)
        new_group = group is None
        consumer_verdict = self.consumer_groups.check_commit(group_id, member_id, generation_id)
        if consumer_verdict is not None:  # a consumer-protocol group: its member epochs decide
            if consumer_verdict != ErrorCode.NONE:
                return all_fail(consumer_verdict)
            group = group or Group(group_id, partition=self.partition_for(group_id))
        elif group is None:
            if generation_id >= 0:
                return all_fail(unknown_group_error)
            group = Group(group_id, partition=self.partition_for(group_id))
        elif group.state == GroupState.DEAD:
            return all_fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif generation_id < 0 and (group.state == GroupState.EMPTY or (txn is not None and not member_id)):
            pass  # an admin, a consumer without group management or a producer without group metadata
        elif generation_id >= 0 or member_id or instance_id is not None:
            error = self.membership.member_error(group, member_id, instance_id)
            if error == ErrorCode.NONE and generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            if error == ErrorCode.NONE and group.state == GroupState.COMPLETING_REBALANCE and txn is None:
                error = ErrorCode.REBALANCE_IN_PROGRESS
            if error != ErrorCode.NONE:
                return all_fail(error)
            if txn is None:
                self.membership.arm_session(group, group.members[member_id])
        else:
            return all_fail(ErrorCode.UNKNOWN_MEMBER_ID)  # only members commit for a group that has some
        now = self.scheduler.now_ms()
        expire = now + retention_ms if retention_ms >= 0 else -1
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, entry in offsets.items():
            metadata = entry.metadata or ""
            if len(metadata.encode("utf-8")) > self.config.max_metadata_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            accepted[tp] = OffsetAndMetadata(entry.offset, entry.leader_epoch, metadata, now, expire)
        if accepted:
            def apply() -> None:
                if txn is None:
                    group.offsets.update(accepted)
                else:
                    group.pending_txn_offsets.setdefault(txn.producer_id, {}).update(accepted)
                    if log.isEnabledFor(logging.DEBUG):
                        log.debug("group %s: producer %d's open transaction commits %s", group_id,
                                  txn.producer_id, _shown(accepted))
                if new_group:
                    self.groups[group_id] = group
            records = [_offset_record(group_id, tp, om) for tp, om in accepted.items()]
            error = self.runtime.write(group.partition, records, apply, txn)
            for tp in accepted:
                results[tp] = error
        return results

    def complete_txn(self, partition: int, producer_id: int, committed: bool) -> None:
        """A transaction marker of ``producer_id`` is in __consumer_offsets ``partition``: the
        offsets its transaction committed for the groups stored there count from now, or go."""
        for group in self.groups.values():
            if group.partition != partition:
                continue
            ended = group.pending_txn_offsets.pop(producer_id, None)
            if ended and committed and group.state != GroupState.DEAD:
                group.offsets.update(ended)
            if ended and log.isEnabledFor(logging.DEBUG):
                log.debug("group %s: producer %d's transaction %s, its offsets %s", group.group_id, producer_id,
                          "committed" if committed else "aborted", _shown(ended))

    def fetch_offsets(self, group_id: str, partitions: Sequence[TopicPartition] | None,
                      require_stable: bool = False, member_id: str | None = None, member_epoch: int = -1,
                      ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None | ErrorCode]]:
        """Committed offsets of the partitions (None: all the group has); None for none committed.
        ``require_stable`` (KIP-447): a partition with offsets in an open transaction answers
        UNSTABLE_OFFSET_COMMIT, so a read_committed consumer waits for the transaction's end. A
        member of a consumer-protocol group names itself and its epoch (OffsetFetch v9+), which
        must be current."""
        error = self.partition_error(group_id)
        if error == ErrorCode.NONE:
            error = self.consumer_groups.check_fetch(group_id, member_id, member_epoch) or ErrorCode.NONE
        if error != ErrorCode.NONE:
            return error, {}
        group = self.groups.get(group_id)
        committed = group.offsets if group is not None and group.state != GroupState.DEAD else {}
        if partitions is None:
            return ErrorCode.NONE, dict(committed)
        unstable = {tp for tp in partitions if require_stable and group is not None and group.has_pending_txn_offset(tp)}
        answer = {tp: ErrorCode.UNSTABLE_OFFSET_COMMIT if tp in unstable else committed.get(tp) for tp in partitions}
        if log.isEnabledFor(logging.DEBUG):
            log.debug("group %s: committed offsets fetched%s: %s", group_id, " (stable)" if require_stable else "",
                      {tp: om.offset if isinstance(om, OffsetAndMetadata) else om for tp, om in answer.items()})
        return ErrorCode.NONE, answer

    def delete_offsets(self, group_id: str,
                       partitions: Sequence[TopicPartition]) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: forget committed offsets the group's members are not subscribed to."""
        error = self.partition_error(group_id)
        if error != ErrorCode.NONE:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = set()
        if group.state != GroupState.EMPTY:
            topics = group.subscribed_topics()
            if topics is None:
                return ErrorCode.NON_EMPTY_GROUP, {}
            subscribed = topics
        results: dict[TopicPartition, ErrorCode] = {}
        doomed = []
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[tp] = ErrorCode.NONE
                if tp in group.offsets:
                    doomed.append(tp)
        if doomed:
            error = self._delete_offsets(group, doomed)
            if error != ErrorCode.NONE:
                return error, {}
        return ErrorCode.NONE, results

    def _delete_offsets(self, group: Group, doomed: Sequence[TopicPartition]) -> ErrorCode:
        def forget() -> None:
            for tp in doomed:
                group.offsets.pop(tp, None)
        return self.runtime.write(group.partition, [(encode_offset_key(group.group_id, t, p), None) for t, p in doomed],
                                  forget)

    def on_topic_deleted(self, topic: str) -> None:
        """Forget every committed offset of a deleted topic."""
        for group in list(self.groups.values()):
            doomed = [tp for tp in group.offsets if tp[0] == topic]
            if doomed and self._delete_offsets(group, doomed) != ErrorCode.NONE:
                log.warning("could not remove offsets of deleted topic %s from group %s", topic, group.group_id)

    def expire_offsets(self) -> int:
        """Delete offsets past offsets.retention.minutes (Kafka's rules); then drop groups that
        are left empty with nothing committed. Returns how many offsets expired."""
        now = self.scheduler.now_ms()
        retention = self.config.offsets_retention_ms
        expired_total = 0
        for group in list(self.groups.values()):
            if group.partition not in self.runtime.loaded_partitions or group.state == GroupState.DEAD:
                continue
            if self.consumer_groups.has_members(group.group_id):
                continue  # an active consumer-protocol group keeps its offsets
            if group.state == GroupState.EMPTY:
                base = group.current_state_timestamp if group.protocol_type and group.current_state_timestamp >= 0 else None
                candidates = list(group.offsets.items())
            else:
                topics = group.subscribed_topics()
                if topics is None:
                    continue  # an active group of another protocol keeps its offsets
                base = None
                candidates = [(tp, om) for tp, om in group.offsets.items() if tp[0] not in topics]
            expired = [tp for tp, om in candidates
                       if (now >= om.expire_timestamp if om.expire_timestamp >= 0
                           else now - (base if base is not None else om.commit_timestamp) >= retention)]
            if expired and self._delete_offsets(group, expired) == ErrorCode.NONE:
                expired_total += len(expired)
                log.info("expired %d offset(s) of group %s", len(expired), group.group_id)
            if group.state == GroupState.EMPTY and not group.offsets:
                self.membership.delete_group(group)
        self.consumer_groups.delete_empty(lambda group_id: bool(group_id in self.groups
                                                                and self.groups[group_id].offsets))
        return expired_total


def _shown(offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
    return {tp: om.offset for tp, om in offsets.items()}


def _offset_record(group_id: str, tp: TopicPartition, om: OffsetAndMetadata) -> KeyValue:
    return (encode_offset_key(group_id, tp[0], tp[1]),
            encode_offset_value(om.offset, om.leader_epoch, om.metadata, om.commit_timestamp, om.expire_timestamp))

