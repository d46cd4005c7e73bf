"""The controller's APIs (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown,
AssignReplicasToDirs, AlterPartition, AllocateProducerIds) and KIP-848's ConsumerGroupHeartbeat
and ConsumerGroupDescribe, which kafka-python does not ship, checked against bytes built here field by field from Kafka's
message definitions: one old (non-flexible) and one flexible version of each, both ways, and
a round trip of a populated message for every version."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest

from protocol import SUPPORTED_APIS, decode_body, encode_body

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN, ASSIGN_REPLICAS_TO_DIRS = 4, 5, 6, 7, 73
ALTER_PARTITION, ALLOCATE_PRODUCER_IDS = 56, 67
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
HAND_CHECKED = frozenset({LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN,
                          ASSIGN_REPLICAS_TO_DIRS, ALTER_PARTITION, ALLOCATE_PRODUCER_IDS,
                          CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE})
DIR_ID = uuid.UUID("11223344-5566-7788-99aa-bbccddeeff00")
TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def string(text: str) -> bytes:
    return i16(len(text)) + text.encode()


def compact_string(text: str) -> bytes:
    return uvarint(len(text) + 1) + text.encode()


def array(items: list[bytes]) -> bytes:
    return i32(len(items)) + b"".join(items)


def compact_array(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def int32s(values: list[int], flexible: bool) -> bytes:
    items = [i32(v) for v in values]
    return compact_array(items) if flexible else array(items)


NO_TAGS = b"\x00"

PARTITION = {"partition_index": 3, "controller_epoch": 7, "leader": 2, "leader_epoch": 11, "isr": [2, 1],
             "partition_epoch": 40, "replicas": [2, 1, 3], "adding_replicas": [3], "removing_replicas": [],
             "is_new": True, "leader_recovery_state": 0}


def test_leader_and_isr_v1_request() -> None:
    body = {"controller_id": 1, "controller_epoch": 7, "live_leaders": [
                {"broker_id": 2, "host_name": "b2", "port": 9093}],
            "ungrouped_partition_states": [{**PARTITION, "topic_name": "orders"}]}
    expected = (i32(1) + i32(7)
                + array([string("orders") + i32(3) + i32(7) + i32(2) + i32(11) + int32s([2, 1], False) + i32(40)
                         + int32s([2, 1, 3], False) + i8(1)])
                + array([i32(2) + string("b2") + i32(9093)]))
    _both_ways(LEADER_AND_ISR, 1, True, body, expected)


def test_leader_and_isr_v6_request() -> None:
    body = {"controller_id": 1, "controller_epoch": 7, "broker_epoch": 4242, "type": 1,
            "topic_states": [{"topic_name": "orders", "topic_id": TOPIC_ID, "partition_states": [PARTITION]}],
            "live_leaders": [{"broker_id": 2, "host_name": "b2", "port": 9093}]}
    partition = (i32(3) + i32(7) + i32(2) + i32(11) + int32s([2, 1], True) + i32(40) + int32s([2, 1, 3], True)
                 + int32s([3], True) + int32s([], True) + i8(1) + i8(0) + NO_TAGS)
    expected = (i32(1) + i32(7) + i64(4242) + i8(1)
                + compact_array([compact_string("orders") + TOPIC_ID.bytes + compact_array([partition]) + NO_TAGS])
                + compact_array([i32(2) + compact_string("b2") + i32(9093) + NO_TAGS]) + NO_TAGS)
    _both_ways(LEADER_AND_ISR, 6, True, body, expected)


def test_leader_and_isr_responses() -> None:
    old = {"error_code": 0, "partition_errors": [{"topic_name": "orders", "partition_index": 3, "error_code": 56}]}
    _both_ways(LEADER_AND_ISR, 1, False, old, i16(0) + array([string("orders") + i32(3) + i16(56)]))
    new = {"error_code": 0, "topics": [{"topic_id": TOPIC_ID, "partition_errors": [
        {"partition_index": 3, "error_code": 56}]}]}
    expected = (i16(0) + compact_array([TOPIC_ID.bytes + compact_array([i32(3) + i16(56) + NO_TAGS]) + NO_TAGS])
                + NO_TAGS)
    _both_ways(LEADER_AND_ISR, 5, False, new, expected)


def test_update_metadata_v7_request() -> None:
    body = {"controller_id": 1, "controller_epoch": 7, "broker_epoch": 99,
            "topic_states": [{"topic_name": "orders", "topic_id": TOPIC_ID, "partition_states": [
                {"partition_index": 0, "controller_epoch": 7, "leader": 1, "leader_epoch": 2, "isr": [1],
                 "zk_version": 5, "replicas": [1, 2], "offline_replicas": [2]}]}],
            "live_brokers": [{"id": 1, "rack": None, "endpoints": [
                {"port": 9092, "host": "h1", "listener": "INTERNAL", "security_protocol": 0}]}]}
    partition = (i32(0) + i32(7) + i32(1) + i32(2) + int32s([1], True) + i32(5) + int32s([1, 2], True)
                 + int32s([2], True) + NO_TAGS)
    endpoint = i32(9092) + compact_string("h1") + compact_string("INTERNAL") + i16(0) + NO_TAGS
    expected = (i32(1) + i32(7) + i64(99)
                + compact_array([compact_string("orders") + TOPIC_ID.bytes + compact_array([partition]) + NO_TAGS])
                + compact_array([i32(1) + compact_array([endpoint]) + uvarint(0) + NO_TAGS]) + NO_TAGS)
    _both_ways(UPDATE_METADATA, 7, True, body, expected)


def test_update_metadata_v8_request_tags_its_type() -> None:
    # v8's Type (KIP-866) is tagged field 0 of the body, not an int8 after the broker epoch.
    body = {"controller_id": 1, "is_kraft_controller": True, "type": 2, "controller_epoch": 7, "broker_epoch": 99,
            "topic_states": [], "live_brokers": []}
    expected = (i32(1) + i8(1) + i32(7) + i64(99) + compact_array([]) + compact_array([])
                + uvarint(1) + uvarint(0) + uvarint(1) + i8(2))
    _both_ways(UPDATE_METADATA, 8, True, body, expected)
    untyped = {**body, "type": 0}
    _both_ways(UPDATE_METADATA, 8, True, untyped, expected[:-4] + NO_TAGS)


def test_update_metadata_v0_request() -> None:
    body = {"controller_id": 1, "controller_epoch": 7, "ungrouped_partition_states": [
                {"topic_name": "t", "partition_index": 0, "controller_epoch": 7, "leader": 1, "leader_epoch": 2,
                 "isr": [1], "zk_version": 5, "replicas": [1]}],
            "live_brokers": [{"id": 1, "v0_host": "h1", "v0_port": 9092}]}
    expected = (i32(1) + i32(7)
                + array([string("t") + i32(0) + i32(7) + i32(1) + i32(2) + int32s([1], False) + i32(5)
                         + int32s([1], False)])
                + array([i32(1) + string("h1") + i32(9092)]))
    _both_ways(UPDATE_METADATA, 0, True, body, expected)


def test_stop_replica_requests_and_response() -> None:
    v1 = {"controller_id": 1, "controller_epoch": 7, "broker_epoch": 3, "delete_partitions": True,
          "topics": [{"name": "t", "partition_indexes": [0, 2]}]}
    _both_ways(STOP_REPLICA, 1, True, v1,
               i32(1) + i32(7) + i64(3) + i8(1) + array([string("t") + int32s([0, 2], False)]))
    v3 = {"controller_id": 1, "controller_epoch": 7, "broker_epoch": 3, "topic_states": [
        {"topic_name": "t", "partition_states": [{"partition_index": 2, "leader_epoch": -2, "delete_partition": True}]}]}
    expected = (i32(1) + i32(7) + i64(3)
                + compact_array([compact_string("t") + compact_array([i32(2) + i32(-2) + i8(1) + NO_TAGS]) + NO_TAGS])
                + NO_TAGS)
    _both_ways(STOP_REPLICA, 3, True, v3, expected)
    response = {"error_code": 0, "partition_errors": [{"topic_name": "t", "partition_index": 2, "error_code": 0}]}
    _both_ways(STOP_REPLICA, 3, False, response,
               i16(0) + compact_array([compact_string("t") + i32(2) + i16(0) + NO_TAGS]) + NO_TAGS)


def test_controlled_shutdown() -> None:
    _both_ways(CONTROLLED_SHUTDOWN, 2, True, {"broker_id": 3, "broker_epoch": 77}, i32(3) + i64(77))
    _both_ways(CONTROLLED_SHUTDOWN, 3, False,
               {"error_code": 0, "remaining_partitions": [{"topic_name": "t", "partition_index": 1}]},
               i16(0) + compact_array([compact_string("t") + i32(1) + NO_TAGS]) + NO_TAGS)


def test_assign_replicas_to_dirs() -> None:
    request = {"broker_id": 2, "broker_epoch": 4242, "directories": [
        {"id": DIR_ID, "topics": [{"topic_id": TOPIC_ID, "partitions": [{"partition_index": 5}]}]}]}
    partitions = compact_array([i32(5) + NO_TAGS])
    _both_ways(ASSIGN_REPLICAS_TO_DIRS, 0, True, request,
               i32(2) + i64(4242) + compact_array([DIR_ID.bytes + compact_array([
                   TOPIC_ID.bytes + partitions + NO_TAGS]) + NO_TAGS]) + NO_TAGS)
    response = {"throttle_time_ms": 0, "error_code": 0, "directories": [
        {"id": DIR_ID, "topics": [{"topic_id": TOPIC_ID, "partitions": [{"partition_index": 5, "error_code": 100}]}]}]}
    answers = compact_array([i32(5) + i16(100) + NO_TAGS])
    _both_ways(ASSIGN_REPLICAS_TO_DIRS, 0, False, response,
               i32(0) + i16(0) + compact_array([DIR_ID.bytes + compact_array([
                   TOPIC_ID.bytes + answers + NO_TAGS]) + NO_TAGS]) + NO_TAGS)


def test_alter_partition_v1_names_topics_and_v3_gives_member_epochs() -> None:
    v1 = {"broker_id": 2, "broker_epoch": 4242, "topics": [{"topic_name": "t", "partitions": [
        {"partition_index": 5, "leader_epoch": 9, "new_isr": [2, 1], "leader_recovery_state": 0,
         "partition_epoch": 30}]}]}
    _both_ways(ALTER_PARTITION, 1, True, v1, i32(2) + i64(4242) + compact_array([compact_string("t") + compact_array([
        i32(5) + i32(9) + int32s([2, 1], True) + i8(0) + i32(30) + NO_TAGS]) + NO_TAGS]) + NO_TAGS)
    v3 = {"broker_id": 2, "broker_epoch": 4242, "topics": [{"topic_id": TOPIC_ID, "partitions": [
        {"partition_index": 5, "leader_epoch": 9, "new_isr_with_epochs": [
            {"broker_id": 2, "broker_epoch": 4242}, {"broker_id": 1, "broker_epoch": -1}],
         "leader_recovery_state": 0, "partition_epoch": 30}]}]}
    members = compact_array([i32(2) + i64(4242) + NO_TAGS, i32(1) + i64(-1) + NO_TAGS])
    _both_ways(ALTER_PARTITION, 3, True, v3, i32(2) + i64(4242) + compact_array([TOPIC_ID.bytes + compact_array([
        i32(5) + i32(9) + members + i8(0) + i32(30) + NO_TAGS]) + NO_TAGS]) + NO_TAGS)
    response = {"throttle_time_ms": 0, "error_code": 0, "topics": [{"topic_id": TOPIC_ID, "partitions": [
        {"partition_index": 5, "error_code": 0, "leader_id": 2, "leader_epoch": 9, "isr": [2, 1],
         "leader_recovery_state": 0, "partition_epoch": 31}]}]}
    _both_ways(ALTER_PARTITION, 2, False, response, i32(0) + i16(0) + compact_array([
        TOPIC_ID.bytes + compact_array([i32(5) + i16(0) + i32(2) + i32(9) + int32s([2, 1], True) + i8(0) + i32(31)
                                        + NO_TAGS]) + NO_TAGS]) + NO_TAGS)


def test_allocate_producer_ids() -> None:
    _both_ways(ALLOCATE_PRODUCER_IDS, 0, True, {"broker_id": 3, "broker_epoch": 77}, i32(3) + i64(77) + NO_TAGS)
    _both_ways(ALLOCATE_PRODUCER_IDS, 0, False,
               {"throttle_time_ms": 0, "error_code": 0, "producer_id_start": 2000, "producer_id_len": 1000},
               i32(0) + i16(0) + i64(2000) + i32(1000) + NO_TAGS)


def compact_nullable_string(text: str | None) -> bytes:
    return uvarint(0) if text is None else compact_string(text)


def test_consumer_group_heartbeat_v1_request_has_the_regex_v0_has_not() -> None:
    v1 = {"group_id": "g", "member_id": "m", "member_epoch": 0, "instance_id": None, "rack_id": "r1",
          "rebalance_timeout_ms": 300000, "subscribed_topic_names": ["t"], "subscribed_topic_regex": "t.*",
          "server_assignor": None, "topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [1, 2]}]}
    head = compact_string("g") + compact_string("m") + i32(0) + uvarint(0) + compact_string("r1") + i32(300000)
    owned = compact_array([TOPIC_ID.bytes + int32s([1, 2], True) + NO_TAGS])
    _both_ways(CONSUMER_GROUP_HEARTBEAT, 1, True, v1, head + compact_array([compact_string("t")])
               + compact_string("t.*") + uvarint(0) + owned + NO_TAGS)
    v0 = {**v1, "subscribed_topic_names": None, "topic_partitions": None}
    del v0["subscribed_topic_regex"]
    _both_ways(CONSUMER_GROUP_HEARTBEAT, 0, True, v0, head + uvarint(0) + uvarint(0) + uvarint(0) + NO_TAGS)


def test_consumer_group_heartbeat_response_with_and_without_an_assignment() -> None:
    with_assignment = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": "m",
                       "member_epoch": 7, "heartbeat_interval_ms": 5000,
                       "assignment": {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [0]}]}}
    common = i32(0) + i16(0) + uvarint(0) + compact_string("m") + i32(7) + i32(5000)
    # A nullable struct: int8 -1 for null, 1 then the struct.
    _both_ways(CONSUMER_GROUP_HEARTBEAT, 1, False, with_assignment, common + i8(1) + compact_array(
        [TOPIC_ID.bytes + int32s([0], True) + NO_TAGS]) + NO_TAGS + NO_TAGS)
    _both_ways(CONSUMER_GROUP_HEARTBEAT, 0, False, {**with_assignment, "assignment": None}, common + i8(-1) + NO_TAGS)


def test_consumer_group_describe() -> None:
    _both_ways(CONSUMER_GROUP_DESCRIBE, 0, True, {"group_ids": ["g"], "include_authorized_operations": True},
               compact_array([compact_string("g")]) + i8(1) + NO_TAGS)
    assignment = {"topic_partitions": [{"topic_id": TOPIC_ID, "topic_name": "t", "partitions": [3]}]}
    member = {"member_id": "m", "instance_id": None, "rack_id": None, "member_epoch": 4, "client_id": "c",
              "client_host": "/h", "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
              "assignment": assignment, "target_assignment": {"topic_partitions": []}, "member_type": 1}
    response = {"throttle_time_ms": 0, "groups": [{
        "error_code": 0, "error_message": None, "group_id": "g", "group_state": "Stable", "group_epoch": 4,
        "assignment_epoch": 4, "assignor_name": "uniform", "members": [member], "authorized_operations": 8}]}
    encoded_assignment = compact_array([TOPIC_ID.bytes + compact_string("t") + int32s([3], True) + NO_TAGS]) + NO_TAGS
    encoded_member = (compact_string("m") + uvarint(0) + uvarint(0) + i32(4) + compact_string("c") + compact_string("/h")
                      + compact_array([compact_string("t")]) + uvarint(0) + encoded_assignment
                      + compact_array([]) + NO_TAGS)
    group = (i16(0) + uvarint(0) + compact_string("g") + compact_string("Stable") + i32(4) + i32(4)
             + compact_string("uniform"))
    _both_ways(CONSUMER_GROUP_DESCRIBE, 1, False, response, i32(0) + compact_array([
        group + compact_array([encoded_member + i8(1) + NO_TAGS]) + i32(8) + NO_TAGS]) + NO_TAGS)
    _both_ways(CONSUMER_GROUP_DESCRIBE, 0, False, response, i32(0) + compact_array([
        group + compact_array([encoded_member + NO_TAGS]) + i32(8) + NO_TAGS]) + NO_TAGS)


def _both_ways(key: int, version: int, request: bool, body: dict[str, Any], expected: bytes) -> None:
    assert encode_body(key, version, request, body) == expected
    decoded = decode_body(key, version, request, expected)
    assert encode_body(key, version, request, decoded) == expected
    assert decoded[next(iter(body))] == body[next(iter(body))]


@pytest.mark.parametrize(("key", "version"), [
    (key, version) for key in sorted(HAND_CHECKED)
    for version in range(SUPPORTED_APIS[key].min_version, SUPPORTED_APIS[key].max_version + 1)])
def test_every_version_round_trips(key: int, version: int) -> None:
    for request in (True, False):
        empty = decode_body(key, version, request, encode_body(key, version, request, {}))
        again = encode_body(key, version, request, empty)
        assert decode_body(key, version, request, again) == empty
        assert again == encode_body(key, version, request, {})
