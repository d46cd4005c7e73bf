"""The schema DSL, the API declarations and the compiled construct schemas."""

from __future__ import annotations

import json
import re
import uuid
from importlib import resources
from typing import Any

import pytest

from protocol import SUPPORTED_APIS, decode_body, encode_body, message_schema
from protocol.apis import all_apis
from protocol.messages import header_schemas, message_struct_for
from protocol.primitives import (
    Array,
    Bool,
    CompactNullableString,
    Int32,
    MessageField,
    MessageStruct,
    NullableStruct,
    Records,
    TaggedFields,
    UnsignedVarInt,
    Uuid,
    VarInt,
    VarLong,
)
from protocol.schema import MISSING, ApiDefinition, Field, message_struct, parse_versions

from .test_inter_broker_apis import HAND_CHECKED

ALL_SCHEMAS = [
    pytest.param(key, version, request, id=f"{spec.name}-v{version}-{'req' if request else 'resp'}")
    for key, spec in sorted(SUPPORTED_APIS.items())
    for version in range(spec.min_version, spec.max_version + 1)
    for request in (True, False)
]


# --------------------------------------------------------------------------------------
# Compiled schemas never fall back to construct's interpreter.
# --------------------------------------------------------------------------------------


def _assert_fully_compiled(compiled: Any) -> None:
    # Every compiled module declares the (empty) linkedparsers/linkedbuilders dicts;
    # a fallback shows up as a call through them and as an entry in them.
    assert "linkedparsers[" not in compiled.source
    assert "linkedbuilders[" not in compiled.source
    assert compiled.module.linkedparsers == {}
    assert compiled.module.linkedbuilders == {}


@pytest.mark.parametrize(("key", "version", "request_"), ALL_SCHEMAS)
def test_message_schemas_compile_without_interpreter_fallback(key: int, version: int, request_: bool) -> None:
    compiled = message_schema(key, version, request_)
    _assert_fully_compiled(compiled)
    assert message_schema(key, version, request_) is compiled  # cached


def test_header_and_primitive_schemas_compile_without_fallback() -> None:
    for compiled in header_schemas().values():
        _assert_fully_compiled(compiled)
    inner = MessageStruct("Inner", [MessageField("a", Int32, 0)], tagged=[])
    for wire in (
        Bool,
        UnsignedVarInt,
        VarInt,
        VarLong,
        Uuid,
        CompactNullableString,
        Records(compact=True, nullable=True),
        Array(Int32, compact=False, nullable=True),
        Array(inner, compact=True, nullable=False),
        TaggedFields(),
        NullableStruct(inner),
    ):
        _assert_fully_compiled(wire.compile())


def test_a_construct_that_cannot_compile_is_detected() -> None:
    # Guards the guard: construct's own Struct of non-compilable parts falls back.
    from construct import Struct
    from construct import VarInt as ConstructVarInt

    fallback = Struct("x" / ConstructVarInt, "y" / Array(Int32, False, False)).compile()
    with pytest.raises(AssertionError):
        _assert_fully_compiled(fallback)


# --------------------------------------------------------------------------------------
# Our declarations against Kafka's JSON message definitions (as shipped in kafka-python).
# --------------------------------------------------------------------------------------


# Version ranges that differ from the shipped (Kafka 4) definitions on purpose: Kafka 4 dropped
# v0 of the KIP-113 APIs (KIP-896), which the JBOD tools of Kafka 1.x to 3.x still send, and
# DescribeLogDirs v5 only adds KIP-1066 cordoning, which the broker does not have.
VERSION_RANGE_EXCEPTIONS = {"DescribeLogDirs": "0-4", "AlterReplicaLogDirs": "0-2"}


def _kafka_json(name: str) -> dict[str, Any]:
    text = resources.files("kafka.protocol.schemas.resources").joinpath(name + ".json").read_text()
    return json.loads(re.sub(r"(?m)^\s*//.*$", "", text))


def _snake(name: str) -> str:
    return "".join(("_" + c.lower()) if c.isupper() and i else c.lower() for i, c in enumerate(name))


