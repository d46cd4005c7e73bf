"""A broker's metadata cache takes the leadership its LeaderAndIsr gave when that is newer than
what the cache holds, before the controller's UpdateMetadata says the same: a client leaving a
stopping broker asked another where the partition went and was sent back to the stopping one
(librdkafka then parked the partition until its next one-second scan)."""

from __future__ import annotations

import uuid

from minikafka.metadata.cache import MetadataCache, PartitionMetadata

TOPIC_ID = uuid.UUID(int=5)


def _cache() -> MetadataCache:
    cache = MetadataCache("cluster")
    cache.update_partitions("t", TOPIC_ID, {
        0: PartitionMetadata(1, 4, (1, 2, 3), (1, 2, 3)),
        1: PartitionMetadata(2, 7, (2, 3, 1), (2, 3), offline_replicas=(1,))})
    return cache


def test_a_newer_leadership_is_taken_and_an_older_or_unknown_one_is_not() -> None:
    cache = _cache()
    cache.advance_partitions("t", TOPIC_ID, {
        0: PartitionMetadata(2, 5, (1, 2, 3), (2, 3)),  # the controller moved it off broker 1
        1: PartitionMetadata(3, 7, (2, 3, 1), (3,)),  # same epoch: the cache's stays
        2: PartitionMetadata(1, 9, (1,), (1,))})  # a partition the cache does not know: left to UpdateMetadata
    assert cache.partition("t", 0) == PartitionMetadata(2, 5, (1, 2, 3), (2, 3))
    assert cache.partition("t", 1) == PartitionMetadata(2, 7, (2, 3, 1), (2, 3), offline_replicas=(1,))
    assert cache.partition("t", 2) is None


def test_offline_replicas_are_kept_and_another_topic_id_is_ignored() -> None:
    cache = _cache()
    cache.advance_partitions("t", TOPIC_ID, {1: PartitionMetadata(3, 8, (2, 3, 1), (3,))})
    assert cache.partition("t", 1) == PartitionMetadata(3, 8, (2, 3, 1), (3,), offline_replicas=(1,))
    cache.advance_partitions("t", uuid.UUID(int=6), {0: PartitionMetadata(3, 9, (1, 2, 3), (3,))})
    assert cache.partition("t", 0) == PartitionMetadata(1, 4, (1, 2, 3), (1, 2, 3))
    cache.advance_partitions("unknown", TOPIC_ID, {0: PartitionMetadata(3, 9, (3,), (3,))})
    assert cache.topic("unknown") is None
