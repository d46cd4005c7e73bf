"""kafka-python's message classes as an independent oracle for our codec.

Test data is generated from kafka-python's own schema objects (not from ours), so a
field we forgot, misplaced or typed wrongly shows up as a mismatch. Values are never
the field's default, so that a field silently falling back to its default cannot pass.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer  # noqa: F401  (registers the message classes)
from kafka.protocol.api_message import ApiMessage


def our_name(field: Any, top_level: bool) -> str:
    """Kafka's name of a kafka-python field.

    kafka-python patches the authorized-operations int32 fields of Metadata and
    DescribeCluster into "authorized_operations" bitfields (sets of bit numbers).
    """
    if field.name == "authorized_operations" and field.type_str == "bitfield":
        if field._json.get("name") == "AuthorizedOperations":
            return field.name  # DescribeGroups: typed as a bitfield but not renamed
        return "cluster_authorized_operations" if top_level else "topic_authorized_operations"
    return field.name


def _all_subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_all_subclasses(sub))
    return found


_CLASSES = {
    cls.__name__: cls
    for cls in _all_subclasses(ApiMessage)
    if getattr(cls, "_class_version", None) is None
}


def has_message_class(api_name: str) -> bool:
    return api_name + "Request" in _CLASSES


def message_class(api_name: str, request: bool) -> Any:
    return _CLASSES[api_name + ("Request" if request else "Response")]


def _bits_to_int32(bits: set[int] | None) -> int:
    value = sum(1 << bit for bit in (bits if bits is not None else {31}))
    return value - (1 << 32) if value >= 1 << 31 else value


class ValueMaker:
    """Deterministic non-default values for kafka-python schema fields."""

    RANGES = {
        "int8": (-128, 127),
        "int16": (-(1 << 15), (1 << 15) - 1),
        "uint16": (0, (1 << 16) - 1),
        "int32": (-(1 << 31), (1 << 31) - 1),
        "int64": (-(1 << 63), (1 << 63) - 1),
    }

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.nullable_seen = 0

    def _null_now(self) -> bool:
        # Every third nullable field is null, so both forms appear in every message.
        self.nullable_seen += 1
        return self.nullable_seen % 3 == 0

    def simple(self, field: Any, type_str: str) -> Any:
        rng = self.rng
        try:
            default = field.default
        except ValueError:  # kafka-python reads a nullable array's "null" default as its elements'
            default = None
        if type_str in self.RANGES:
            low, high = self.RANGES[type_str]
            while True:
                value = rng.choice([low, high, rng.randint(low, high), rng.randint(-50, 50)])
                if low <= value <= high and value != default:
                    return value
        if type_str == "bool":
            return not default
        if type_str == "float64":
            return rng.uniform(-1e9, 1e9)
        if type_str == "uuid":
            return uuid.UUID(int=rng.getrandbits(128) | 1)
        if type_str == "string":
            return "t\u00f3pic-\u03bb-" + "".join(rng.choice("abcxyz-_.0189") for _ in range(rng.randint(1, 12)))
        if type_str in ("bytes", "records"):
            return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 40)))
        if type_str == "bitfield":
            return {rng.randint(0, 30) for _ in range(3)}
        raise AssertionError(f"no value maker for {type_str}")

    def field_value(self, field: Any, version: int) -> Any:
        if field.nullable_for_version_q(version) and self._null_now():
            return None
        if field.is_struct_array():
            return [self.struct(field.array_of, version) for _ in range(self.rng.randint(1, 2))]
        if field.is_struct():
            return self.struct(field, version)
        if field.is_array():
            inner = field.array_of
            return [self.simple(inner, inner.type_str) for _ in range(self.rng.randint(1, 3))]
        return self.simple(field, field.type_str)

    def struct(self, struct_field: Any, version: int) -> dict[str, Any]:
        return {
            field.name: self.field_value(field, version)
            for field in struct_field._fields
            if field.for_version_q(version)
        }


def to_kafka_python(struct_field: Any, values: dict[str, Any], version: int, cls: Any = None) -> Any:
    """Build kafka-python data objects from a value tree made by ValueMaker."""
    kwargs = {}
    for field in struct_field._fields:
        if field.name not in values:
            continue
        value = values[field.name]
        if value is not None and field.is_struct_array():
            value = [to_kafka_python(field.array_of, item, version) for item in value]
        elif value is not None and field.is_struct():
            value = to_kafka_python(field, value, version)
        kwargs[field.name] = value
    if cls is not None:
        return cls[version](**kwargs)
    return struct_field.data_class(version=version, **kwargs)


def from_kafka_python(struct_field: Any, obj: Any, version: int) -> dict[str, Any]:
    """A value tree (like ValueMaker's) read back from a decoded kafka-python object."""
    out: dict[str, Any] = {}
    for field in struct_field._fields:
        if not field.for_version_q(version):
            continue
        value = getattr(obj, field.name)
        if value is not None and field.is_struct_array():
            value = [from_kafka_python(field.array_of, item, version) for item in value]
        elif value is not None and field.is_struct():
            value = from_kafka_python(field, value, version)
        elif isinstance(value, memoryview | bytearray):
            value = bytes(value)
        out[field.name] = value
    return out


def to_ours(struct_field: Any, values: dict[str, Any], top_level: bool = True) -> dict[str, Any]:
    """Our body for a value tree: Kafka's field names, bitfields as int32."""
    out: dict[str, Any] = {}
    fields = {field.name: field for field in struct_field._fields}
    for name, value in values.items():
        field = fields[name]
        if value is not None and field.is_struct_array():
            value = [to_ours(field.array_of, item, False) for item in value]
        elif value is not None and field.is_struct():
            value = to_ours(field, value, False)
        elif field.type_str == "bitfield":
            value = _bits_to_int32(value)
        out[our_name(field, top_level)] = value
    return out