def _json_default(field: dict[str, Any]) -> Any:
    if "default" not in field:
        return MISSING
    raw = field["default"]
    if raw == "null":
        return None
    if field["type"] == "bool":
        return raw if isinstance(raw, bool) else raw.lower() == "true"
    if field["type"] in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return raw if isinstance(raw, int) else int(raw, 0)
    return raw


def _compare_fields(ours: tuple[Field, ...], theirs: list[dict[str, Any]], path: str,
                    common: dict[str, list[dict[str, Any]]] | None = None) -> None:
    """``common``: the definition's commonStructs, {struct name: its fields}, which a field of
    type ``[]Name`` without fields of its own refers to."""
    common = common or {}
    assert [f.name for f in ours] == [_snake(f["name"]) for f in theirs], path
    for mine, kafka in zip(ours, theirs, strict=True):
        where = f"{path}.{mine.name}"
        assert mine.type == kafka["type"], where
        assert parse_versions(mine.versions) == parse_versions(kafka["versions"]), where
        assert parse_versions(mine.nullable) == parse_versions(kafka.get("nullableVersions")), where
        assert mine.tag == kafka.get("tag"), where
        assert parse_versions(mine.tagged_versions) == parse_versions(kafka.get("taggedVersions")), where
        assert mine.default == _json_default(kafka), where
        nested = kafka.get("fields") or common.get(kafka["type"].removeprefix("[]"), [])
        _compare_fields(mine.fields, nested, where, common)


@pytest.mark.parametrize("api", [api for api in all_apis() if api.key not in HAND_CHECKED], ids=lambda api: api.name)
def test_declarations_match_kafka_message_definitions(api: ApiDefinition) -> None:
    """Against the definitions kafka-python ships (the controller's APIs are checked by bytes
    in test_inter_broker_apis)."""
    for kind, fields in (("Request", api.request), ("Response", api.response)):
        kafka = _kafka_json(api.name + kind)
        assert kafka["apiKey"] == api.key
        valid = VERSION_RANGE_EXCEPTIONS.get(api.name, kafka["validVersions"])
        assert parse_versions(valid) == parse_versions(api.versions)
        assert parse_versions(kafka["flexibleVersions"]) == parse_versions(api.flexible)
        common = {struct["name"]: struct["fields"] for struct in kafka.get("commonStructs", [])}
        _compare_fields(tuple(fields), kafka["fields"], api.name + kind, common)


