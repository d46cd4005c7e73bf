"""Kafka's wire types as construct classes whose compiled form is plain Python.

construct's `compile()` only produces fast code for classes that emit their own source
(`_emitparse` / `_emitbuild`); any other class makes the compiled schema call back
into the slow interpreter. So every type a Kafka message needs is a small Construct
subclass here that emits source, and each of them also runs its compiled form when it
is used uncompiled, so there is exactly one implementation of each encoding.

Emitted code follows construct's conventions: a parse expression reads from `io`, a
build expression writes `obj` to `io`; `this` (construct's context) is passed along but
never consulted. Emitted code imports its helpers from this module (the `_RUNTIME`
names below); they raise `DecodeError` for bytes that cannot be the expected value and
`EncodeError` for Python values that cannot be written.

Nothing here holds state between calls besides caches (a wire type's own compiled
form, packers of fixed-width arrays): the classes are immutable schema nodes, shared
freely between threads.
"""

from __future__ import annotations

import io as _io
import struct
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, cast

from construct import CodeGen, Construct

from .framing import ProtocolError


class DecodeError(ProtocolError):
    """Bytes that do not decode as the message, header or value that was expected."""


class EncodeError(ProtocolError):
    """A Python value that cannot be written as the wire type its field declares."""


class FileRegion(Protocol):
    """`size` bytes of record data that the caller sends itself (e.g. with sendfile).

    Only a `records` field accepts one, and only when built into a `RegionWriter`.
    """

    size: int


class Message(dict):
    """A decoded message body or struct: a dict whose keys are also attributes.

    `body["topic_data"]` and `body.topic_data` are the same value. Keys that collide
    with dict methods (`items`, `keys`, `get`...) are only reachable by subscript.
    Decoding creates a fresh tree of these for every call, so the receiver owns it.
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        return f"Message({dict.__repr__(self)})"


class MessageView(dict[str, Any]):
    """The static shape of a decoded `Message`, for mypy: protocol.typed's `...View` classes
    derive from it and declare their fields as attributes.

    Never instantiated: decoding makes plain Messages. It is not a Message to mypy so that it
    lacks Message's catch-all `__getattr__`: an attribute its view does not declare (a misspelt
    field) is then an error instead of Any.
    """

    __slots__ = ()


class Encoded:
    """A struct already encoded for the message version at hand, standing for it as an element
    of an array of structs: what changes rarely and is asked for often (a topic's Metadata
    answer) is encoded once. Whoever makes one answers for its version matching the message's."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class RegionWriter(_io.BytesIO):
    """A build stream that lets `records` fields stand for file regions.

    Owned by the one encode call that created it. `add_region` notes that `region`
    follows the bytes written so far; `parts()` then returns the output cut at those
    points: [bytes, region, bytes, region, ..., bytes] (bytes chunks may be empty).
    """

    def __init__(self) -> None:
        super().__init__()
        self.regions: list[tuple[int, FileRegion]] = []

    def add_region(self, region: FileRegion) -> None:
        self.regions.append((self.tell(), region))

    def region_bytes(self) -> int:
        return sum(region.size for _, region in self.regions)

    def parts(self) -> list[bytes | FileRegion]:
        data = self.getvalue()
        if not self.regions:
            return [data]
        parts: list[bytes | FileRegion] = []
        start = 0
        for offset, region in self.regions:
            parts.append(data[start:offset])
            parts.append(region)
            start = offset
        parts.append(data[start:])
        return parts


# --------------------------------------------------------------------------------------
# Runtime helpers called by the emitted code.
# --------------------------------------------------------------------------------------

ZERO_UUID = uuid.UUID(int=0)
_ZERO_UUID_BYTES = bytes(16)
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_UVARINT_ONE_BYTE = [bytes((value,)) for value in range(128)]
_NULL_I16 = _I16.pack(-1)
_NULL_I32 = _I32.pack(-1)
_BYTES_LIKE = (bytes, bytearray, memoryview)


def _truncated(what: str) -> DecodeError:
    return DecodeError(f"truncated {what}")


def read_exact(io: _io.BytesIO, size: int, what: str) -> bytes:
    data = io.read(size)
    if len(data) != size:
        raise _truncated(what)
    return data


def finish_uvarint(io: _io.BytesIO, first: bytes) -> int:
    """Decode an unsigned varint whose first byte was already read."""
    if not first:
        raise _truncated("unsigned varint")
    byte = first[0]
    if byte < 0x80:
        return byte
    result = byte & 0x7F
    shift = 7
    while True:
        more = io.read(1)
        if not more:
            raise _truncated("unsigned varint")
        byte = more[0]
        if shift == 28 and byte > 0x0F:
            raise DecodeError("unsigned varint does not fit in 32 bits")
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result
        shift += 7


