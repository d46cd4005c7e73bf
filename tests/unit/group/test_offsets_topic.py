"""The coordinator over the real __consumer_offsets: storage, replica and controller layers on
temporary dirs, no sockets. Kafka's record format (kafka-python reads it), reload after a
restart, a reload from the partition as the log cleaner compacts it, and transactional offset
commits (TxnOffsetCommit) that count once their transaction's marker commits them."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch

from minikafka.config.broker import BrokerConfig
from minikafka.controller.embedded import INTERNAL_TOPICS, OFFSETS_TOPIC, EmbeddedController
from minikafka.coordinator.topic import CoordinatorTopic, TxnProducer
from minikafka.group.coordinator import CommitEntry, CoordinatorConfig, GroupCoordinator
from minikafka.group.schemas import GroupKey, OffsetKey, decode_key, decode_offset_value
from minikafka.metadata.store import LocalMetadataStore
from minikafka.replica.replica_manager import ReplicaManager
from minikafka.replica.topic_config import log_config_for
from minikafka.storage.cleaner import CleanerConfig, LogCleaner
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log_manager import LogManager
from protocol.errors import ErrorCode
from protocol.record_codec import ControlMarker
from protocol.records import iter_batches

from .helpers import ManualScheduler, join_request

PARTITIONS = 4


class Stack:
    """One broker's layers below the server, as Broker.start builds them."""

    def __init__(self, root: Path, **overrides: str) -> None:
        dirs = [str(root / "d1"), str(root / "d2")]
        settings = {"log.dirs": ",".join(dirs), "offsets.topic.num.partitions": str(PARTITIONS), **overrides}
        self.config = BrokerConfig(settings)
        self.channel = LogDirFailureChannel()
        for d in dirs:
            os.makedirs(d, exist_ok=True)
        self.store = LocalMetadataStore(dirs, self.channel)
        self.store.load()
        self.log_manager = LogManager(dirs, 1, self.store.cluster_id, log_config_for({}, self.config), self.channel)
        self.log_manager.startup()
        self.replica_manager = ReplicaManager(1, self.log_manager)
        self.replica_manager.internal_topics = INTERNAL_TOPICS
        self.controller = EmbeddedController(self.config, self.store, self.replica_manager)
        self.controller.startup()
        self.topic = CoordinatorTopic(self.replica_manager, self.controller.metadata, OFFSETS_TOPIC, PARTITIONS)
        self.scheduler = ManualScheduler()
        self.coordinator = GroupCoordinator(CoordinatorConfig.from_broker(self.config), self.topic, self.scheduler)
        self.coordinator.load()

    def partition_error(self, group: str) -> ErrorCode:
        """What FindCoordinator does: create the offsets topic on first use, then ask."""
        if not self.topic.exists:
            self.controller.create_internal_topic_now(OFFSETS_TOPIC)
        return self.coordinator.partition_error(group)

    def close(self) -> None:
        self.coordinator.shutdown()
        self.log_manager.shutdown()


def _commit(stack: Stack, group: str, offsets: dict[tuple[str, int], int]) -> None:
    entries = {tp: CommitEntry(offset, 5, f"meta-{offset}") for tp, offset in offsets.items()}
    result = stack.coordinator.commit_offsets(group, -1, "", None, entries)
    assert set(result.values()) == {ErrorCode.NONE}, result


