"""The records of KIP-848 consumer groups in __consumer_offsets, as Kafka 4 writes them.

A key starts with an int16 that is the record type (3 to 8 here; 0-1 are offset commits and
2 classic group metadata, see schemas.py), then that type's key schema; a value starts with
an int16 version (0) then its flexible body. A null value (tombstone) deletes what the key
names. The coordinator keeps no consumer-group state that these records do not describe:
it writes them, then replays them into memory, exactly as a coordinator loading the
partition after a failover does (consumer_group.ConsumerGroup.replay).

Everything here is immutable and built at import time; any caller may use it.
"""

from __future__ import annotations

import io
import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from minikafka.coordinator.records import RecordFormatError, VersionedSchema
from protocol.primitives import Message
from protocol.schema import Field

_INT16 = struct.Struct(">h")

_TOPIC_PARTITIONS = [Field("topic_id", "uuid", "0+"), Field("partitions", "[]int32", "0+")]

METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_MEMBER = 3, 4, 5, 6, 7, 8
REGULAR_EXPRESSION = 16  # Kafka 4.1's resolved regexes: read past (this coordinator resolves them itself)

_GROUP_KEY = [Field("group_id", "string", "0+")]
_MEMBER_KEY = [Field("group_id", "string", "0+"), Field("member_id", "string", "0+")]



def _key(name: str, fields: list[Field]) -> VersionedSchema:
    # The key's "version" is its record type: one schema per type, at that number.
    return VersionedSchema(name, str(_KEY_TYPES[name]), "none", fields)


_KEY_TYPES = {
    "ConsumerGroupMetadataKey": METADATA, "ConsumerGroupPartitionMetadataKey": PARTITION_METADATA,
    "ConsumerGroupMemberMetadataKey": MEMBER_METADATA, "ConsumerGroupTargetAssignmentMetadataKey": TARGET_METADATA,
    "ConsumerGroupTargetAssignmentMemberKey": TARGET_MEMBER, "ConsumerGroupCurrentMemberAssignmentKey": CURRENT_MEMBER,
    "ConsumerGroupRegularExpressionKey": REGULAR_EXPRESSION,
}

KEYS: dict[int, VersionedSchema] = {
    METADATA: _key("ConsumerGroupMetadataKey", _GROUP_KEY),
    PARTITION_METADATA: _key("ConsumerGroupPartitionMetadataKey", _GROUP_KEY),
    MEMBER_METADATA: _key("ConsumerGroupMemberMetadataKey", _MEMBER_KEY),
    TARGET_METADATA: _key("ConsumerGroupTargetAssignmentMetadataKey", _GROUP_KEY),
    TARGET_MEMBER: _key("ConsumerGroupTargetAssignmentMemberKey", _MEMBER_KEY),
    CURRENT_MEMBER: _key("ConsumerGroupCurrentMemberAssignmentKey", _MEMBER_KEY),
    REGULAR_EXPRESSION: _key("ConsumerGroupRegularExpressionKey", [
        Field("group_id", "string", "0+"), Field("regular_expression", "string", "0+")]),
}

