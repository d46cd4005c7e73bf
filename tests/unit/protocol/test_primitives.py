"""Kafka's primitive wire types: known byte vectors, round trips, rejected inputs."""

from __future__ import annotations

import io
import struct
import uuid
from typing import Any

import pytest

from protocol.primitives import (
    Array,
    Bool,
    Bytes,
    CompactBytes,
    CompactNullableBytes,
    CompactNullableString,
    CompactString,
    DecodeError,
    EncodeError,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    Message,
    MessageField,
    MessageStruct,
    NullableBytes,
    NullableString,
    RegionWriter,
    String,
    TaggedFields,
    UInt16,
    UInt32,
    UnsignedVarInt,
    Uuid,
    VarInt,
    VarLong,
    WireType,
    records_type,
)


def both_forms(wire: WireType) -> list[Any]:
    """The compiled form and the uncompiled object (which runs the compiled code)."""
    return [wire.compile(), wire]


def check(wire: WireType, value: Any, encoded: bytes) -> None:
    for form in both_forms(wire):
        assert form.build(value) == encoded, (wire, value)
        assert form.parse(encoded) == value, (wire, encoded)


UVARINT_VECTORS = [
    (0, b"\x00"),
    (1, b"\x01"),
    (127, b"\x7f"),
    (128, b"\x80\x01"),
    (300, b"\xac\x02"),
    (16383, b"\xff\x7f"),
    (16384, b"\x80\x80\x01"),
    (0xFFFFFFFF, b"\xff\xff\xff\xff\x0f"),
]
VARINT_VECTORS = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (1, b"\x02"),
    (63, b"\x7e"),
    (-64, b"\x7f"),
    (64, b"\x80\x01"),
    (-65, b"\x81\x01"),
    (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
    (-(2**31), b"\xff\xff\xff\xff\x0f"),
]
VARLONG_VECTORS = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
    (-(2**63), b"\xff" * 9 + b"\x01"),
]


@pytest.mark.parametrize(("value", "encoded"), UVARINT_VECTORS)
def test_unsigned_varint_vectors(value: int, encoded: bytes) -> None:
    check(UnsignedVarInt, value, encoded)


@pytest.mark.parametrize(("value", "encoded"), VARINT_VECTORS)
def test_varint_vectors(value: int, encoded: bytes) -> None:
    check(VarInt, value, encoded)


@pytest.mark.parametrize(("value", "encoded"), VARLONG_VECTORS + VARINT_VECTORS[:7])
def test_varlong_vectors(value: int, encoded: bytes) -> None:
    check(VarLong, value, encoded)


@pytest.mark.parametrize(
    ("wire", "data"),
    [
        (UnsignedVarInt, b"\xff\xff\xff\xff\x10"),  # 33 bits
        (UnsignedVarInt, b"\x80\x80\x80\x80\x80\x01"),  # 6 bytes
        (UnsignedVarInt, b"\x80"),  # truncated
        (UnsignedVarInt, b""),
        (VarInt, b"\xff\xff\xff\xff\x1f"),
        (VarInt, b"\x80\x80"),
        (VarLong, b"\xff" * 10 + b"\x01"),
    ],
)
def test_bad_varints_are_rejected(wire: WireType, data: bytes) -> None:
    with pytest.raises(DecodeError):
        wire.compile().parse(data)


@pytest.mark.parametrize(
    ("wire", "value"),
    [(UnsignedVarInt, -1), (UnsignedVarInt, 2**32), (VarInt, 2**31), (VarLong, -(2**63) - 1)],
)
def test_out_of_range_varints_are_not_encoded(wire: WireType, value: int) -> None:
    with pytest.raises(EncodeError):
        wire.compile().build(value)


def test_varint_round_trips_across_the_range() -> None:
    compiled = VarInt.compile(), VarLong.compile(), UnsignedVarInt.compile()
    for shift in range(64):
        for base in (1 << shift, (1 << shift) - 1):
            for value in (base, -base):
                if -(2**31) <= value < 2**31:
                    assert compiled[0].parse(compiled[0].build(value)) == value
                if -(2**63) <= value < 2**63:
                    assert compiled[1].parse(compiled[1].build(value)) == value
                if 0 <= value < 2**32:
                    assert compiled[2].parse(compiled[2].build(value)) == value


@pytest.mark.parametrize(
    ("wire", "value", "encoded"),
    [
        (Int8, -2, b"\xfe"),
        (Int16, -2, b"\xff\xfe"),
        (Int32, 0x01020304, b"\x01\x02\x03\x04"),
        (Int64, -(2**63), b"\x80" + b"\x00" * 7),
        (UInt16, 0xFFFE, b"\xff\xfe"),
        (UInt32, 0xFFFFFFFE, b"\xff\xff\xff\xfe"),
        (Float64, 1.5, b"\x3f\xf8" + b"\x00" * 6),
        (Bool, True, b"\x01"),
        (Bool, False, b"\x00"),
    ],
)
def test_fixed_width_vectors(wire: WireType, value: Any, encoded: bytes) -> None:
    check(wire, value, encoded)