def test_supported_apis_table() -> None:
    expected = {
        18: ("ApiVersions", 0, 4, 3),
        3: ("Metadata", 0, 13, 9),
        19: ("CreateTopics", 2, 7, 5),
        0: ("Produce", 3, 13, 9),
        1: ("Fetch", 4, 18, 12),
        2: ("ListOffsets", 1, 11, 6),
        22: ("InitProducerId", 0, 6, 2),
        23: ("OffsetForLeaderEpoch", 2, 4, 4),
        32: ("DescribeConfigs", 1, 4, 4),
        60: ("DescribeCluster", 0, 2, 0),
        8: ("OffsetCommit", 2, 10, 8),
        9: ("OffsetFetch", 1, 10, 6),
        10: ("FindCoordinator", 0, 6, 3),
        11: ("JoinGroup", 0, 9, 6),
        12: ("Heartbeat", 0, 4, 4),
        13: ("LeaveGroup", 0, 5, 4),
        14: ("SyncGroup", 0, 5, 4),
        15: ("DescribeGroups", 0, 6, 5),
        16: ("ListGroups", 0, 5, 3),
        20: ("DeleteTopics", 1, 6, 4),
        21: ("DeleteRecords", 0, 2, 2),
        33: ("AlterConfigs", 0, 2, 2),
        37: ("CreatePartitions", 0, 3, 2),
        42: ("DeleteGroups", 0, 2, 2),
        44: ("IncrementalAlterConfigs", 0, 1, 1),
        47: ("OffsetDelete", 0, 0, None),
        34: ("AlterReplicaLogDirs", 0, 2, 2),
        35: ("DescribeLogDirs", 0, 4, 2),
        4: ("LeaderAndIsr", 0, 7, 4),
        5: ("StopReplica", 0, 4, 2),
        6: ("UpdateMetadata", 0, 8, 6),
        7: ("ControlledShutdown", 1, 3, 3),
        43: ("ElectLeaders", 0, 2, 2),
        45: ("AlterPartitionReassignments", 0, 1, 0),
        46: ("ListPartitionReassignments", 0, 0, 0),
        73: ("AssignReplicasToDirs", 0, 0, 0),
        56: ("AlterPartition", 0, 3, 0),
        48: ("DescribeClientQuotas", 0, 1, 1),
        49: ("AlterClientQuotas", 0, 1, 1),
        67: ("AllocateProducerIds", 0, 0, 0),
        24: ("AddPartitionsToTxn", 0, 5, 3),
        25: ("AddOffsetsToTxn", 0, 4, 3),
        26: ("EndTxn", 0, 5, 3),
        27: ("WriteTxnMarkers", 1, 2, 1),
        28: ("TxnOffsetCommit", 0, 5, 3),
        65: ("DescribeTransactions", 0, 0, 0),
        61: ("DescribeProducers", 0, 0, 0),
        75: ("DescribeTopicPartitions", 0, 0, 0),
        66: ("ListTransactions", 0, 2, 0),
        17: ("SaslHandshake", 0, 1, None),
        36: ("SaslAuthenticate", 0, 2, 2),
        29: ("DescribeAcls", 1, 3, 2),
        30: ("CreateAcls", 1, 3, 2),
        31: ("DeleteAcls", 1, 3, 2),
        50: ("DescribeUserScramCredentials", 0, 0, 0),
        51: ("AlterUserScramCredentials", 0, 0, 0),
        68: ("ConsumerGroupHeartbeat", 0, 1, 0),
        69: ("ConsumerGroupDescribe", 0, 1, 0),
    }
    got = {
        key: (spec.name, spec.min_version, spec.max_version, spec.first_flexible)
        for key, spec in SUPPORTED_APIS.items()
    }
    assert got == expected
    assert SUPPORTED_APIS[0].is_flexible(9) and not SUPPORTED_APIS[0].is_flexible(8)
    assert not SUPPORTED_APIS[0].supports(2) and SUPPORTED_APIS[0].supports(13)


# --------------------------------------------------------------------------------------
# Defaults and the "newest shape encodes any version" rule.
# --------------------------------------------------------------------------------------


def test_missing_fields_get_defaults_and_decoding_fills_absent_fields() -> None:
    body = decode_body(1, 4, True, encode_body(1, 4, True, {}))
    assert body.replica_id == -1
    assert body.max_bytes == 0x7FFFFFFF
    assert body.isolation_level == 0
    assert body.topics == []
    # Fields v4 does not have are present with their defaults.
    assert body.session_epoch == -1
    assert body.rack_id == ""
    assert body.cluster_id is None
    assert body.replica_state == {"replica_id": -1, "replica_epoch": -1}
    assert body.forgotten_topics_data == []

    flexible = decode_body(1, 18, True, encode_body(1, 18, True, {"topics": [{"partitions": [{}]}]}))
    partition = flexible.topics[0].partitions[0]
    assert partition.high_watermark == 0x7FFFFFFFFFFFFFFF
    assert partition.replica_directory_id == uuid.UUID(int=0)
    assert partition.last_fetched_epoch == -1
    assert flexible.topics[0].topic_id == uuid.UUID(int=0)
    assert flexible.topics[0].topic == ""


@pytest.mark.parametrize(("key", "version", "request_"), ALL_SCHEMAS)
def test_an_empty_body_encodes_in_every_version(key: int, version: int, request_: bool) -> None:
    decoded = decode_body(key, version, request_, encode_body(key, version, request_, {}))
    assert encode_body(key, version, request_, decoded) == encode_body(key, version, request_, {})


def test_nullable_fields_default_to_null() -> None:
    metadata = decode_body(3, 1, True, encode_body(3, 1, True, {}))
    assert metadata.topics is None  # nullable from v1: null means all topics
    assert decode_body(3, 0, True, encode_body(3, 0, True, {})).topics == []
    produce = decode_body(0, 9, True, encode_body(0, 9, True, {"topic_data": [{"partition_data": [{}]}]}))
    assert produce.transactional_id is None
    assert produce.topic_data[0].partition_data[0].records is None


