"""KIP-951's hint in a NOT_LEADER_OR_FOLLOWER answer to a Produce or Fetch names the partition's
leader from this broker's metadata, which the leadership a LeaderAndIsr gives advances at once.
The controller's UpdateMetadata saying the same comes a moment later; a broker stopping in a
rolling restart answered its producers in that moment naming itself, and closed. librdkafka then
kept the partition there and found the new leader only from a later Metadata answer (a second or
more behind the restart, in the bench's rolling restart)."""

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


def _broker(tmp_path: Path) -> tuple[LogManager, ReplicaManager, BrokerContext]:
    logs = LogManager([str(tmp_path / "d")], ME, "cluster", LogConfig(), LogDirFailureChannel())
    logs.startup()
    metadata = MetadataCache()
    metadata.update_partitions("t", TOPIC_ID, {0: PartitionMetadata(ME, 3, (ME, OTHER), (ME, OTHER))})
    replicas = ReplicaManager(ME, logs, metadata=metadata)
    replicas.become_leader("t", 0, TOPIC_ID, 3, LogConfig(), isr=(ME, OTHER), replicas=(ME, OTHER),
                           partition_epoch=3)
    return logs, replicas, cast(BrokerContext, SimpleNamespace(replica_manager=replicas, metadata=metadata))


def _follow_the_other_broker(replicas: ReplicaManager, epoch: int) -> None:
    """A LeaderAndIsr, as Leadership takes it: the replica follows, then the metadata follows."""
    partition = replicas.become_follower("t", 0, TOPIC_ID, epoch, LogConfig(), leader_id=OTHER,
                                         is_new_replica=False, isr=(OTHER,), replicas=(ME, OTHER),
                                         partition_epoch=epoch)
    assert partition is not None
    replicas.metadata_follows([partition])


def test_the_new_leader_is_named_as_soon_as_leader_and_isr_is_taken(tmp_path: Path) -> None:
    logs, replicas, ctx = _broker(tmp_path)
    try:
        _follow_the_other_broker(replicas, 4)  # no UpdateMetadata yet
        assert current_leader(ctx, "t", 0) == (OTHER, 4)
        assert ctx.metadata.partition("t", 0) == PartitionMetadata(OTHER, 4, (ME, OTHER), (OTHER,))
    finally:
        logs.shutdown()


def test_newer_metadata_is_kept_and_no_live_leader_gives_no_hint(tmp_path: Path) -> None:
    logs, replicas, ctx = _broker(tmp_path)
    try:
        # The controller's UpdateMetadata of a later decision arrived first: a late LeaderAndIsr
        # does not take the cache back.
        ctx.metadata.update_partitions("t", TOPIC_ID, {0: PartitionMetadata(3, 5, (ME, OTHER, 3), (OTHER, 3))})
        _follow_the_other_broker(replicas, 4)
        assert current_leader(ctx, "t", 0) == (3, 5)
        # A resigned leader follows no one and tells the cache nothing: the metadata's word stands.
        assert replicas.resign_leaderships() == []
        led = replicas.become_leader("t", 0, TOPIC_ID, 6, LogConfig(), isr=(ME, OTHER), replicas=(ME, OTHER),
                                     partition_epoch=6)
        assert led is not None
        replicas.metadata_follows([led])
        assert current_leader(ctx, "t", 0) == (ME, 6)
        assert replicas.resign_leaderships() == [("t", 0)]
        assert current_leader(ctx, "t", 0) == (ME, 6)
        # No leader known (offline), or no such partition: no hint.
        ctx.metadata.update_partitions("t", TOPIC_ID, {0: PartitionMetadata(-1, 7, (ME, OTHER), (OTHER,))})
        assert current_leader(ctx, "t", 0) is None
        assert current_leader(ctx, "unknown", 0) is None
    finally:
        logs.shutdown()