VALUES: dict[int, VersionedSchema] = {
    METADATA: VersionedSchema("ConsumerGroupMetadataValue", "0", "0+", [
        Field("epoch", "int32", "0+"),
        Field("metadata_hash", "int64", "0+", tag=0, default=0),
    ]),
    PARTITION_METADATA: VersionedSchema("ConsumerGroupPartitionMetadataValue", "0", "0+", [
        Field("topics", "[]TopicMetadata", "0+", fields=[
            Field("topic_id", "uuid", "0+"),
            Field("topic_name", "string", "0+"),
            Field("num_partitions", "int32", "0+"),
            Field("partition_metadata", "[]PartitionMetadata", "0+", fields=[
                Field("partition", "int32", "0+"),
                Field("racks", "[]string", "0+"),
            ]),
        ]),
    ]),
    MEMBER_METADATA: VersionedSchema("ConsumerGroupMemberMetadataValue", "0", "0+", [
        Field("instance_id", "string", "0+", nullable="0+"),
        Field("rack_id", "string", "0+", nullable="0+"),
        Field("client_id", "string", "0+"),
        Field("client_host", "string", "0+"),
        Field("subscribed_topic_names", "[]string", "0+"),
        Field("subscribed_topic_regex", "string", "0+", nullable="0+"),
        Field("rebalance_timeout_ms", "int32", "0+", default=-1),
        Field("server_assignor", "string", "0+", nullable="0+"),
        Field("classic_member_metadata", "ClassicMemberMetadata", "0+", nullable="0+", default=None, tag=0, fields=[
            Field("session_timeout_ms", "int32", "0+"),
            Field("supported_protocols", "[]ClassicProtocol", "0+", fields=[
                Field("name", "string", "0+"),
                Field("metadata", "bytes", "0+"),
            ]),
        ]),
    ]),
    TARGET_METADATA: VersionedSchema("ConsumerGroupTargetAssignmentMetadataValue", "0", "0+", [
        Field("assignment_epoch", "int32", "0+"),
        Field("assignment_timestamp", "int64", "0+", tag=0, default=0),
    ]),
    TARGET_MEMBER: VersionedSchema("ConsumerGroupTargetAssignmentMemberValue", "0", "0+", [
        Field("topic_partitions", "[]TopicPartition", "0+", fields=_TOPIC_PARTITIONS),
    ]),
    CURRENT_MEMBER: VersionedSchema("ConsumerGroupCurrentMemberAssignmentValue", "0", "0+", [
        Field("member_epoch", "int32", "0+"),
        Field("previous_member_epoch", "int32", "0+"),
        Field("state", "int8", "0+"),
        Field("assigned_partitions", "[]TopicPartitions", "0+", fields=_TOPIC_PARTITIONS),
        Field("partitions_pending_revocation", "[]TopicPartitions", "0+", fields=_TOPIC_PARTITIONS),
    ]),
    REGULAR_EXPRESSION: VersionedSchema("ConsumerGroupRegularExpressionValue", "0", "0+", [
        Field("topics", "[]string", "0+"),
        Field("version", "int64", "0+"),
        Field("timestamp", "int64", "0+"),
    ]),
}
VALUE_VERSION = 0


@dataclass(frozen=True)
class ConsumerRecord:
    """One consumer-group record: its type, the group (and member) it is about, and its value
    (None for a tombstone), decoded."""

    record_type: int
    group_id: str
    member_id: str | None
    value: Message | None


def is_consumer_key(key: bytes) -> bool:
    return len(key) >= 2 and _INT16.unpack_from(key)[0] in KEYS


def encode(record_type: int, group_id: str, member_id: str | None,
           value: Mapping[str, Any] | None) -> tuple[bytes, bytes | None]:
    key_body: dict[str, Any] = {"group_id": group_id}
    if member_id is not None:
        key_body["member_id"] = member_id
    key = KEYS[record_type].encode(record_type, key_body)
    return key, None if value is None else VALUES[record_type].encode(VALUE_VERSION, value)


def decode(key: bytes, value: bytes | None) -> ConsumerRecord:
    if len(key) < 2:
        raise RecordFormatError("consumer group key without a type")
    stream = io.BytesIO(key)
    (record_type,) = _INT16.unpack(stream.read(2))
    schema = KEYS.get(record_type)
    if schema is None:
        raise RecordFormatError(f"not a consumer group record type: {record_type}")
    body = schema.decode_body(record_type, stream)
    member_id = getattr(body, "member_id", None) if record_type != REGULAR_EXPRESSION else None
    decoded_value = None
    if value is not None:
        if len(value) < 2:
            raise RecordFormatError(f"{schema.name}'s value has no version")
        value_stream = io.BytesIO(value)
        (version,) = _INT16.unpack(value_stream.read(2))
        decoded_value = VALUES[record_type].decode_body(version, value_stream)
    return ConsumerRecord(record_type, body.group_id, member_id, decoded_value)


def topic_partitions(assignment: Mapping[uuid.UUID, frozenset[int]]) -> list[dict[str, Any]]:
    """An assignment as the records' (and the APIs') list of topic id and partitions."""
    return [{"topic_id": topic, "partitions": sorted(parts)}
            for topic, parts in sorted(assignment.items(), key=lambda item: str(item[0])) if parts]


def from_topic_partitions(entries: Any) -> dict[uuid.UUID, frozenset[int]]:
    return {entry.topic_id: frozenset(entry.partitions) for entry in entries if entry.partitions}
