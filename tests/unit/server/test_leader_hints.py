"""KIP-951's hint in a NOT_LEADER_OR_FOLLOWER answer to a Produce or Fetch: the partition's leader as this
broker knows it best. The controller's LeaderAndIsr makes the replica a follower a moment before
its UpdateMetadata names the new leader in the metadata cache; a broker stopping in a rolling
restart answers its producers in that moment and then closes. Naming itself again sent the
producer back to a broker about to close, and it found the new leader only from a later Metadata
(a second or more behind the restart, in the bench's rolling restart)."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from minikafka.metadata.cache import MetadataCache, PartitionMetadata
from minikafka.replica.replica_manager import ReplicaManager
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.leader_hints import current_leader
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import LogConfig
from minikafka.storage.log_manager import LogManager

ME, OTHER = 1, 2
TOPIC_ID = uuid.UUID(int=7)


def _broker(tmp_path: Path) -> tuple[LogManager, ReplicaManager, MetadataCache]:
    logs = LogManager([str(tmp_path / "d")], ME, "cluster", LogConfig(), LogDirFailureChannel())
    logs.startup()
    replicas = ReplicaManager(ME, logs)
    replicas.become_leader("t", 0, TOPIC_ID, 3, LogConfig(), isr=(ME, OTHER), replicas=(ME, OTHER),
                           partition_epoch=3)
    metadata = MetadataCache()
    metadata.update_partitions("t", TOPIC_ID, {0: PartitionMetadata(ME, 3, (ME, OTHER), (ME, OTHER))})
    return logs, replicas, metadata


def _context(replicas: ReplicaManager, metadata: MetadataCache) -> BrokerContext:
    return cast(BrokerContext, SimpleNamespace(replica_manager=replicas, metadata=metadata))


def test_the_new_leader_is_named_between_leader_and_isr_and_update_metadata(tmp_path: Path) -> None:
    logs, replicas, metadata = _broker(tmp_path)
    try:
        replicas.become_follower("t", 0, TOPIC_ID, 4, LogConfig(), leader_id=OTHER, is_new_replica=False,
                                 isr=(OTHER,), replicas=(ME, OTHER), partition_epoch=4)
        assert metadata.partition("t", 0) == PartitionMetadata(ME, 3, (ME, OTHER), (ME, OTHER)), "not updated yet"
        assert current_leader(_context(replicas, metadata), "t", 0) == (OTHER, 4)
    finally:
        logs.shutdown()


def test_the_metadata_is_named_when_it_is_newer_or_the_replica_knows_no_leader(tmp_path: Path) -> None:
    logs, replicas, metadata = _broker(tmp_path)
    try:
        replicas.become_follower("t", 0, TOPIC_ID, 4, LogConfig(), leader_id=OTHER, is_new_replica=False,
                                 isr=(OTHER,), replicas=(ME, OTHER), partition_epoch=4)
        metadata.update_partitions("t", TOPIC_ID, {0: PartitionMetadata(3, 5, (ME, OTHER, 3), (OTHER, 3))})
        assert current_leader(_context(replicas, metadata), "t", 0) == (3, 5)
        # A resigned leader follows no one: the metadata's word stands.
        assert replicas.resign_leaderships() == []
        replicas.become_leader("t", 0, TOPIC_ID, 6, LogConfig(), isr=(ME, OTHER), replicas=(ME, OTHER),
                               partition_epoch=6)
        assert replicas.resign_leaderships() == [("t", 0)]
        assert current_leader(_context(replicas, metadata), "t", 0) == (3, 5)
        # Neither knows: no hint.
        assert current_leader(_context(replicas, metadata), "unknown", 0) is None
    finally:
        logs.shutdown()
