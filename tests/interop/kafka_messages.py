"""Apache Kafka's JSON message definitions (common/message/*.json in the kafka-clients jar),
read as data and compared with protocol/apis, field by field and version by version.

`differences(ours, theirs)` walks every version both sides define and yields a `Difference`
per field whose name, order, type, nullability, tag or default disagree, each naming the API,
the request or response, the version and the field's path in our snake_case names.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import re
import uuid
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from protocol.schema import MISSING, ApiDefinition, Field, parse_versions

_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*')
_NUMBER_TYPES = frozenset({"int8", "int16", "uint16", "int32", "uint32", "int64"})
_IMPLICIT = {"bool": False, "float64": 0.0, "string": "", "bytes": b"", "records": b"", "uuid": None}
# Kafka's CamelCase names that our snake_case spells otherwise than the mechanical rule.
_NAME_EXCEPTIONS = {"isKRaftController": "is_kraft_controller"}


def snake_case(name: str) -> str:
    """Kafka's field name in our spelling: "ThrottleTimeMs" -> "throttle_time_ms"."""
    if name in _NAME_EXCEPTIONS:
        return _NAME_EXCEPTIONS[name]
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return spaced.lower()


def _in(bounds: tuple[int, int] | None, version: int) -> bool:
    return bounds is not None and bounds[0] <= version <= bounds[1]