def test_topic_created_on_first_use_and_records_in_kafkas_format(tmp_path: Path) -> None:
    stack = Stack(tmp_path)
    try:
        assert OFFSETS_TOPIC not in stack.controller.topics()
        assert stack.partition_error("g") == ErrorCode.NONE
        topic = stack.controller.topics()[OFFSETS_TOPIC]
        assert len(topic.partitions) == PARTITIONS
        assert topic.configs["cleanup.policy"] == "compact"
        _commit(stack, "g", {("orders", 0): 10, ("orders", 1): 20})
        partition = stack.coordinator.partition_for("g")
        log_ = stack.replica_manager.get_partition(OFFSETS_TOPIC, partition).log
        segment = glob.glob(os.path.join(log_.dir_path, "*.log"))[0]
        data = Path(segment).read_bytes()
        records = []
        for pos, header in iter_batches(data):
            batch = DefaultRecordBatch(data[pos:pos + header.size])
            assert batch.validate_crc()
            records += [(r.key, r.value) for r in batch]
        keys = [decode_key(k) for k, _ in records]
        assert keys == [OffsetKey("g", "orders", 0), OffsetKey("g", "orders", 1)]
        assert records[0][0][:2] == b"\x00\x01", "offset keys are written as version 1"
        value = decode_offset_value(records[0][1])
        assert (value.offset, value.leader_epoch, value.metadata) == (10, 5, "meta-10")
        appended = stack.replica_manager.append(OFFSETS_TOPIC, partition, data, 0)
        assert appended.error == ErrorCode.INVALID_TOPIC_EXCEPTION, "clients must not write the internal topic"
        assert stack.replica_manager.delete_records(OFFSETS_TOPIC, partition, -1)[0] == ErrorCode.INVALID_TOPIC_EXCEPTION
    finally:
        stack.close()


async def test_groups_and_offsets_survive_a_restart(tmp_path: Path) -> None:
    stack = Stack(tmp_path, **{"group.initial.rebalance.delay.ms": "0"})
    try:
        coordinator = stack.coordinator
        assert stack.partition_error("g") == ErrorCode.NONE
        joined = await coordinator.join_group(join_request(v4=False))
        member = joined["member_id"]
        await coordinator.sync_group("g", 1, member, None, None, None, [(member, b"assignment")])
        result = coordinator.commit_offsets("g", 1, member, None, {("t", p): CommitEntry(p * 3, -1, "") for p in range(8)})
        assert set(result.values()) == {ErrorCode.NONE}
        _commit(stack, "standalone", {("t", 0): 99})
        coordinator.delete_offsets("standalone", [("t", 0)])
    finally:
        stack.close()

    stack = Stack(tmp_path)
    try:
        coordinator = stack.coordinator
        assert coordinator.fetch_offsets("g", None)[1] == {
            ("t", p): coordinator.groups["g"].offsets[("t", p)] for p in range(8)}
        assert {tp: om.offset for tp, om in coordinator.fetch_offsets("g", None)[1].items()} == {
            ("t", p): p * 3 for p in range(8)}
        assert coordinator.fetch_offsets("standalone", None) == (ErrorCode.NONE, {})
        assert coordinator.heartbeat("g", 1, member, None) == ErrorCode.NONE
        synced = await coordinator.sync_group("g", 1, member, None, None, None, [])
        assert synced["assignment"] == b"assignment"
    finally:
        stack.close()


async def test_the_cleaner_bounds_the_topic_and_a_reload_reads_the_compacted_log(tmp_path: Path) -> None:
    stack = Stack(tmp_path, **{"offsets.topic.segment.bytes": "4096"})
    try:
        assert stack.partition_error("busy") == ErrorCode.NONE
        partition = stack.coordinator.partition_for("busy")
        for i in range(3000):
            _commit(stack, "busy", {("t", i % 20): i})
        _commit(stack, "gone", {("t", 0): 1})
        stack.coordinator.delete_groups(["gone"])
        log_ = stack.replica_manager.get_partition(OFFSETS_TOPIC, partition).log
        assert log_.config.compact and not log_.config.delete
        before = log_.size_bytes
        cleaner = LogCleaner(stack.log_manager, stack.channel, CleanerConfig())
        assert ("__consumer_offsets", partition) in cleaner.clean_what_is_due()
        await cleaner.wait_for_cleans()
        await cleaner.stop()
        assert log_.size_bytes < before / 10, (before, log_.size_bytes)
    finally:
        stack.close()
    stack = Stack(tmp_path)
    try:
        got = stack.coordinator.fetch_offsets("busy", None)[1]
        assert {tp: om.offset for tp, om in got.items()} == {("t", p): 2980 + p for p in range(20)}
        assert "gone" not in stack.coordinator.groups
        keys = [decode_key(r.key or b"") for r in stack.topic.read(partition)]
        assert all(isinstance(k, OffsetKey | GroupKey) for k in keys) and len(keys) < 300
    finally:
        stack.close()