def read_uvarint(io: _io.BytesIO) -> int:
    return finish_uvarint(io, io.read(1))


def _base128(value: int) -> bytes:
    """Little-endian groups of 7 bits, high bit set on all but the last (value >= 0)."""
    if value < 0x80:
        return _UVARINT_ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def uvarint_bytes(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _UVARINT_ONE_BYTE[value]
    if not 0 <= value <= 0xFFFFFFFF:
        raise EncodeError(f"unsigned varint out of range: {value!r}")
    return _base128(value)


def _read_zigzag(io: _io.BytesIO, bits: int, what: str) -> int:
    result = 0
    for shift in range(0, bits + 3, 7):
        more = io.read(1)
        if not more:
            raise _truncated(what)
        byte = more[0]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result >> bits:
                raise DecodeError(f"{what} out of range")
            return (result >> 1) ^ -(result & 1)
    raise DecodeError(f"{what} longer than {(bits + 6) // 7} bytes")


def read_varint(io: _io.BytesIO) -> int:
    return _read_zigzag(io, 32, "varint")


def read_varlong(io: _io.BytesIO) -> int:
    return _read_zigzag(io, 64, "varlong")


def _zigzag_bytes(value: int, bits: int) -> bytes:
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise EncodeError(f"value out of range for a {bits}-bit varint: {value!r}")
    return _base128((value << 1) ^ (value >> (bits - 1)))


def varint_bytes(value: int) -> bytes:
    return _zigzag_bytes(value, 32)


def varlong_bytes(value: int) -> bytes:
    return _zigzag_bytes(value, 64)


def read_uuid(io: _io.BytesIO) -> uuid.UUID:
    data = io.read(16)
    if data == _ZERO_UUID_BYTES:
        return ZERO_UUID
    if len(data) != 16:
        raise _truncated("uuid")
    return uuid.UUID(bytes=data)


def uuid_bytes(value: uuid.UUID | str | None) -> bytes:
    if isinstance(value, uuid.UUID):
        return value.bytes
    if value is None:
        return _ZERO_UUID_BYTES
    if isinstance(value, str):
        return uuid.UUID(value).bytes
    raise EncodeError(f"expected a uuid.UUID, got {type(value).__name__}")


def _check_length(length: int, nullable: bool, what: str) -> bool:
    """True when the length announces null; raises for lengths no value can have."""
    if length == -1 and nullable:
        return True
    raise DecodeError(f"invalid {what} length {length}")


def read_string(io: _io.BytesIO) -> str:
    (length,) = _I16.unpack(read_exact(io, 2, "string length"))
    if length < 0:
        _check_length(length, False, "string")
    return read_exact(io, length, "string").decode()


def read_nullable_string(io: _io.BytesIO) -> str | None:
    (length,) = _I16.unpack(read_exact(io, 2, "string length"))
    if length < 0 and _check_length(length, True, "string"):
        return None
    return read_exact(io, length, "string").decode()


def read_compact_string(io: _io.BytesIO) -> str:
    length = read_uvarint(io) - 1
    if length < 0:
        _check_length(length, False, "compact string")
    return read_exact(io, length, "string").decode()


def read_compact_nullable_string(io: _io.BytesIO) -> str | None:
    length = read_uvarint(io) - 1
    if length < 0:
        return None
    return read_exact(io, length, "string").decode()


def read_bytes(io: _io.BytesIO) -> bytes:
    (length,) = _I32.unpack(read_exact(io, 4, "bytes length"))
    if length < 0:
        _check_length(length, False, "bytes")
    return read_exact(io, length, "bytes")


def read_nullable_bytes(io: _io.BytesIO) -> bytes | None:
    (length,) = _I32.unpack(read_exact(io, 4, "bytes length"))
    if length < 0 and _check_length(length, True, "bytes"):
        return None
    return read_exact(io, length, "bytes")


def read_compact_bytes(io: _io.BytesIO) -> bytes:
    length = read_uvarint(io) - 1
    if length < 0:
        _check_length(length, False, "compact bytes")
    return read_exact(io, length, "bytes")


def read_compact_nullable_bytes(io: _io.BytesIO) -> bytes | None:
    length = read_uvarint(io) - 1
    if length < 0:
        return None
    return read_exact(io, length, "bytes")


def _encoded_text(value: Any) -> bytes:
    if not isinstance(value, str):
        raise EncodeError(f"expected a str, got {type(value).__name__}")
    return value.encode()


def write_string(io: _io.BytesIO, value: Any) -> None:
    data = _encoded_text(value)
    if len(data) > 0x7FFF:
        raise EncodeError(f"string of {len(data)} bytes is too long for an int16 length")
    io.write(_I16.pack(len(data)))
    io.write(data)


def write_nullable_string(io: _io.BytesIO, value: Any) -> None:
    if value is None:
        io.write(_NULL_I16)
    else:
        write_string(io, value)


def write_compact_string(io: _io.BytesIO, value: Any) -> None:
    data = _encoded_text(value)
    io.write(uvarint_bytes(len(data) + 1))
    io.write(data)


def write_compact_nullable_string(io: _io.BytesIO, value: Any) -> None:
    if value is None:
        io.write(b"\x00")
    else:
        write_compact_string(io, value)


def _byte_length(value: Any) -> int:
    if type(value) is memoryview:
        return value.nbytes
    if not isinstance(value, _BYTES_LIKE):
        raise EncodeError(f"expected bytes, got {type(value).__name__}")
    return len(value)


def write_bytes(io: _io.BytesIO, value: Any) -> None:
    io.write(_I32.pack(_byte_length(value)))
    io.write(value)


def write_nullable_bytes(io: _io.BytesIO, value: Any) -> None:
    if value is None:
        io.write(_NULL_I32)
    else:
        write_bytes(io, value)


def write_compact_bytes(io: _io.BytesIO, value: Any) -> None:
    io.write(uvarint_bytes(_byte_length(value) + 1))
    io.write(value)


def write_compact_nullable_bytes(io: _io.BytesIO, value: Any) -> None:
    if value is None:
        io.write(b"\x00")
    else:
        write_compact_bytes(io, value)


def _add_region(io: _io.BytesIO, region: Any) -> None:
    add_region = getattr(io, "add_region", None)
    if add_region is None:
        raise EncodeError("a FileRegion in a records field needs a RegionWriter stream")
    add_region(region)


def read_records(io: _io.BytesIO, compact: bool, nullable: bool) -> memoryview | None:
    """A records field, as a view into the bytes being parsed: record batches are not copied
    here (a produce request's are copied once, when the log stamps their offsets)."""
    if compact:
        length = read_uvarint(io) - 1
    else:
        (length,) = _I32.unpack(read_exact(io, 4, "records length"))
    if length < 0:
        if nullable and length == -1:
            return None
        raise DecodeError(f"invalid records length {length}")
    start = io.tell()
    # The parsed bytes themselves, not a copy: a BytesIO made from bytes shares them.
    data = io.getvalue()
    if start + length > len(data):
        raise _truncated("records")
    io.seek(start + length)
    return memoryview(data)[start:start + length]


def write_records(io: _io.BytesIO, value: Any, compact: bool, nullable: bool) -> None:
    """Write a records field: bytes inline, or the length of a FileRegion and a cut."""
    if value is None:
        if not nullable:
            raise EncodeError("records field is not nullable in this version")
        io.write(b"\x00" if compact else _NULL_I32)
        return
    if isinstance(value, _BYTES_LIKE):
        size = _byte_length(value)
        io.write(uvarint_bytes(size + 1) if compact else _I32.pack(size))
        io.write(value)
        return
    region_size = getattr(value, "size", None)
    if not isinstance(region_size, int) or region_size < 0:
        raise EncodeError(f"expected bytes or a FileRegion for records, got {type(value).__name__}")
    io.write(uvarint_bytes(region_size + 1) if compact else _I32.pack(region_size))
    _add_region(io, value)


def read_array_length(io: _io.BytesIO, compact: bool, nullable: bool) -> int:
    """The element count of an array, or -1 for null (only when nullable)."""
    if compact:
        length = read_uvarint(io) - 1
    else:
        (length,) = _I32.unpack(read_exact(io, 4, "array length"))
    if length < 0 and not (length == -1 and nullable):
        raise DecodeError(f"invalid array length {length}")
    return length


def null_array_bytes(compact: bool, nullable: bool) -> bytes:
    if not nullable:
        raise EncodeError("array is not nullable in this version")
    return b"\x00" if compact else _NULL_I32


_ARRAY_STRUCTS: dict[tuple[str, int], struct.Struct] = {}
# Longer arrays go element by element: a struct format with a count of n allocates a
# table of n entries, which a hostile count must not be able to trigger.
_WHOLE_ARRAY_COUNT = 256


def _array_struct(fmt: str, count: int) -> struct.Struct:
    packer = _ARRAY_STRUCTS.get((fmt, count))
    if packer is None:
        packer = _ARRAY_STRUCTS[(fmt, count)] = struct.Struct(f">{count}{fmt}")
    return packer


def read_fixed_array(
    io: _io.BytesIO, fmt: str, size: int, compact: bool, nullable: bool
) -> list[Any] | None:
    """A whole array of fixed-width elements (count included), None when null."""
    count = read_array_length(io, compact, nullable)
    if count < 0:
        return None
    data = read_exact(io, size * count, "array")
    if count <= _WHOLE_ARRAY_COUNT:
        return list(_array_struct(fmt, count).unpack(data))
    return [value for (value,) in struct.iter_unpack(">" + fmt, data)]


def write_fixed_array(io: _io.BytesIO, items: Any, fmt: str, compact: bool, nullable: bool) -> None:
    """A whole array of fixed-width elements (count included), or null for None."""
    if items is None:
        io.write(null_array_bytes(compact, nullable))
        return
    count = len(items)
    if compact:
        io.write(_UVARINT_ONE_BYTE[count + 1] if count < 0x7F else uvarint_bytes(count + 1))
    else:
        io.write(_I32.pack(count))
    if count <= _WHOLE_ARRAY_COUNT:
        io.write(_array_struct(fmt, count).pack(*items))
    else:
        io.write(b"".join(map(_array_struct(fmt, 1).pack, items)))


def read_tagged_section(io: _io.BytesIO, first: bytes) -> dict[int, bytes]:
    """A tagged-field section none of whose tags is declared: {tag: raw value}."""
    count = finish_uvarint(io, first)
    fields: dict[int, bytes] = {}
    last = -1
    for _ in range(count):
        tag = read_uvarint(io)
        check_tag_order(tag, last)
        last = tag
        size = read_uvarint(io)
        fields[tag] = read_exact(io, size, "tagged field")
    return fields


def check_tag_order(tag: int, last: int) -> None:
    if tag <= last:
        raise DecodeError(f"tagged field {tag} out of order")


def check_tag_end(io: _io.BytesIO, end: int, tag: int) -> None:
    if io.tell() != end:
        raise DecodeError(f"tagged field {tag} does not match its declared size")


def write_tagged_section(io: _io.BytesIO, fields: Iterable[tuple[int, bytes]]) -> None:
    fields = list(fields)
    io.write(uvarint_bytes(len(fields)))
    for tag, data in fields:
        io.write(uvarint_bytes(tag))
        io.write(uvarint_bytes(_byte_length(data)))
        io.write(data)


def merge_unknown_tags(
    declared: list[tuple[int, bytes]], unknown: Mapping[int, bytes]
) -> list[tuple[int, bytes]]:
    """Declared tagged fields plus kept unknown ones, in ascending tag order."""
    merged = dict(declared)
    for tag, data in unknown.items():
        if not isinstance(tag, int) or tag < 0:
            raise EncodeError(f"unknown tagged field key must be a tag number, got {tag!r}")
        if tag in merged:
            raise EncodeError(f"tag {tag} is both a declared field and an unknown tagged field")
        merged[tag] = data
    return sorted(merged.items())


def tag_value_bytes(build: Any, value: Any, this: Any) -> bytes:
    stream = _io.BytesIO()
    build(value, stream, this)
    return stream.getvalue()


def read_struct_presence(io: _io.BytesIO) -> bool:
    marker = read_exact(io, 1, "nullable struct marker")[0]
    if marker == 0xFF:
        return False
    if marker == 1:
        return True
    raise DecodeError(f"invalid nullable struct marker {marker}")


_RUNTIME = (
    "Encoded",
    "UUID_",
    "Message",
    "ZERO_UUID",
    "check_tag_end",
    "check_tag_order",
    "finish_uvarint",
    "merge_unknown_tags",
    "null_array_bytes",
    "read_array_length",
    "read_bytes",
    "read_compact_bytes",
    "read_compact_nullable_bytes",
    "read_compact_nullable_string",
    "read_compact_string",
    "read_exact",
    "read_fixed_array",
    "read_nullable_bytes",
    "read_nullable_string",
    "read_records",
    "read_string",
    "read_struct_presence",
    "read_tagged_section",
    "read_uuid",
    "read_uvarint",
    "read_varint",
    "read_varlong",
    "tag_value_bytes",
    "uuid_bytes",
    "uvarint_bytes",
    "varint_bytes",
    "varlong_bytes",
    "write_bytes",
    "write_compact_bytes",
    "write_compact_nullable_bytes",
    "write_compact_nullable_string",
    "write_compact_string",
    "write_fixed_array",
    "write_nullable_bytes",
    "write_nullable_string",
    "write_records",
    "write_string",
    "write_tagged_section",
)
UUID_ = uuid.UUID


def _import_runtime(code: CodeGen) -> None:
    code.append(f"from {__name__} import ({', '.join(_RUNTIME)})")


# --------------------------------------------------------------------------------------
# Construct classes.
# --------------------------------------------------------------------------------------


class WireType(Construct):
    """Base of every wire type here: uncompiled use runs the compiled form."""

    def __init__(self) -> None:
        super().__init__()
        self._compiled: Any = None

    def _compiled_form(self) -> Any:
        if self._compiled is None:
            self._compiled = self.compile()
        return self._compiled

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        return self._compiled_form().parsefunc(stream, context)

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        self._compiled_form().buildfunc(obj, stream, context)
        return obj

    def min_size(self) -> int:
        """The fewest bytes any value of this type takes on the wire."""
        raise NotImplementedError

    def _emitparse(self, code: CodeGen) -> str:
        raise NotImplementedError

    def _emitbuild(self, code: CodeGen) -> str:
        raise NotImplementedError


class FixedPrimitive(WireType):
    """A fixed-width big-endian number (or bool) that struct packs directly.

    `fmt` is its struct format character; `MessageStruct` packs runs of consecutive
    fixed fields with one combined format.
    """

    def __init__(self, name: str, fmt: str) -> None:
        super().__init__()
        self.kind = name
        self.fmt = fmt
        self.size = struct.calcsize(">" + fmt)

    def __repr__(self) -> str:
        return f"<{self.kind}>"

    def _sizeof(self, context: Any, path: Any) -> int:
        return self.size

    def min_size(self) -> int:
        return self.size

    def struct_name(self, code: CodeGen) -> str:
        name = f"fixed_{self.kind}"
        code.append(f"{name} = struct.Struct('>{self.fmt}')")
        return name

    def _emitparse(self, code: CodeGen) -> str:
        return f"{self.struct_name(code)}.unpack(io.read({self.size}))[0]"

    def _emitbuild(self, code: CodeGen) -> str:
        return f"io.write({self.struct_name(code)}.pack(obj))"


Int8 = FixedPrimitive("int8", "b")
Int16 = FixedPrimitive("int16", "h")
Int32 = FixedPrimitive("int32", "i")
Int64 = FixedPrimitive("int64", "q")
UInt16 = FixedPrimitive("uint16", "H")
UInt32 = FixedPrimitive("uint32", "I")
Float64 = FixedPrimitive("float64", "d")
Bool = FixedPrimitive("bool", "?")


class _HelperType(WireType):
    """A type whose parse and build are one call to a runtime helper each."""

    def __init__(self, kind: str, reader: str, writer: str, smallest: int) -> None:
        super().__init__()
        self.kind = kind
        self.reader = reader
        self.writer = writer
        self.smallest = smallest

    def min_size(self) -> int:
        return self.smallest

    def __repr__(self) -> str:
        return f"<{self.kind}>"

    def _emitparse(self, code: CodeGen) -> str:
        _import_runtime(code)
        return f"{self.reader}(io)"

    def _emitbuild(self, code: CodeGen) -> str:
        _import_runtime(code)
        return f"{self.writer}(io, obj)"


class _EncodedValueType(_HelperType):
    """A type whose builder returns the encoded bytes (varints, uuid)."""

    def _emitbuild(self, code: CodeGen) -> str:
        _import_runtime(code)
        return f"io.write({self.writer}(obj))"


UnsignedVarInt = _EncodedValueType("uvarint", "read_uvarint", "uvarint_bytes", 1)
VarInt = _EncodedValueType("varint", "read_varint", "varint_bytes", 1)
VarLong = _EncodedValueType("varlong", "read_varlong", "varlong_bytes", 1)
Uuid = _EncodedValueType("uuid", "read_uuid", "uuid_bytes", 16)

String = _HelperType("string", "read_string", "write_string", 2)
NullableString = _HelperType("nullable_string", "read_nullable_string", "write_nullable_string", 2)
CompactString = _HelperType("compact_string", "read_compact_string", "write_compact_string", 1)
CompactNullableString = _HelperType(
    "compact_nullable_string", "read_compact_nullable_string", "write_compact_nullable_string", 1
)
Bytes = _HelperType("bytes", "read_bytes", "write_bytes", 4)
NullableBytes = _HelperType("nullable_bytes", "read_nullable_bytes", "write_nullable_bytes", 4)
CompactBytes = _HelperType("compact_bytes", "read_compact_bytes", "write_compact_bytes", 1)
CompactNullableBytes = _HelperType(
    "compact_nullable_bytes", "read_compact_nullable_bytes", "write_compact_nullable_bytes", 1
)


def string_type(compact: bool, nullable: bool) -> WireType:
    if compact:
        return CompactNullableString if nullable else CompactString
    return NullableString if nullable else String


def bytes_type(compact: bool, nullable: bool) -> WireType:
    if compact:
        return CompactNullableBytes if nullable else CompactBytes
    return NullableBytes if nullable else Bytes


class Records(WireType):
    """A record-set field: opaque bytes on the wire, or a FileRegion when building.

    Parsing gives a view into the bytes parsed (None for null). Building accepts bytes, None (when nullable)
    or any object with an int `size`, which is written as the length and then left
    out of the stream for the caller to send (see `RegionWriter`).
    """

    def __init__(self, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.compact = compact
        self.nullable = nullable

    def __repr__(self) -> str:
        return f"<records compact={self.compact} nullable={self.nullable}>"

    def min_size(self) -> int:
        return 1 if self.compact else 4

    def _emitparse(self, code: CodeGen) -> str:
        _import_runtime(code)
        return f"read_records(io, {self.compact}, {self.nullable})"

    def _emitbuild(self, code: CodeGen) -> str:
        _import_runtime(code)
        return f"write_records(io, obj, {self.compact}, {self.nullable})"


_RECORDS = {(c, n): Records(c, n) for c in (False, True) for n in (False, True)}


def records_type(compact: bool, nullable: bool) -> Records:
    return _RECORDS[(compact, nullable)]


class Array(WireType):
    """An array of one element type: int32 count (-1 null) or compact count + 1 (0 null)."""

    def __init__(self, element: WireType, compact: bool, nullable: bool) -> None:
        super().__init__()
        if element.min_size() < 1:
            # Parsing relies on every element consuming input: a hostile count then
            # ends at the first short read instead of building elements from nothing.
            raise ValueError(f"array elements must take at least one byte: {element!r}")
        self.element = element
        self.compact = compact
        self.nullable = nullable

    def __repr__(self) -> str:
        return f"<array of {self.element!r} compact={self.compact} nullable={self.nullable}>"

    def min_size(self) -> int:
        return 1 if self.compact else 4

    def _emitparse(self, code: CodeGen) -> str:
        _import_runtime(code)
        element = self.element
        if isinstance(element, FixedPrimitive):
            return (
                f"read_fixed_array(io, {element.fmt!r}, {element.size}, {self.compact}, {self.nullable})"
            )
        fname = f"parse_array_{code.allocateId()}"
        code.append(
            "\n".join([
                f"def {fname}(io, this):",
                f"    count = read_array_length(io, {self.compact}, {self.nullable})",
                "    if count < 0:",
                "        return None",
                f"    return [{element._compileparse(code)} for _ in range(count)]",
            ])
        )
        return f"{fname}(io, this)"

    def _emitbuild(self, code: CodeGen) -> str:
        _import_runtime(code)
        element = self.element
        if isinstance(element, FixedPrimitive):
            return f"write_fixed_array(io, obj, {element.fmt!r}, {self.compact}, {self.nullable})"
        fname = f"build_array_{code.allocateId()}"
        count = "uvarint_bytes(len(items) + 1)" if self.compact else "fixed_count.pack(len(items))"
        code.append("fixed_count = struct.Struct('>i')")
        code.append(
            "\n".join([
                f"def {fname}(obj, io, this):",
                "    if obj is None:",
                f"        io.write(null_array_bytes({self.compact}, {self.nullable}))",
                "        return",
                "    items = obj",
                f"    io.write({count})",
                "    for obj in items:",
                *([
                    "        if obj.__class__ is Encoded:",
                    "            io.write(obj.data)",
                    "            continue",
                ] if isinstance(element, MessageStruct) else []),
                f"        {element._compilebuild(code)}",
            ])
        )
        return f"{fname}(obj, io, this)"


class TaggedFields(WireType):
    """A tagged-field section with no declared tags: parses to and builds from {tag: bytes}.

    Used for the request header v2; message structs emit their own sections because
    they also decode their declared tags.
    """

    def __repr__(self) -> str:
        return "<tagged fields>"

    def min_size(self) -> int:
        return 1

    def _emitparse(self, code: CodeGen) -> str:
        _import_runtime(code)
        return "read_tagged_section(io, io.read(1))"

    def _emitbuild(self, code: CodeGen) -> str:
        _import_runtime(code)
        return "write_tagged_section(io, sorted((obj or {}).items()))"


class MessageField:
    """One field of a `MessageStruct` at one version: its key, wire type and default.

    `default` is an immutable value, an empty list, or a `MessageStruct` meaning "a
    fresh struct of its defaults". `nullable` matters for tagged fields only: a None
    given for a non-nullable tagged field means "not present".
    """

    __slots__ = ("name", "wire", "default", "tag", "nullable")

    def __init__(
        self,
        name: str,
        wire: WireType,
        default: Any,
        tag: int | None = None,
        nullable: bool = False,
    ) -> None:
        self.name = name
        self.wire = wire
        self.default = default
        self.tag = tag
        self.nullable = nullable


def _emit_value(code: CodeGen, value: Any) -> str:
    """Source of an expression that makes a fresh copy of a default value."""
    if isinstance(value, MessageStruct):
        return value.emit_defaults(code)
    if isinstance(value, list):
        if value:
            raise ValueError("only empty lists can be defaults")
        return "[]"
    if isinstance(value, uuid.UUID):
        _import_runtime(code)
        return "ZERO_UUID" if value == ZERO_UUID else f"UUID_({str(value)!r})"
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return repr(value)
    raise ValueError(f"unsupported default {value!r}")


def _emit_get(code: CodeGen, field: MessageField) -> list[str]:
    """Lines that bind `obj` to the field's value in `get`'s mapping, or its default."""
    if isinstance(field.default, MessageStruct):
        # A fresh default struct is only made when the caller left the field out.
        return [
            f"    obj = get({field.name!r})",
            "    if obj is None:",
            f"        obj = {field.default.emit_defaults(code)}",
        ]
    return [f"    obj = get({field.name!r}, {_emit_value(code, field.default)})"]


class MessageStruct(WireType):
    """The fields of one struct (or a whole message body) at one version.

    Parsing builds a `Message` directly, without construct's per-struct context.
    `fields` are written in order; `tagged` (None when the version is not flexible)
    are the declared tagged fields, written in tag order when they differ from their
    default; `absent` are the names and defaults of fields this version does not have,
    filled into every parsed Message so readers see one shape across versions.
    Unknown tagged fields are parsed into `_unknown_tagged_fields` ({tag: bytes}) and
    written back from there.
    """

    UNKNOWN_TAGS = "_unknown_tagged_fields"

    def __init__(
        self,
        name: str,
        fields: list[MessageField],
        tagged: list[MessageField] | None,
        absent: list[tuple[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        self.struct_name = name
        self.fields = list(fields)
        self.tagged = None if tagged is None else sorted(tagged, key=lambda f: f.tag or 0)
        self.absent = list(absent or [])
        if self.tagged is not None:
            tags = [f.tag for f in self.tagged]
            if len(set(tags)) != len(tags) or any(t is None or t < 0 for t in tags):
                raise ValueError(f"{name}: tagged fields need distinct tags >= 0, got {tags}")

    def __repr__(self) -> str:
        return f"<struct {self.struct_name}>"

    def min_size(self) -> int:
        return sum(f.wire.min_size() for f in self.fields) + (0 if self.tagged is None else 1)

    def _runs(self) -> list[list[MessageField]]:
        """Consecutive fixed-width fields grouped, everything else alone."""
        runs: list[list[MessageField]] = []
        for field in self.fields:
            if (
                isinstance(field.wire, FixedPrimitive)
                and runs
                and isinstance(runs[-1][0].wire, FixedPrimitive)
            ):
                runs[-1].append(field)
            else:
                runs.append([field])
        return runs

    def _run_struct(self, code: CodeGen, run: list[MessageField]) -> tuple[str, int]:
        fmt = "".join(cast(FixedPrimitive, f.wire).fmt for f in run)
        name = f"fixed_run_{fmt.replace('?', 'B_')}"
        code.append(f"{name} = struct.Struct('>{fmt}')")
        return name, struct.calcsize(">" + fmt)

    def emit_defaults(self, code: CodeGen) -> str:
        """Source of an expression that makes a fresh Message of this struct's defaults."""
        emitted: dict[int, str] = code.__dict__.setdefault("defaults_functions", {})
        fname = emitted.get(id(self))
        if fname is None:
            fname = emitted[id(self)] = f"defaults_struct_{code.allocateId()}"
            lines = [f"def {fname}():", "    m = Message()"]
            for field in [*self.fields, *(self.tagged or [])]:
                lines.append(f"    m[{field.name!r}] = {_emit_value(code, field.default)}")
            for name, default in self.absent:
                lines.append(f"    m[{name!r}] = {_emit_value(code, default)}")
            lines.append("    return m")
            _import_runtime(code)
            code.append("\n".join(lines))
        return f"{fname}()"

    def _emitparse(self, code: CodeGen) -> str:
        _import_runtime(code)
        fname = f"parse_struct_{code.allocateId()}"
        lines = [f"def {fname}(io, this):", "    m = Message()"]
        for run in self._runs():
            if len(run) > 1:
                sname, size = self._run_struct(code, run)
                targets = ", ".join(f"m[{f.name!r}]" for f in run)
                lines.append(f"    {targets} = {sname}.unpack(io.read({size}))")
            else:
                field = run[0]
                lines.append(f"    m[{field.name!r}] = {field.wire._compileparse(code)}")
        for name, default in self.absent:
            lines.append(f"    m[{name!r}] = {_emit_value(code, default)}")
        if self.tagged is not None:
            for field in self.tagged:
                lines.append(f"    m[{field.name!r}] = {_emit_value(code, field.default)}")
            lines.append("    first = io.read(1)")
            lines.append("    if first != b'\\x00':")
            if self.tagged:
                lines.append(f"        {self._emit_parse_tags(code)}(io, this, m, first)")
            else:
                lines.append(f"        m[{self.UNKNOWN_TAGS!r}] = read_tagged_section(io, first)")
        lines.append("    return m")
        code.append("\n".join(lines))
        return f"{fname}(io, this)"

    def _emit_parse_tags(self, code: CodeGen) -> str:
        assert self.tagged is not None
        fname = f"parse_tags_{code.allocateId()}"
        lines = [
            f"def {fname}(io, this, m, first):",
            "    count = finish_uvarint(io, first)",
            "    last = -1",
            "    unknown = None",
            "    for _ in range(count):",
            "        tag = read_uvarint(io)",
            "        check_tag_order(tag, last)",
            "        last = tag",
            "        size = read_uvarint(io)",
        ]
        keyword = "if"
        for field in self.tagged:
            lines.append(f"        {keyword} tag == {field.tag}:")
            lines.append("            end = io.tell() + size")
            lines.append(f"            m[{field.name!r}] = {field.wire._compileparse(code)}")
            lines.append("            check_tag_end(io, end, tag)")
            keyword = "elif"
        lines.append("        else:")
        lines.append("            if unknown is None:")
        lines.append("                unknown = {}")
        lines.append("            unknown[tag] = read_exact(io, size, 'tagged field')")
        lines.append("    if unknown is not None:")
        lines.append(f"        m[{self.UNKNOWN_TAGS!r}] = unknown")
        code.append("\n".join(lines))
        return fname

    def _emitbuild(self, code: CodeGen) -> str:
        _import_runtime(code)
        fname = f"build_struct_{code.allocateId()}"
        lines = [f"def {fname}(obj, io, this):", "    get = obj.get", "    source = obj"]
        for run in self._runs():
            if len(run) > 1:
                sname, _ = self._run_struct(code, run)
                values = ", ".join(
                    f"get({f.name!r}, {_emit_value(code, f.default)})" for f in run
                )
                lines.append(f"    io.write({sname}.pack({values}))")
            else:
                field = run[0]
                lines.extend(_emit_get(code, field))
                lines.append(f"    {field.wire._compilebuild(code)}")
        if self.tagged is not None:
            lines.extend(self._emit_build_tags(code))
        code.append("\n".join(lines))
        return f"{fname}(obj, io, this)"

    def _emit_build_tags(self, code: CodeGen) -> list[str]:
        assert self.tagged is not None
        unknown = f"source.get({self.UNKNOWN_TAGS!r})"
        if not self.tagged:
            return [
                f"    unknown = {unknown}",
                "    if unknown:",
                "        write_tagged_section(io, merge_unknown_tags([], unknown))",
                "    else:",
                "        io.write(b'\\x00')",
            ]
        lines = ["    tags = []"]
        for field in self.tagged:
            value_fname = f"build_tag_value_{code.allocateId()}"
            code.append(f"""
                def {value_fname}(obj, io, this):
                    {field.wire._compilebuild(code)}
            """)
            default = field.default
            if isinstance(default, MessageStruct):
                lines.append(f"    obj = get({field.name!r})")
                differs = f"obj is not None and obj != {default.emit_defaults(code)}"
            else:
                value = _emit_value(code, default)
                lines.append(f"    obj = get({field.name!r}, {value})")
                if default is None or field.nullable:
                    differs = f"obj != {value}"
                else:
                    differs = f"obj is not None and obj != {value}"
            lines.append(f"    if {differs}:")
            lines.append(
                f"        tags.append(({field.tag}, tag_value_bytes({value_fname}, obj, this)))"
            )
        lines.append(f"    unknown = {unknown}")
        lines.append("    if unknown:")
        lines.append("        write_tagged_section(io, merge_unknown_tags(tags, unknown))")
        lines.append("    elif tags:")
        lines.append("        write_tagged_section(io, tags)")
        lines.append("    else:")
        lines.append("        io.write(b'\\x00')")
        return lines


class NullableStruct(WireType):
    """A struct that may be null: an int8 marker (-1 null, 1 present) before it."""

    def __init__(self, struct: MessageStruct) -> None:
        super().__init__()
        self.struct = struct

    def __repr__(self) -> str:
        return f"<nullable {self.struct!r}>"

    def min_size(self) -> int:
        return 1

    def _emitparse(self, code: CodeGen) -> str:
        _import_runtime(code)
        return f"({self.struct._compileparse(code)} if read_struct_presence(io) else None)"

    def _emitbuild(self, code: CodeGen) -> str:
        _import_runtime(code)
        fname = f"build_nullable_{code.allocateId()}"
        code.append(f"""
            def {fname}(obj, io, this):
                if obj is None:
                    io.write(b'\\xff')
                    return
                io.write(b'\\x01')
                {self.struct._compilebuild(code)}
        """)
        return f"{fname}(obj, io, this)"