@dataclasses.dataclass(frozen=True)
class KafkaField:
    """One field of a Kafka JSON definition, its common structs already resolved."""

    name: str
    type: str
    versions: tuple[int, int] | None
    nullable: tuple[int, int] | None
    tag: int | None
    tagged: tuple[int, int] | None
    default: Any  # the JSON's "default" as given (string or number), or MISSING
    fields: tuple[KafkaField, ...]

    @property
    def our_name(self) -> str:
        return snake_case(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    def present_at(self, version: int) -> bool:
        return _in(self.versions, version)

    def default_at(self, version: int) -> Any:
        """The Python value Kafka's generated classes start this field with."""
        if self.is_array:
            return None if self.default == "null" else []
        if self.fields:
            return None if self.default == "null" else MISSING  # a struct: no scalar default
        given = self.default
        if given is MISSING or given == "":
            return 0 if self.type in _NUMBER_TYPES else _IMPLICIT.get(self.type, "")
        if given == "null":
            return None
        if self.type in _NUMBER_TYPES:
            text = str(given).strip().lower()
            negative = text.startswith("-")
            digits = text.lstrip("-")
            value = int(digits, 16) if digits.startswith("0x") else int(digits)
            return -value if negative else value
        if self.type == "bool":
            return str(given).lower() == "true"
        if self.type == "float64":
            return float(given)
        return given


@dataclasses.dataclass(frozen=True)
class KafkaMessage:
    """One request or response definition of one Kafka version."""

    api_key: int
    api_name: str  # "Produce", without "Request"/"Response"
    request: bool
    valid: tuple[int, int]
    flexible: tuple[int, int] | None
    latest_unstable: bool
    fields: tuple[KafkaField, ...]

    @property
    def stable_max(self) -> int:
        return self.valid[1] - 1 if self.latest_unstable else self.valid[1]

    def defines(self, version: int) -> bool:
        return _in(self.valid, version)

    def is_flexible(self, version: int) -> bool:
        return _in(self.flexible, version)


def _strip_comments(text: str) -> str:
    return _COMMENT.sub(lambda match: match.group(1) or "", text)


def _field(spec: dict[str, Any], common: dict[str, list[dict[str, Any]]]) -> KafkaField:
    element = spec["type"].removeprefix("[]")
    children = spec.get("fields")
    if children is None and element in common:
        children = common[element]
    tag = spec.get("tag")
    tagged = parse_versions(spec.get("taggedVersions")) if tag is not None else None
    return KafkaField(
        name=spec["name"],
        type=spec["type"],
        versions=parse_versions(spec.get("versions")),
        nullable=parse_versions(spec.get("nullableVersions")),
        tag=tag,
        tagged=tagged,
        default=spec.get("default", MISSING),
        fields=tuple(_field(child, common) for child in children or ()),
    )


def parse_definition(text: str) -> KafkaMessage | None:
    """A request or response definition; None for the other JSON files (records, headers...)."""
    spec = json.loads(_strip_comments(text))
    if spec.get("type") not in ("request", "response") or "apiKey" not in spec:
        return None
    kind = "Request" if spec["type"] == "request" else "Response"
    common = {struct["name"]: struct["fields"] for struct in spec.get("commonStructs", ())}
    valid = parse_versions(spec["validVersions"])
    if valid is None:  # a retired API (4.x keeps StopReplica's file with "validVersions": "none")
        return None
    return KafkaMessage(
        api_key=spec["apiKey"],
        api_name=spec["name"].removesuffix(kind),
        request=kind == "Request",
        valid=valid,
        flexible=parse_versions(spec.get("flexibleVersions")),
        latest_unstable=bool(spec.get("latestVersionUnstable", False)),
        fields=tuple(_field(field, common) for field in spec["fields"]),
    )


@functools.cache
def definitions(clients_jar: Path) -> dict[tuple[int, bool], KafkaMessage]:
    """{(api_key, request?): definition} of every API in one kafka-clients jar."""
    found = {}
    with zipfile.ZipFile(clients_jar) as jar:
        for name in jar.namelist():
            if name.startswith("common/message/") and name.endswith(".json"):
                message = parse_definition(jar.read(name).decode())
                if message is not None:
                    found[(message.api_key, message.request)] = message
    return found


@dataclasses.dataclass(frozen=True)
class Difference:
    """One disagreement between our schema and Kafka's at one version."""

    api: str
    kind: str  # "request" / "response" / "api" (the whole API: versions, flexible versions)
    version: int
    path: str  # our dotted field path, e.g. "topic_states.partition_states.leader"
    what: str  # "missing", "extra", "order", "type", "nullable", "tag", "default", "flexible"
    ours: Any
    kafka: Any

    def __str__(self) -> str:
        where = f"{self.api} v{self.version} {self.kind}" + (f" field {self.path}" if self.path else "")
        return f"{where}: {self.what} differs: ours {self.ours!r}, Kafka's {self.kafka!r}"


def _type_of(field: Field) -> str:
    element = field.element_type if not field.is_struct else "struct"
    return ("[]" if field.is_array else "") + element


def _kafka_type_of(field: KafkaField) -> str:
    element = "struct" if field.fields else field.element_type
    return ("[]" if field.is_array else "") + element


def _our_default(field: Field, version: int) -> Any:
    if field.is_struct and not field.is_array:
        return None if field.default is None else MISSING
    if field.default is not MISSING:
        return field.default
    if field.is_array:
        return None if field.nullable_at(version) else []
    if field.nullable_at(version):
        return None
    return {"uuid": None, "bool": False, "float64": 0.0, "string": "", "bytes": b"", "records": b""}.get(
        field.type, 0)


def _defaults_agree(ours: Field, theirs: KafkaField, version: int, tagged: bool) -> bool:
    mine, kafkas = _our_default(ours, version), theirs.default_at(version)
    if mine == kafkas:
        return True
    # A field that is on the wire in every version both read is always sent whole, so its
    # default only fills a caller's gap: our None for a nullable string or bytes stands in for
    # Kafka's implicit "" (it has no explicit default) without changing a byte. Tagged fields
    # are left out of the wire when equal to the default, so theirs must match exactly.
    implicit = theirs.default is MISSING and ours.default is MISSING
    return implicit and not tagged and mine is None and ours.nullable_at(version)


def _compare_fields(api: str, kind: str, version: int, flexible: bool, prefix: str,
                    ours: Sequence[Field], theirs: Sequence[KafkaField]) -> Iterator[Difference]:
    mine = {f.name: f for f in ours if f.present_at(version)}
    kafkas = {f.our_name: f for f in theirs if f.present_at(version)}
    for name in kafkas.keys() - mine.keys():
        yield Difference(api, kind, version, prefix + name, "missing", None, kafkas[name].name)
    for name in mine.keys() - kafkas.keys():
        yield Difference(api, kind, version, prefix + name, "extra", name, None)

    def untagged_order(names: Iterator[tuple[str, bool]]) -> list[str]:
        return [name for name, tagged in names if not (flexible and tagged) and name in mine and name in kafkas]

    our_order = untagged_order((f.name, f.tagged_at(version)) for f in mine.values())
    kafka_order = untagged_order((f.our_name, _in(f.tagged, version)) for f in kafkas.values())
    if our_order != kafka_order:
        yield Difference(api, kind, version, prefix.rstrip(".") or "(top level)", "order", our_order, kafka_order)

    for name in mine.keys() & kafkas.keys():
        field, theirs_field = mine[name], kafkas[name]
        path = prefix + name
        if _type_of(field) != _kafka_type_of(theirs_field):
            yield Difference(api, kind, version, path, "type", _type_of(field), _kafka_type_of(theirs_field))
            continue
        if field.nullable_at(version) != _in(theirs_field.nullable, version):
            yield Difference(api, kind, version, path, "nullable", field.nullable_at(version),
                             _in(theirs_field.nullable, version))
        our_tag = field.tag if flexible and field.tagged_at(version) else None
        kafka_tag = theirs_field.tag if flexible and _in(theirs_field.tagged, version) else None
        if our_tag != kafka_tag:
            yield Difference(api, kind, version, path, "tag", our_tag, kafka_tag)
        if not _defaults_agree(field, theirs_field, version, tagged=kafka_tag is not None):
            yield Difference(api, kind, version, path, "default", _our_default(field, version),
                             theirs_field.default_at(version))
        if field.fields:
            yield from _compare_fields(api, kind, version, flexible, path + ".", field.fields,
                                       theirs_field.fields)


def differences(ours: ApiDefinition, request: KafkaMessage, response: KafkaMessage) -> Iterator[Difference]:
    """Every difference at the versions both our definition and Kafka's define."""
    for version in range(ours.min_version, ours.max_version + 1):
        if not request.defines(version):
            continue
        flexible = ours.is_flexible(version)
        if flexible != request.is_flexible(version):
            yield Difference(ours.name, "api", version, "", "flexible", flexible, request.is_flexible(version))
            continue
        for message, fields in ((request, ours.request), (response, ours.response)):
            kind = "request" if message.request else "response"
            yield from _compare_fields(ours.name, kind, version, flexible, "", fields, message.fields)


def version_ranges(versions: Sequence[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    ranges: list[list[int]] = []
    for version in sorted(versions):
        if ranges and ranges[-1][1] == version - 1:
            ranges[-1][1] = version
        else:
            ranges.append([version, version])
    return ", ".join(str(low) if low == high else f"{low}-{high}" for low, high in ranges)


# --------------------------------------------------------------------------------------
# Sample messages for the golden bytes: built from Kafka's definitions, not from ours.
# --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Sample:
    """One message in two spellings: `kafka_json` for Kafka's JsonConverter (camelCase keys,
    base64 bytes, Kafka's UUID strings), `expected` as protocol/ decodes it (snake_case keys)."""

    kafka_json: dict[str, Any]
    expected: dict[str, Any]


class Sampler:
    """Deterministic non-default values for every field present at a version.

    Each value differs from the field's default, so a field we skip, misplace or read as its
    default shows up. With `nulls`, every field that is nullable at the version is null
    instead (a second sample covers the null encodings).
    """

    def __init__(self, nulls: bool) -> None:
        self.nulls = nulls
        self.counter = 0

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    def message(self, fields: Sequence[KafkaField], version: int) -> Sample:
        kafka_json: dict[str, Any] = {}
        expected: dict[str, Any] = {}
        for field in fields:
            if not field.present_at(version):
                continue
            json_value, our_value = self._value(field, version)
            kafka_json[field.name[0].lower() + field.name[1:]] = json_value
            expected[field.our_name] = our_value
        return Sample(kafka_json, expected)

    def _value(self, field: KafkaField, version: int) -> tuple[Any, Any]:
        if self.nulls and _in(field.nullable, version):
            return None, None
        if field.is_array:
            pairs = [self._element(field, version) for _ in range(2)]
            return [json for json, _ in pairs], [ours for _, ours in pairs]
        return self._element(field, version)

    def _element(self, field: KafkaField, version: int) -> tuple[Any, Any]:
        if field.fields:
            sample = self.message(field.fields, version)
            return sample.kafka_json, sample.expected
        return self.scalar(field.element_type, field.default_at(version) if not field.is_array else MISSING)

    def scalar(self, type_name: str, default: Any) -> tuple[Any, Any]:
        n = self._next()
        value: Any
        if type_name == "bool":
            value = default is not True
            return value, value
        if type_name == "int8":
            value = n % 120 + 1
        elif type_name == "int16":
            value = n % 30000 + 1
        elif type_name == "uint16":
            value = 40000 + n % 20000
        elif type_name == "int32":
            value = 100_000 + n
        elif type_name == "uint32":
            value = 3_000_000_000 + n
        elif type_name == "int64":
            value = 10_000_000_000 + n
        elif type_name == "float64":
            value = n + 0.5
            return value, value
        elif type_name == "string":
            value = f"s{n}"
            return value, value
        elif type_name in ("bytes", "records"):
            raw = bytes([n % 256, 1, 2, 3])
            return base64.b64encode(raw).decode(), raw
        elif type_name == "uuid":
            our_uuid = uuid.UUID(int=(n << 64) + n)
            return base64.urlsafe_b64encode(our_uuid.bytes).decode().rstrip("="), our_uuid
        else:
            raise ValueError(f"no sample for type {type_name!r}")
        if value == default:
            value += 1
        return value, value
