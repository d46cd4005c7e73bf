"""The record formats of __consumer_offsets and of the consumer protocol, and Kafka's group-to-
partition mapping (a Kafka tool must agree with us on both)."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from minikafka.coordinator.records import RecordFormatError, java_string_hash, offsets_partition_for
from minikafka.group.schemas import (
    CONSUMER_ASSIGNMENT,
    CONSUMER_SUBSCRIPTION,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_VALUE,
    GroupKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    subscribed_topics,
)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscriptions_encoded_by_kafka_python_are_read(version: int) -> None:
    fields = {"topics": ["orders", "payments"], "user_data": b"\x01\x02"}
    if version >= 1:
        fields["owned_partitions"] = [ConsumerProtocolSubscription.TopicPartition(topic="orders", partitions=[0, 2])]
    if version >= 2:
        fields["generation_id"] = 7
    if version >= 3:
        fields["rack_id"] = "rack-a"
    encoded = bytes(ConsumerProtocolSubscription(version=version, **fields).encode(version=version))
    assert subscribed_topics(encoded) == {"orders", "payments"}
    assert encoded == CONSUMER_SUBSCRIPTION.encode(version, {**fields, "owned_partitions": [
        {"topic": "orders", "partitions": [0, 2]}] if version >= 1 else []})


def test_assignment_schema_matches_kafka_python() -> None:
    theirs = ConsumerProtocolAssignment(version=1, assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic="t", partitions=[1, 3])], user_data=None)
    ours = CONSUMER_ASSIGNMENT.encode(1, {"assigned_partitions": [{"topic": "t", "partitions": [1, 3]}],
                                          "user_data": None})
    assert bytes(theirs.encode(version=1)) == ours


def test_subscription_newer_than_known_is_read_as_the_newest() -> None:
    encoded = CONSUMER_SUBSCRIPTION.encode(3, {"topics": ["a"], "rack_id": "r"})
    newer = b"\x00\x09" + encoded[2:] + b"future fields"
    assert subscribed_topics(newer) == {"a"}
    assert subscribed_topics(b"\x00") is None
    assert subscribed_topics(b"\x00\x00\xff\xff\xff") is None


def test_keys_round_trip_and_have_kafkas_versions() -> None:
    key = encode_offset_key("g", "t", 3)
    assert key == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03"
    assert decode_key(key) == OffsetKey("g", "t", 3)
    assert decode_key(b"\x00\x00" + key[2:]) == OffsetKey("g", "t", 3), "version 0 keys are offset keys too"
    assert decode_key(encode_group_key("grp")) == GroupKey("grp")
    assert encode_group_key("grp")[:2] == b"\x00\x02"
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00\x07whatever")
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00")


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_offset_value_version_is_read(version: int) -> None:
    body = {"offset": 42, "leader_epoch": 5, "metadata": "m", "commit_timestamp": 1000, "expire_timestamp": 2000}
    value = decode_offset_value(OFFSET_COMMIT_VALUE.encode(version, body))
    assert (value.offset, value.metadata, value.commit_timestamp) == (42, "m", 1000)
    assert value.leader_epoch == (5 if version >= 3 else -1)
    assert value.expire_timestamp == (2000 if version == 1 else -1)


def test_written_offset_values_use_version_3_or_1_with_an_expiry() -> None:
    assert encode_offset_value(1, 0, "", 10)[:2] == b"\x00\x03"
    assert encode_offset_value(1, 0, "", 10, expire_timestamp=20)[:2] == b"\x00\x01"


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_group_value_version_is_read(version: int) -> None:
    member = {"member_id": "m-1", "group_instance_id": "i-1", "client_id": "c", "client_host": "/127.0.0.1",
              "rebalance_timeout": 30000, "session_timeout": 10000, "subscription": b"sub", "assignment": b"asg"}
    body = {"protocol_type": "consumer", "generation": 4, "protocol": "range", "leader": "m-1",
            "current_state_timestamp": 99, "members": [member]}
    value = decode_group_value(GROUP_METADATA_VALUE.encode(version, body))
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == ("consumer", 4, "range", "m-1")
    (m,) = value.members
    assert (m.member_id, m.session_timeout, bytes(m.subscription), bytes(m.assignment)) == (
        "m-1", 10000, b"sub", b"asg")
    assert m.group_instance_id == ("i-1" if version >= 3 else None)
    assert decode_group_value(encode_group_value(body)).members[0].group_instance_id == "i-1"


def test_java_string_hash_and_kafkas_partition_choice() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert offsets_partition_for("polygenelubricants", 50) == 0  # abs(MIN_VALUE) is taken as 0
    assert offsets_partition_for("hello", 50) == 99162322 % 50
    negative = next(name for name in (f"group-{i}" for i in range(1000)) if java_string_hash(name) < 0)
    assert offsets_partition_for(negative, 50) == abs(java_string_hash(negative)) % 50
