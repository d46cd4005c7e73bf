"""The group coordinator: the groups of the __consumer_offsets partitions this broker leads.

`GroupCoordinator` is the face the broker and its handlers see, over three parts that share
one `CoordinatorRuntime` (Kafka 4's coordinator runtime: load, unload, write-then-apply):
`membership.Membership` (the classic protocol's members, rebalances and timers),
`offsets.Offsets` (committed offsets and their expiry) and `consumer_group.ConsumerGroups`
(KIP-848's consumer protocol). It owns how a partition's records are replayed into those parts
when the runtime loads it, and how they let go of its groups when the runtime unloads it; every
other call goes straight to the part that owns it. Event-loop thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, KeysView, Mapping
from typing import Any, Protocol

from minikafka.coordinator.records import RecordFormatError, offsets_partition_for
from minikafka.coordinator.runtime import CoordinatorRuntime, CoordinatorStore
from minikafka.coordinator.topic import LoggedRecord
from minikafka.group import consumer_records
from minikafka.group.consumer_group import ConsumerGroupConfig, ConsumerGroups, TopicInfo
from minikafka.group.group import Group, OffsetAndMetadata, TopicPartition
from minikafka.group.membership import CoordinatorConfig, JoinRequest, Membership, Scheduler
from minikafka.group.offsets import CommitEntry, Offsets
from minikafka.group.schemas import OffsetKey, decode_group_value, decode_key, decode_offset_value
from minikafka.metadata.topics import OFFSETS_TOPIC
from protocol.errors import ErrorCode

__all__ = ["CommitEntry", "CoordinatorConfig", "GroupCoordinator", "GroupStore", "JoinRequest",
           "offsets_partition_for"]

log = logging.getLogger(__name__)


class GroupStore(CoordinatorStore, Protocol):
    """Where groups are persisted (CoordinatorTopic over __consumer_offsets in the broker, a
    fake in unit tests)."""

    @property
    def exists(self) -> bool: ...


class GroupCoordinator:
    """Owns the groups (and their offsets) of the __consumer_offsets partitions this broker leads."""

    def __init__(self, config: CoordinatorConfig, store: GroupStore, scheduler: Scheduler,
                 consumer_config: ConsumerGroupConfig | None = None,
                 topics: Callable[[], Mapping[str, TopicInfo]] | None = None) -> None:
        self.config = config
        self.store = store
        self.scheduler = scheduler
        self.runtime = CoordinatorRuntime(OFFSETS_TOPIC, store, self._replay, self._drop, "group(s)")
        # KIP-848 groups; their committed offsets stay with Offsets, in a Group of the same id.
        self.consumer_groups = ConsumerGroups(consumer_config or ConsumerGroupConfig(), self, topics)
        self.membership = Membership(config, self.runtime, scheduler, self.consumer_groups, self.partition_for,
                                     self.partition_error)
        self.offsets = Offsets(config, self.runtime, scheduler, self.membership, self.consumer_groups)
        self.groups = self.membership.groups
        # What the handlers call, answered by the part that owns it.
        self.join_group = self.membership.join_group
        self.sync_group = self.membership.sync_group
        self.heartbeat = self.membership.heartbeat
        self.leave_group = self.membership.leave_group
        self.list_groups = self.membership.list_groups
        self.describe_group = self.membership.describe_group
        self.delete_groups = self.membership.delete_groups
        self.detach_classic_members = self.membership.detach_classic_members
        self.commit_offsets = self.offsets.commit_offsets
        self.complete_txn = self.offsets.complete_txn
        self.fetch_offsets = self.offsets.fetch_offsets
        self.delete_offsets = self.offsets.delete_offsets
        self.on_topic_deleted = self.offsets.on_topic_deleted
        self.expire_offsets = self.offsets.expire_offsets

    @property
    def loaded_partitions(self) -> KeysView[int]:
        return self.runtime.loaded_partitions

    # -----------------------------------------------------------------------------------------
    # Loading, availability, shutdown.
    # -----------------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return offsets_partition_for(group_id, self.store.partition_count)

    def load(self) -> None:
        """Read every available partition of the offsets topic into memory (broker startup)."""
        if self.store.exists:
            self.runtime.load_all()

    def partition_error(self, group_id: str) -> ErrorCode:
        """NONE if this coordinator serves the group now (loading its partition if need be)."""
        if not self.store.exists:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return self.runtime.partition_error(self.partition_for(group_id))

    def on_log_dir_failure(self, log_dir: str, cause: Exception) -> None:
        """A log dir failed: drop the groups of every offsets partition that went with it.

        Called from inside the failing I/O call, possibly on a mover's copy thread, so the work
        is done on the event loop's next turn."""
        self.scheduler.call_soon_threadsafe(self.unload_unavailable)

    def unload_unavailable(self) -> None:
        self.runtime.unload_unavailable()

    def leadership_changed(self, partition: int, leads: bool) -> None:
        """This broker now leads (loads the partition's groups) or no longer leads (unloads
        them: their members find the new coordinator) a __consumer_offsets partition."""
        self.runtime.leadership_changed(partition, leads)

    def shutdown(self) -> None:
        """Answer every waiting join and sync with NOT_COORDINATOR and stop every timer."""
        for group in list(self.groups.values()):
            self.membership.unload_group(group, ErrorCode.NOT_COORDINATOR)
        self.consumer_groups.shutdown()
        self.runtime.unload_all()

    def _replay(self, partition: int, records: Iterator[LoggedRecord]) -> None:
        """The runtime loads the partition: its records become groups, their offsets (those of a
        transaction once its marker says committed) and their consumer-protocol state."""
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        # producer id -> group -> offsets of its transaction, until its marker says committed or aborted
        pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}
        metadata: dict[str, Any] = {}
        read = skipped = 0
        for record in records:
            read += 1
            if record.marker is not None:
                ended = pending.pop(record.producer_id, {})
                if not record.marker.aborted:
                    for group_id, committed in ended.items():
                        offsets.setdefault(group_id, {}).update(committed)
                continue
            try:
                if consumer_records.is_consumer_key(record.key or b""):
                    self.consumer_groups.replay_loaded(partition, record.key or b"", record.value)
                    continue
                decoded = decode_key(record.key or b"")
                if isinstance(decoded, OffsetKey):
                    group_offsets = (pending.setdefault(record.producer_id, {}) if record.transactional
                                     else offsets).setdefault(decoded.group, {})
                    tp = (decoded.topic, decoded.partition)
                    if record.value is None:
                        group_offsets.pop(tp, None)
                    else:
                        v = decode_offset_value(record.value)
                        group_offsets[tp] = OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata,
                                                              v.commit_timestamp, v.expire_timestamp)
                else:
                    metadata[decoded.group] = None if record.value is None else decode_group_value(record.value)
            except RecordFormatError as exc:
                skipped += 1
                if skipped == 1:
                    log.warning("__consumer_offsets-%d: skipping a record this coordinator cannot read: %s",
                                partition, exc)
        open_txns = {group_id for by_group in pending.values() for group_id in by_group}
        for group_id in set(offsets) | set(metadata) | open_txns:
            value = metadata.get(group_id)
            group_offsets = offsets.get(group_id, {})
            if value is None and not group_offsets and group_id not in open_txns:
                continue
            group = Group(group_id, partition=partition, offsets=group_offsets)
            group.pending_txn_offsets = {pid: by_group[group_id] for pid, by_group in pending.items()
                                         if group_id in by_group}
            if value is not None:
                self.membership.restore(group, value)
            self.groups[group_id] = group
        self.consumer_groups.finish_load(partition)
        if read:
            log.info("loaded __consumer_offsets-%d: %d records, %d groups", partition, read,
                     sum(1 for g in self.groups.values() if g.partition == partition))

    def _drop(self, partition: int) -> int:
        """The runtime unloads the partition: its groups go, their waiting members are told
        NOT_COORDINATOR (they look the coordinator up again)."""
        self.consumer_groups.unload_partition(partition)
        gone = [g for g in self.groups.values() if g.partition == partition]
        for group in gone:
            self.membership.unload_group(group, ErrorCode.NOT_COORDINATOR)
        return len(gone)
