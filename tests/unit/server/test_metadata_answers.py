"""Metadata's answer for a topic is built once per version of the topic's metadata and encoded
once per API version; a changed topic (a new TopicMetadata, as every change makes) is answered as
it is now, and an encoded answer is byte for byte what the answer itself encodes to."""

from __future__ import annotations

import gc
import uuid
from typing import Any

import pytest

from minikafka.metadata.cache import MetadataCache, PartitionMetadata, TopicMetadata
from minikafka.server.handlers import metadata as metadata_handler
from minikafka.server.handlers.metadata import describe_topic, encoded_topic
from protocol import SUPPORTED_APIS, ApiKey, Encoded, encode_response_bytes, parse_response

METADATA = SUPPORTED_APIS[ApiKey.METADATA]


def _led_by(leader: int) -> dict[int, PartitionMetadata]:
    return {0: PartitionMetadata(leader=leader, leader_epoch=leader, replicas=(1, 2), isr=(1, 2)),
            1: PartitionMetadata(leader=2, leader_epoch=7, replicas=(2, 1, 3), isr=(2,), offline_replicas=(3,))}


def _response(topics: list[Any]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": "r1"}],
            "cluster_id": "cluster", "controller_id": 1, "topics": topics, "error_code": 0}


def _topic(cache: MetadataCache, name: str) -> TopicMetadata:
    topic = cache.topic(name)
    assert topic is not None
    return topic


def test_a_topic_is_answered_as_its_metadata_is_now() -> None:
    cache = MetadataCache("cluster")
    topic_id = uuid.uuid4()
    cache.update_partitions("orders", topic_id, _led_by(1))
    first = _topic(cache, "orders")
    answer = encoded_topic(first, 12)
    assert encoded_topic(first, 12) is answer  # unchanged metadata: encoded once
    _, decoded = parse_response(ApiKey.METADATA, 12, encode_response_bytes(ApiKey.METADATA, 12, 5,
                                                                           _response([answer]))[4:])
    assert decoded.topics[0].partitions[0].leader_id == 1

    cache.update_partitions("orders", topic_id, _led_by(2))
    second = _topic(cache, "orders")
    assert second is not first
    _, decoded = parse_response(ApiKey.METADATA, 12, encode_response_bytes(
        ApiKey.METADATA, 12, 5, _response([encoded_topic(second, 12)]))[4:])
    assert decoded.topics[0].partitions[0].leader_id == 2

    # A topic's answer goes with its metadata (other tests' leftovers may go too: the key is looked at).
    first_key = id(first)
    assert first_key in metadata_handler._ANSWERS
    del first, answer
    gc.collect()
    assert first_key not in metadata_handler._ANSWERS
    assert id(second) in metadata_handler._ANSWERS


@pytest.mark.parametrize("version", range(METADATA.min_version, METADATA.max_version + 1))
def test_an_encoded_answer_is_the_answer_encoded(version: int) -> None:
    cache = MetadataCache("cluster")
    cache.update_partitions("orders", uuid.uuid4(), _led_by(1))
    cache.update_partitions("__consumer_offsets", uuid.uuid4(), _led_by(3))
    topics = [_topic(cache, "orders"), _topic(cache, "__consumer_offsets")]
    encoded = [encoded_topic(t, version) for t in topics]
    assert all(isinstance(e, Encoded) for e in encoded)
    described = [describe_topic(t) for t in topics]
    missing = {"error_code": 3, "name": "gone", "topic_id": uuid.UUID(int=0), "is_internal": False, "partitions": []}
    assert encode_response_bytes(ApiKey.METADATA, version, 9, _response([*encoded, missing])) \
        == encode_response_bytes(ApiKey.METADATA, version, 9, _response([*described, missing]))