def test_newest_shape_encodes_in_the_oldest_version() -> None:
    newest = {
        "topics": [{"topic_id": uuid.uuid4(), "name": "orders"}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": True,
    }
    old = decode_body(3, 0, True, encode_body(3, 0, True, newest))
    assert [t.name for t in old.topics] == ["orders"]
    assert old.topics[0].topic_id == uuid.UUID(int=0)
    assert old.allow_auto_topic_creation is True


def test_tagged_fields_equal_to_their_default_are_not_written() -> None:
    plain = encode_body(0, 10, False, {"responses": [{"partition_responses": [{}]}]})
    with_default = encode_body(
        0,
        10,
        False,
        {"responses": [{"partition_responses": [{"current_leader": {"leader_id": -1, "leader_epoch": -1}}]}]},
    )
    assert plain == with_default
    with_leader = encode_body(
        0, 10, False, {"responses": [{"partition_responses": [{"current_leader": {"leader_id": 3}}]}]}
    )
    assert len(with_leader) > len(plain)
    decoded = decode_body(0, 10, False, with_leader)
    assert decoded.responses[0].partition_responses[0].current_leader == {"leader_id": 3, "leader_epoch": -1}


# --------------------------------------------------------------------------------------
# The DSL itself.
# --------------------------------------------------------------------------------------


def test_version_ranges() -> None:
    assert parse_versions("3+") == (3, 0x7FFF)
    assert parse_versions("0-12") == (0, 12)
    assert parse_versions("7") == (7, 7)
    assert parse_versions(None) is None
    assert parse_versions("none") is None
    for bad in ("", "3-1", "x", "+3"):
        with pytest.raises(ValueError):
            parse_versions(bad)


def test_field_declarations_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown type"):
        Field("x", "int33")
    with pytest.raises(ValueError, match="needs fields"):
        Field("x", "SomeStruct")
    with pytest.raises(ValueError, match="cannot have fields"):
        Field("x", "int32", fields=[Field("y", "int8")])
    with pytest.raises(ValueError, match="duplicate field"):
        Field("x", "[]S", fields=[Field("y", "int8"), Field("y", "int16")])
    assert Field("x", "int32", "2+", tag=4).tagged_versions == "2+"


def test_api_declarations_are_checked() -> None:
    tagged = Field("t", "int32", "0+", tag=0)
    with pytest.raises(ValueError, match="non-flexible"):
        ApiDefinition(key=1000, name="Bad", versions="0-2", flexible="1+", request=[tagged], response=[])
    with pytest.raises(ValueError, match="duplicate tags"):
        ApiDefinition(
            key=1000,
            name="Bad",
            versions="1",
            flexible="0+",
            request=[tagged, Field("u", "int8", "0+", tag=0)],
            response=[],
        )


def test_nullable_struct_round_trip() -> None:
    fields = [
        Field("first", "int8"),
        Field("maybe", "Pair", "0+", nullable="1+", fields=[Field("a", "int32"), Field("b", "string")]),
    ]
    v1 = message_struct("Example", fields, 1, flexible=False).compile()
    assert v1.build({"first": 1, "maybe": None}) == b"\x01\xff"
    assert v1.build({"first": 1, "maybe": {"a": 2, "b": "x"}}) == b"\x01\x01\x00\x00\x00\x02\x00\x01x"
    assert v1.parse(b"\x01\xff") == {"first": 1, "maybe": None}
    assert v1.parse(b"\x01\x01\x00\x00\x00\x02\x00\x01x") == {"first": 1, "maybe": {"a": 2, "b": "x"}}
    v0 = message_struct("Example", fields, 0, flexible=False).compile()
    assert v0.build({"first": 1}) == b"\x01\x00\x00\x00\x00\x00\x00"


def test_struct_layout_is_computed_once_per_version() -> None:
    assert message_struct_for(1, 12, False) is message_struct_for(1, 12, False)
    layout = message_struct_for(1, 12, False)
    assert layout.tagged is not None and layout.tagged == []
    assert message_struct_for(1, 11, False).tagged is None