def test_uuid() -> None:
    value = uuid.UUID("0123456789abcdef0123456789abcdef")
    check(Uuid, value, value.bytes)
    check(Uuid, uuid.UUID(int=0), bytes(16))
    assert Uuid.compile().build(None) == bytes(16)
    with pytest.raises(DecodeError):
        Uuid.compile().parse(bytes(15))


@pytest.mark.parametrize(
    ("wire", "value", "encoded"),
    [
        (String, "", b"\x00\x00"),
        (String, "h\u00e9", b"\x00\x03h\xc3\xa9"),
        (NullableString, None, b"\xff\xff"),
        (NullableString, "ab", b"\x00\x02ab"),
        (CompactString, "", b"\x01"),
        (CompactString, "ab", b"\x03ab"),
        (CompactNullableString, None, b"\x00"),
        (CompactNullableString, "", b"\x01"),
        (Bytes, b"", b"\x00\x00\x00\x00"),
        (Bytes, b"\x00\xff", b"\x00\x00\x00\x02\x00\xff"),
        (NullableBytes, None, b"\xff\xff\xff\xff"),
        (CompactBytes, b"\x07", b"\x02\x07"),
        (CompactNullableBytes, None, b"\x00"),
        (CompactNullableBytes, b"", b"\x01"),
    ],
)
def test_string_and_bytes_vectors(wire: WireType, value: Any, encoded: bytes) -> None:
    check(wire, value, encoded)


def test_long_compact_string_uses_multibyte_length() -> None:
    text = "x" * 200
    check(CompactString, text, b"\xc9\x01" + text.encode())


@pytest.mark.parametrize(
    ("wire", "data"),
    [
        (String, b"\xff\xff"),  # null in a non-nullable string
        (NullableString, b"\xff\xfe"),  # -2
        (String, b"\x00\x05abc"),  # truncated
        (String, b"\x00\x01"),
        (CompactString, b"\x00"),  # compact null in a non-nullable string
        (CompactString, b"\x05ab"),
        (Bytes, b"\xff\xff\xff\xff"),
        (NullableBytes, b"\xff\xff\xff\xfb"),  # -5
        (NullableBytes, b"\x00\x00\x00\x09abc"),
        (CompactBytes, b"\x00"),
        (CompactNullableBytes, b"\x03a"),
    ],
)
def test_bad_lengths_are_rejected(wire: WireType, data: bytes) -> None:
    with pytest.raises(DecodeError):
        wire.compile().parse(data)


def test_invalid_utf8_is_rejected() -> None:
    with pytest.raises(UnicodeDecodeError):
        String.compile().parse(b"\x00\x02\xc3\x28")


def test_wrong_python_types_are_not_encoded() -> None:
    with pytest.raises(EncodeError):
        String.compile().build(b"bytes")
    with pytest.raises(EncodeError):
        String.compile().build(None)
    with pytest.raises(EncodeError):
        String.compile().build("x" * 40000)
    with pytest.raises(EncodeError):
        Bytes.compile().build("text")
    with pytest.raises(struct.error):
        Int32.compile().build(2**31)


@pytest.mark.parametrize(
    ("compact", "nullable", "value", "encoded"),
    [
        (False, False, [1, -1], b"\x00\x00\x00\x02\x00\x00\x00\x01\xff\xff\xff\xff"),
        (False, True, None, b"\xff\xff\xff\xff"),
        (False, False, [], b"\x00\x00\x00\x00"),
        (True, False, [1, -1], b"\x03\x00\x00\x00\x01\xff\xff\xff\xff"),
        (True, True, None, b"\x00"),
        (True, False, [], b"\x01"),
    ],
)
def test_int32_array_vectors(compact: bool, nullable: bool, value: Any, encoded: bytes) -> None:
    check(Array(Int32, compact, nullable), value, encoded)


def test_string_and_struct_arrays() -> None:
    check(Array(CompactString, True, False), ["a", ""], b"\x03\x02a\x01")
    pair = MessageStruct("Pair", [MessageField("a", Int8, 0), MessageField("b", String, "")], tagged=None)
    check(Array(pair, False, False), [{"a": 1, "b": "x"}], b"\x00\x00\x00\x01\x01\x00\x01x")


@pytest.mark.parametrize(
    ("compact", "nullable", "data"),
    [
        (False, False, b"\xff\xff\xff\xff"),  # null but not nullable
        (False, True, b"\xff\xff\xff\xfe"),  # -2
        (True, False, b"\x00"),
        (False, False, b"\x00\x00\x00\x03\x00\x00\x00\x01"),  # truncated elements
        (False, False, b"\x7f\xff\xff\xff"),  # huge count, no data
    ],
)
def test_bad_arrays_are_rejected(compact: bool, nullable: bool, data: bytes) -> None:
    with pytest.raises(DecodeError):
        Array(Int32, compact, nullable).compile().parse(data)


