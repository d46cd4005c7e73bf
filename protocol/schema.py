"""The schema language of the API modules, and its translation into construct schemas.

An API module declares its request and response as lists of `Field`s, each saying
which versions have it; `ApiDefinition` ties them to the API key, the valid version
range and the first flexible version. `message_struct` turns one (message, version)
into the `MessageStruct` tree that `protocol.messages` compiles and caches.

Everything here is immutable data built at import time; nothing is mutated later.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from typing import Any

from .primitives import (
    ZERO_UUID,
    Array,
    Bool,
    FixedPrimitive,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    MessageField,
    MessageStruct,
    NullableStruct,
    UInt16,
    UInt32,
    Uuid,
    WireType,
    bytes_type,
    records_type,
    string_type,
)

MAX_VERSION = 0x7FFF
_FIXED: dict[str, FixedPrimitive] = {
    "int8": Int8,
    "int16": Int16,
    "uint16": UInt16,
    "int32": Int32,
    "uint32": UInt32,
    "int64": Int64,
    "float64": Float64,
    "bool": Bool,
}
_ZEROES: dict[str, Any] = {
    **{name: 0 for name in _FIXED},
    "float64": 0.0,
    "bool": False,
    "uuid": ZERO_UUID,
    "string": "",
    "bytes": b"",
    "records": b"",
}
PRIMITIVE_TYPES = frozenset(_ZEROES)
_VERSIONS = re.compile(r"^(\d+)(\+|-(\d+))?$")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@functools.cache
def parse_versions(spec: str | None) -> tuple[int, int] | None:
    """"3+" -> (3, 32767), "0-12" -> (0, 12), "7" -> (7, 7); None and "none" -> None."""
    if spec is None or spec.strip() == "none":
        return None
    match = _VERSIONS.match(spec.strip())
    if match is None:
        raise ValueError(f"bad version range {spec!r}")
    low = int(match.group(1))
    if match.group(2) is None:
        return low, low
    high = MAX_VERSION if match.group(2) == "+" else int(match.group(3))
    if high < low:
        raise ValueError(f"empty version range {spec!r}")
    return low, high


def _in(spec: str | None, version: int) -> bool:
    bounds = parse_versions(spec)
    return bounds is not None and bounds[0] <= version <= bounds[1]


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a message or struct, across all the versions that have it.

    `type` is a Kafka type name ("int32", "string", "uuid", "records"...), "[]" + one
    of them for an array of primitives, or any other name (the struct's name, for the
    reader) together with `fields`; "[]Name" with `fields` is an array of structs.
    `versions`, `nullable` and `tagged_versions` are ranges: "3+", "0-12", "7".
    A tagged field gives its `tag`; `tagged_versions` defaults to `versions`.
    `default` is the value a missing field is encoded with, as a Python value (None
    for null); without one it is 0 / "" / False / b"" / [] / the zero UUID, or None
    in versions where the field is nullable.
    """

    name: str
    type: str
    versions: str = "0+"
    nullable: str | None = None
    tag: int | None = None
    tagged_versions: str | None = None
    default: Any = MISSING
    fields: Sequence[Field] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        if self.tag is not None and self.tagged_versions is None:
            object.__setattr__(self, "tagged_versions", self.versions)
        for spec in (self.versions, self.nullable, self.tagged_versions):
            parse_versions(spec)
        element = self.element_type
        if self.fields:
            if element in PRIMITIVE_TYPES:
                raise ValueError(f"{self.name}: primitive type {self.type!r} cannot have fields")
        elif element not in PRIMITIVE_TYPES:
            raise ValueError(f"{self.name}: unknown type {self.type!r} (a struct needs fields)")
        if self.tagged_versions is not None and self.tag is None:
            raise ValueError(f"{self.name}: tagged_versions without a tag")
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: duplicate field names {names}")

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def is_struct(self) -> bool:
        return bool(self.fields)

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    def present_at(self, version: int) -> bool:
        return _in(self.versions, version)

    def nullable_at(self, version: int) -> bool:
        return _in(self.nullable, version)

    def tagged_at(self, version: int) -> bool:
        return _in(self.tagged_versions, version)

    def newest_version(self) -> int:
        bounds = parse_versions(self.versions)
        return MAX_VERSION if bounds is None else bounds[1]