def _txn_commit(stack: Stack, group: str, producer: TxnProducer, offsets: dict[tuple[str, int], int]) -> dict:
    entries = {tp: CommitEntry(offset, -1, "") for tp, offset in offsets.items()}
    return stack.coordinator.commit_offsets(group, -1, "", None, entries, txn=producer)


def _end_txn(stack: Stack, group: str, producer: TxnProducer, committed: bool) -> None:
    """What WriteTxnMarkers does at the group's partition: the marker, then the coordinator told."""
    partition = stack.coordinator.partition_for(group)
    written = stack.replica_manager.append_marker(OFFSETS_TOPIC, partition, producer.producer_id,
                                                  producer.producer_epoch, ControlMarker(not committed, 0), 0)
    assert written.error == ErrorCode.NONE
    stack.coordinator.complete_txn(partition, producer.producer_id, committed)


def _offsets(stack: Stack, group: str) -> dict[tuple[str, int], int]:
    return {tp: om.offset for tp, om in stack.coordinator.fetch_offsets(group, None)[1].items()}


async def test_transactional_offsets_count_once_committed_and_survive_a_restart_in_between(tmp_path: Path) -> None:
    committer, aborter, open_one = TxnProducer(7000, 0), TxnProducer(7001, 0), TxnProducer(7002, 0)
    stack = Stack(tmp_path)
    try:
        assert stack.partition_error("g") == ErrorCode.NONE
        _commit(stack, "g", {("t", 0): 5})
        assert set(_txn_commit(stack, "g", committer, {("t", 0): 10, ("t", 1): 11}).values()) == {ErrorCode.NONE}
        assert _offsets(stack, "g") == {("t", 0): 5}, "not before its transaction commits"
        assert stack.coordinator.fetch_offsets("g", [("t", 0), ("t", 2)], require_stable=True)[1] == {
            ("t", 0): ErrorCode.UNSTABLE_OFFSET_COMMIT, ("t", 2): None}
        _end_txn(stack, "g", committer, committed=True)
        assert _offsets(stack, "g") == {("t", 0): 10, ("t", 1): 11}
        _txn_commit(stack, "g", aborter, {("t", 0): 99})
        _end_txn(stack, "g", aborter, committed=False)
        assert _offsets(stack, "g") == {("t", 0): 10, ("t", 1): 11}, "an aborted transaction commits nothing"
        assert set(_txn_commit(stack, "g", TxnProducer(7001, 0), {("t", 3): 1}).values()) == {ErrorCode.NONE}
        _end_txn(stack, "g", TxnProducer(7001, 1), committed=False)  # a coordinator fences 7001 with epoch 1
        assert set(_txn_commit(stack, "g", TxnProducer(7001, 0), {("t", 3): 2}).values()) == {
            ErrorCode.INVALID_PRODUCER_EPOCH}, "a fenced producer commits nothing"
        _txn_commit(stack, "g", open_one, {("t", 2): 20})
    finally:
        stack.close()

    stack = Stack(tmp_path)
    try:
        assert _offsets(stack, "g") == {("t", 0): 10, ("t", 1): 11}, "replayed: committed in, aborted out"
        assert stack.coordinator.fetch_offsets("g", [("t", 2)], require_stable=True)[1] == {
            ("t", 2): ErrorCode.UNSTABLE_OFFSET_COMMIT}, "the open transaction's offsets are still pending"
        _end_txn(stack, "g", open_one, committed=True)
        assert _offsets(stack, "g") == {("t", 0): 10, ("t", 1): 11, ("t", 2): 20}
    finally:
        stack.close()


def test_a_transactional_commit_after_an_epoch_bump_is_taken(tmp_path: Path) -> None:
    # A coordinator's transactional write has no sequence: a producer's new epoch starts with it.
    stack = Stack(tmp_path)
    try:
        assert stack.partition_error("g") == ErrorCode.NONE
        for epoch in range(3):
            producer = TxnProducer(8000, epoch)
            assert set(_txn_commit(stack, "g", producer, {("t", 0): epoch}).values()) == {ErrorCode.NONE}, epoch
            _end_txn(stack, "g", producer, committed=True)
        assert _offsets(stack, "g") == {("t", 0): 2}
    finally:
        stack.close()
