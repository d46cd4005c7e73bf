"""The record formats of __consumer_offsets and of the consumer protocol, as data.

Keys and values of __consumer_offsets are Kafka's: each starts with an int16 version
followed by that version of its schema. Key versions 0 and 1 are an offset commit key,
version 2 a group metadata key; a null value (tombstone) deletes what its key names.
Writing uses the newest non-flexible versions, which every Kafka tool reads; reading
accepts every version Kafka defines. The consumer protocol's subscription is read only
to learn a member's topics (OffsetDelete, offset expiry).

Everything here is immutable and built at import time; any caller may use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from minikafka.coordinator.records import RecordFormatError, VersionedSchema, read_version
from protocol.primitives import Message
from protocol.schema import Field

OFFSET_COMMIT_KEY = VersionedSchema("OffsetCommitKey", "0-1", "none", [
    Field("group", "string", "0+"),
    Field("topic", "string", "0+"),
    Field("partition", "int32", "0+"),
])
GROUP_METADATA_KEY = VersionedSchema("GroupMetadataKey", "2", "none", [
    Field("group", "string", "2"),
])
OFFSET_COMMIT_VALUE = VersionedSchema("OffsetCommitValue", "0-4", "4+", [
    Field("offset", "int64", "0+"),
    Field("leader_epoch", "int32", "3+", default=-1),
    Field("metadata", "string", "0+"),
    Field("commit_timestamp", "int64", "0+"),
    Field("expire_timestamp", "int64", "1", default=-1),
])
GROUP_METADATA_VALUE = VersionedSchema("GroupMetadataValue", "0-4", "4+", [
    Field("protocol_type", "string", "0+"),
    Field("generation", "int32", "0+"),
    Field("protocol", "string", "0+", nullable="0+"),
    Field("leader", "string", "0+", nullable="0+"),
    Field("current_state_timestamp", "int64", "2+", default=-1),
    Field("members", "[]MemberMetadata", "0+", fields=[
        Field("member_id", "string", "0+"),
        Field("group_instance_id", "string", "3+", nullable="3+", default=None),
        Field("client_id", "string", "0+"),
        Field("client_host", "string", "0+"),
        Field("rebalance_timeout", "int32", "1+"),
        Field("session_timeout", "int32", "0+"),
        Field("subscription", "bytes", "0+"),
        Field("assignment", "bytes", "0+"),
    ]),
])
CONSUMER_SUBSCRIPTION = VersionedSchema("ConsumerProtocolSubscription", "0-3", "none", [
    Field("topics", "[]string", "0+"),
    Field("user_data", "bytes", "0+", nullable="0+", default=None),
    Field("owned_partitions", "[]TopicPartition", "1+", fields=[
        Field("topic", "string", "1+"),
        Field("partitions", "[]int32", "1+"),
    ]),
    Field("generation_id", "int32", "2+", default=-1),
    Field("rack_id", "string", "3+", nullable="3+", default=None),
])
CONSUMER_ASSIGNMENT = VersionedSchema("ConsumerProtocolAssignment", "0-3", "none", [
    Field("assigned_partitions", "[]TopicPartition", "0+", fields=[
        Field("topic", "string", "0+"),
        Field("partitions", "[]int32", "0+"),
    ]),
    Field("user_data", "bytes", "0+", nullable="0+", default=None),
])

# Versions written: the newest that are not flexible, so that older tools read them too.
OFFSET_KEY_VERSION = 1
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3
CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    return OFFSET_COMMIT_KEY.encode(OFFSET_KEY_VERSION, {"group": group, "topic": topic, "partition": partition})


def encode_group_key(group: str) -> bytes:
    return GROUP_METADATA_KEY.encode(GROUP_KEY_VERSION, {"group": group})


def encode_offset_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int,
                        expire_timestamp: int = -1) -> bytes:
    # Only version 1 carries an explicit expiry (set by OffsetCommit v2-v4 retention_time_ms).
    version = OFFSET_VALUE_VERSION if expire_timestamp < 0 else OFFSET_VALUE_VERSION_WITH_EXPIRY
    return OFFSET_COMMIT_VALUE.encode(version, {
        "offset": offset, "leader_epoch": leader_epoch, "metadata": metadata,
        "commit_timestamp": commit_timestamp, "expire_timestamp": expire_timestamp,
    })


def encode_group_value(body: Mapping[str, Any]) -> bytes:
    return GROUP_METADATA_VALUE.encode(GROUP_VALUE_VERSION, body)


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    """The key of a __consumer_offsets record; raises RecordFormatError for anything else."""
    version, stream = read_version(data, "key")
    if OFFSET_COMMIT_KEY.supports(version):
        body = OFFSET_COMMIT_KEY.decode_body(version, stream)
        return OffsetKey(body.group, body.topic, body.partition)
    if GROUP_METADATA_KEY.supports(version):
        return GroupKey(GROUP_METADATA_KEY.decode_body(version, stream).group)
    raise RecordFormatError(f"unknown key version {version} (transaction or newer-protocol records?)")


def decode_offset_value(data: bytes) -> Message:
    version, stream = read_version(data, "offset commit value")
    return OFFSET_COMMIT_VALUE.decode_body(version, stream)


def decode_group_value(data: bytes) -> Message:
    version, stream = read_version(data, "group metadata value")
    return GROUP_METADATA_VALUE.decode_body(version, stream)


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics of a consumer-protocol subscription; None if the bytes are not one.

    A version newer than the ones known is read as the newest known, as Kafka does:
    versions only ever add fields at the end.
    """
    try:
        version, stream = read_version(metadata, "subscription")
        return set(CONSUMER_SUBSCRIPTION.decode_body(min(max(version, 0), 3), stream).topics)
    except RecordFormatError:
        return None