@dataclasses.dataclass(frozen=True)
class ApiDefinition:
    """One API: its key, name, valid and flexible versions, request and response fields."""

    key: int
    name: str
    versions: str
    flexible: str
    request: Sequence[Field]
    response: Sequence[Field]

    def __post_init__(self) -> None:
        object.__setattr__(self, "request", tuple(self.request))
        object.__setattr__(self, "response", tuple(self.response))
        if parse_versions(self.versions) is None:
            raise ValueError(f"{self.name}: no valid versions")
        parse_versions(self.flexible)
        for version in range(self.min_version, self.max_version + 1):
            for fields in (self.request, self.response):
                _check_tags(self.name, fields, version, self.is_flexible(version))

    @property
    def min_version(self) -> int:
        return parse_versions(self.versions)[0]  # type: ignore[index]

    @property
    def max_version(self) -> int:
        return parse_versions(self.versions)[1]  # type: ignore[index]

    @property
    def first_flexible(self) -> int | None:
        bounds = parse_versions(self.flexible)
        return None if bounds is None else bounds[0]

    def is_flexible(self, version: int) -> bool:
        return _in(self.flexible, version)


def _check_tags(where: str, fields: Sequence[Field], version: int, flexible: bool) -> None:
    tags = []
    for field in fields:
        if not field.present_at(version):
            continue
        if field.tagged_at(version):
            if not flexible:
                raise ValueError(f"{where}.{field.name}: tagged in non-flexible version {version}")
            tags.append(field.tag)
        if field.fields:
            _check_tags(f"{where}.{field.name}", field.fields, version, flexible)
    if len(set(tags)) != len(tags):
        raise ValueError(f"{where}: duplicate tags {tags} in version {version}")


def default_at(field: Field, version: int, wire: WireType | None = None) -> Any:
    """The value a field takes at `version` when the caller or the wire leaves it out.

    The default of a struct is a `MessageStruct` (its `wire` when given), standing
    for a fresh Message of the struct's own defaults.
    """
    if field.default is not MISSING:
        return field.default
    if field.nullable_at(version):
        return None
    if field.is_array:
        return []
    if field.is_struct:
        if isinstance(wire, MessageStruct):
            return wire
        return message_struct(field.element_type, field.fields, version, flexible=False)
    return _ZEROES[field.type]


def _absent_default(field: Field, version: int) -> Any:
    """What a parsed Message holds for a field its version does not have: for a struct,
    its fields' absent defaults; otherwise the default of the field's newest version."""
    if field.is_struct and not field.is_array and field.default is MISSING:
        return message_struct(field.element_type, field.fields, version, flexible=False)
    return default_at(field, field.newest_version())


def wire_type(field: Field, version: int, flexible: bool) -> WireType:
    nullable = field.nullable_at(version)
    element = field.element_type
    if field.is_array:
        if field.is_struct:
            item: WireType = message_struct(element, field.fields, version, flexible)
        else:
            item = _primitive(element, flexible, nullable=False)
        return Array(item, compact=flexible, nullable=nullable)
    if field.is_struct:
        struct = message_struct(element, field.fields, version, flexible)
        return NullableStruct(struct) if nullable else struct
    return _primitive(element, flexible, nullable)


def _primitive(type_name: str, flexible: bool, nullable: bool) -> WireType:
    if type_name in _FIXED:
        return _FIXED[type_name]
    if type_name == "uuid":
        return Uuid
    if type_name == "string":
        return string_type(flexible, nullable)
    if type_name == "bytes":
        return bytes_type(flexible, nullable)
    if type_name == "records":
        return records_type(flexible, nullable)
    raise ValueError(f"unknown primitive type {type_name!r}")


def message_struct(
    name: str, fields: Sequence[Field], version: int, flexible: bool
) -> MessageStruct:
    """The wire layout of `fields` at `version`; `flexible` switches compact types and
    tagged-field sections together, for this struct and every struct inside it."""
    present: list[MessageField] = []
    tagged: list[MessageField] = []
    absent: list[tuple[str, Any]] = []
    for field in fields:
        if not field.present_at(version):
            absent.append((field.name, _absent_default(field, version)))
            continue
        wire = wire_type(field, version, flexible)
        entry = MessageField(
            field.name,
            wire,
            default_at(field, version, wire),
            tag=field.tag,
            nullable=field.nullable_at(version),
        )
        if flexible and field.tagged_at(version):
            tagged.append(entry)
        else:
            present.append(entry)
    return MessageStruct(name, present, tagged if flexible else None, absent)