def test_null_array_where_not_nullable_is_not_encoded() -> None:
    with pytest.raises(EncodeError):
        Array(Int32, True, False).compile().build(None)


def test_tagged_field_section() -> None:
    check(TaggedFields(), {}, b"\x00")
    check(TaggedFields(), {0: b"a", 5: b""}, b"\x02\x00\x01a\x05\x00")
    check(TaggedFields(), {200: b"zz"}, b"\x01\xc8\x01\x02zz")
    for bad in (
        b"\x02\x05\x00\x00\x00",  # out of order
        b"\x02\x01\x00\x01\x00",  # duplicate
        b"\x01\x00\x05ab",  # truncated value
        b"\x02\x00\x00",  # fewer fields than announced
    ):
        with pytest.raises(DecodeError):
            TaggedFields().compile().parse(bad)


def test_struct_with_declared_and_unknown_tags() -> None:
    struct_ = MessageStruct(
        "S",
        [MessageField("a", Int8, 0)],
        tagged=[
            MessageField("t1", Int32, -1, tag=1),
            MessageField("t0", CompactNullableString, None, tag=0, nullable=True),
        ],
    ).compile()
    assert struct_.build({"a": 1}) == b"\x01\x00"
    assert struct_.parse(b"\x01\x00") == {"a": 1, "t0": None, "t1": -1}
    encoded = struct_.build({"a": 1, "t1": 7, "t0": "x", "_unknown_tagged_fields": {9: b"?", 4: b""}})
    assert encoded == b"\x01\x04\x00\x02\x02x\x01\x04\x00\x00\x00\x07\x04\x00\x09\x01?"
    parsed = struct_.parse(encoded)
    assert parsed == {"a": 1, "t0": "x", "t1": 7, "_unknown_tagged_fields": {4: b"", 9: b"?"}}
    assert struct_.build(parsed) == encoded
    with pytest.raises(DecodeError):  # declared tag whose value is longer than its size
        struct_.parse(b"\x01\x01\x01\x02\x00\x00\x00\x07")
    with pytest.raises(EncodeError):  # unknown tag colliding with a declared one
        struct_.build({"a": 1, "t1": 7, "_unknown_tagged_fields": {1: b""}})


def test_message_is_a_dict_with_attributes() -> None:
    message = Message(topic_data=[1])
    assert message.topic_data is message["topic_data"]
    message.acks = -1
    assert message == {"topic_data": [1], "acks": -1}
    del message.acks
    with pytest.raises(AttributeError):
        _ = message.acks
    with pytest.raises(AttributeError):
        del message.acks


class Region:
    def __init__(self, size: int) -> None:
        self.size = size


def test_records_accept_bytes_null_and_regions() -> None:
    classic = records_type(compact=False, nullable=True).compile()
    flexible = records_type(compact=True, nullable=True).compile()
    check(records_type(False, True), b"abc", b"\x00\x00\x00\x03abc")
    check(records_type(True, True), None, b"\x00")
    region = Region(300)
    for compiled, prefix in ((classic, b"\x00\x00\x01\x2c"), (flexible, b"\xad\x02")):
        writer = RegionWriter()
        writer.write(b"<")
        compiled.build_stream(region, writer)
        writer.write(b">")
        assert writer.parts() == [b"<" + prefix, region, b">"]
        assert writer.region_bytes() == 300
        with pytest.raises(EncodeError):  # a plain stream cannot cut
            compiled.build_stream(region, io.BytesIO())
    with pytest.raises(EncodeError):
        records_type(False, False).compile().build(None)
    with pytest.raises(EncodeError):
        classic.build(12)


def test_long_fixed_arrays_round_trip_element_by_element() -> None:
    values = list(range(-500, 500))
    encoded = Array(Int64, True, False).compile().build(values)
    assert encoded[:2] == b"\xe9\x07" and len(encoded) == 2 + 8 * 1000
    assert Array(Int64, True, False).compile().parse(encoded) == values
    assert Array(Bool, False, False).compile().parse(b"\x00\x00\x01\x2c" + b"\x01" * 300) == [True] * 300


def test_hostile_array_counts_fail_on_the_short_read() -> None:
    # Fixed-width reads inside structs surface a short read as struct.error (the
    # message layer turns both into its own errors); nothing is allocated up front.
    pair = MessageStruct("Pair", [MessageField("a", Int8, 0)], tagged=None)
    for element in (Int32, Int64, pair, String):
        with pytest.raises((DecodeError, struct.error)):
            Array(element, False, False).compile().parse(b"\x7f\xff\xff\xff" + b"\x00" * 64)
        with pytest.raises((DecodeError, struct.error)):
            Array(element, True, False).compile().parse(b"\xff\xff\xff\xff\x0f" + b"\x00" * 64)


def test_arrays_of_elements_that_take_no_bytes_are_refused() -> None:
    empty = MessageStruct("Empty", [], tagged=None)
    with pytest.raises(ValueError, match="at least one byte"):
        Array(empty, False, False)
    assert Array(MessageStruct("Flexible", [], tagged=[]), True, False).min_size() == 1
