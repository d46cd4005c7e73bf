"""Metadata's answer for a topic is built once per version of the topic's metadata, and a
changed topic (a new TopicMetadata, as every change makes) is answered as it is now."""

from __future__ import annotations

import gc
import uuid

from minikafka.metadata.cache import MetadataCache, PartitionMetadata
from minikafka.server.handlers import metadata as metadata_handler
from minikafka.server.handlers.metadata import describe_topic


def _led_by(leader: int) -> dict[int, PartitionMetadata]:
    return {0: PartitionMetadata(leader=leader, leader_epoch=leader, replicas=(1, 2), isr=(1, 2))}


def test_a_topic_is_answered_as_its_metadata_is_now() -> None:
    cache = MetadataCache("cluster")
    topic_id = uuid.uuid4()
    cache.update_partitions("orders", topic_id, _led_by(1))
    first = cache.topic("orders")
    assert first is not None
    answer = describe_topic(first)
    assert describe_topic(first) is answer  # unchanged metadata: built once
    assert answer["partitions"][0]["leader_id"] == 1

    cache.update_partitions("orders", topic_id, _led_by(2))
    second = cache.topic("orders")
    assert second is not None and second is not first
    assert describe_topic(second)["partitions"][0]["leader_id"] == 2

    # A topic's answer goes with its metadata (other tests' leftovers may go too: the key is looked at).
    first_key = id(first)
    assert first_key in metadata_handler._DESCRIBED
    del first, answer
    gc.collect()
    assert first_key not in metadata_handler._DESCRIBED
    assert id(second) in metadata_handler._DESCRIBED
