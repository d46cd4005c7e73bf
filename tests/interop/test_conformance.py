"""Every wire schema of protocol/apis against Apache Kafka's own message definitions.

Two checks, each against both pinned Kafka versions (3.9 and 4.x):
- the schemas, field by field at every version both sides define: names (Kafka's CamelCase in
  our snake_case), order, types, nullable versions, tags of tagged fields, flexible versions,
  defaults; and the version range we advertise in ApiVersions lies within Kafka's;
- golden bytes: Kafka's generated message classes serialize sample requests and responses
  (tests/interop/GoldenMessages.java) of every version we serve; protocol/ must decode each to
  the sample's values and encode it back to the same bytes.

A difference is fixed in protocol/apis or listed below with the reason it is kept.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.apis import all_apis
from protocol.messages import decode_body, encode_body
from protocol.schema import ApiDefinition
from tests.interop.kafka import LINES, kafka
from tests.interop.kafka_messages import (
    Difference,
    KafkaMessage,
    Sampler,
    definitions,
    differences,
    version_ranges,
)

OURS = {api.name: api for api in all_apis()}

# Differences kept on purpose: (Kafka line or "*", api, request|response|api, field path, what) -> why.
# Each must still be found, so that a fixed difference leaves the list.
ALLOWED: dict[tuple[str, str, str, str, str], str] = {}

# Versions we advertise beyond Kafka's stable ones (Kafka marks its newest version of an API
# unstable until the feature behind it ships): api -> why.
ALLOWED_UNSTABLE: dict[str, str] = {
    "InitProducerId": (
        "v6 (KIP-939, two-phase commit) is advertised so that a client speaking it gets a clear "
        "INVALID_REQUEST for enable2_pc rather than a downgrade; its fields match Kafka 4.x's definition. "
        "Kafka 4.x itself advertises v6 only with unstable.api.versions.enable."
    ),
}


def _kafka_definitions(line: str) -> dict[tuple[int, bool], KafkaMessage]:
    return definitions(kafka(line).jar("kafka-clients"))


def _pairs() -> list[Any]:
    return [pytest.param(line, api.name, id=f"{line}-{api.name}") for line in LINES for api in OURS.values()]


def _kafka_pair(line: str, api: ApiDefinition) -> tuple[KafkaMessage, KafkaMessage] | None:
    defined = _kafka_definitions(line)
    if (api.key, True) not in defined:
        return None
    request, response = defined[(api.key, True)], defined[(api.key, False)]
    assert request.api_name == api.name, f"API key {api.key} is {request.api_name} in Kafka {line}, {api.name} here"
    return request, response


def _allowed(line: str, difference: Difference) -> str | None:
    for scope in (line, "*"):
        reason = ALLOWED.get((scope, difference.api, difference.kind, difference.path, difference.what))
        if reason is not None:
            return reason
    return None


def _report(line: str, found: list[Difference]) -> str:
    grouped: dict[tuple[str, str, str, str, str], list[int]] = defaultdict(list)
    for difference in found:
        key = (difference.kind, difference.path, difference.what, repr(difference.ours), repr(difference.kafka))
        grouped[key].append(difference.version)
    lines = [f"protocol/apis differs from Apache Kafka {kafka(line).version}:"]
    for (kind, path, what, ours, theirs), versions in sorted(grouped.items()):
        api = found[0].api
        field = f" field {path}" if path else ""
        lines.append(f"  {api} {kind} v{version_ranges(versions)}{field}: {what}: ours {ours}, Kafka's {theirs}")
    return "\n".join(lines)


@pytest.mark.parametrize(("line", "api_name"), _pairs())
def test_schema_matches_kafkas_definition(line: str, api_name: str) -> None:
    api = OURS[api_name]
    pair = _kafka_pair(line, api)
    if pair is None:
        pytest.skip(f"Kafka {kafka(line).version} no longer has {api_name}")
    found = [d for d in differences(api, *pair) if _allowed(line, d) is None]
    assert not found, _report(line, found)


def test_every_allowed_difference_is_still_found() -> None:
    seen = set()
    for line in LINES:
        for api in OURS.values():
            pair = _kafka_pair(line, api)
            if pair is not None:
                for difference in differences(api, *pair):
                    for scope in (line, "*"):
                        seen.add((scope, difference.api, difference.kind, difference.path, difference.what))
    stale = sorted(set(ALLOWED) - seen)
    assert not stale, f"allowed differences no longer found (remove them from ALLOWED): {stale}"
    for api_name in ALLOWED_UNSTABLE:
        api = OURS[api_name]
        stable = max(pair[0].stable_max for line in LINES if (pair := _kafka_pair(line, api)) is not None)
        assert api.max_version > stable, f"{api_name} no longer goes beyond Kafka's stable versions"


@pytest.mark.parametrize("api_name", sorted(OURS))
def test_advertised_versions_are_kafkas(api_name: str) -> None:
    api = OURS[api_name]
    defined = [pair[0] for line in LINES if (pair := _kafka_pair(line, api)) is not None]
    assert defined, f"{api_name} (key {api.key}) is in neither Kafka {LINES}"
    beyond = [v for v in range(api.min_version, api.max_version + 1) if not any(d.defines(v) for d in defined)]
    assert not beyond, f"{api_name}: we advertise v{version_ranges(beyond)}, which no pinned Kafka defines"
    stable_max = max(d.stable_max for d in defined)
    if api.max_version > stable_max and api_name not in ALLOWED_UNSTABLE:
        pytest.fail(f"{api_name}: we advertise up to v{api.max_version}, Kafka's newest stable version is "
                    f"v{stable_max} (v{stable_max + 1}+ is marked unstable)")


# --------------------------------------------------------------------------------------
# Golden bytes.
# --------------------------------------------------------------------------------------

_SAMPLES = ("values", "nulls", "defaults")


_Case = tuple[str, int, bool, str, dict[str, Any] | None, dict[str, Any] | None]


def _cases(line: str) -> list[_Case]:
    """(api, version, request?, sample, Kafka JSON, expected) for every version both serve."""
    cases: list[_Case] = []
    for api in OURS.values():
        pair = _kafka_pair(line, api)
        if pair is None:
            continue
        for version in range(api.min_version, api.max_version + 1):
            for message in pair:
                if not message.defines(version):
                    continue
                for sample_name in _SAMPLES:
                    if sample_name == "defaults":
                        # What a tagged field left off the wire reads as must be Kafka's default.
                        tagged_defaults = {
                            field.our_name: field.default_at(version) for field in message.fields
                            if field.present_at(version) and field.tagged is not None
                            and field.tagged[0] <= version <= field.tagged[1] and not field.fields
                        }
                        cases.append((api.name, version, message.request, sample_name, None, tagged_defaults))
                        continue
                    sample = Sampler(nulls=sample_name == "nulls").message(message.fields, version)
                    cases.append((api.name, version, message.request, sample_name, sample.kafka_json,
                                  sample.expected))
    return cases


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[tuple[str, int, bool, str], Any]]:
    """{line: {(api, version, request?, sample): (Kafka's bytes or error, expected values)}}."""
    found: dict[str, dict[tuple[str, int, bool, str], Any]] = {}
    source = Path(__file__).with_name("GoldenMessages.java")
    for line in LINES:
        k = kafka(line)
        classes = k.compile([source])
        cases = _cases(line)
        work = tmp_path_factory.mktemp(f"golden-{line}")
        (work / "in.jsonl").write_text("".join(
            json.dumps({"api": api, "version": version, "request": request, "message": kafka_json}) + "\n"
            for api, version, request, _, kafka_json, _ in cases))
        k.run("GoldenMessages", str(work / "in.jsonl"), str(work / "out.jsonl"), extra_classpath=[classes],
              heap="512m", timeout=300)
        outputs = [json.loads(text) for text in (work / "out.jsonl").read_text().splitlines()]
        assert len(outputs) == len(cases), f"GoldenMessages answered {len(outputs)} of {len(cases)} messages"
        found[line] = {
            (api, version, request, sample): (output, expected)
            for (api, version, request, sample, _, expected), output in zip(cases, outputs, strict=True)
        }
    return found


def _comparable(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _comparable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_comparable(item) for item in value]
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


def _value_differences(decoded: Any, expected: Any, path: str) -> Iterator[str]:
    if isinstance(expected, dict):
        for name, value in expected.items():
            if name not in decoded:
                yield f"{path}{name}: not decoded (Kafka wrote {value!r})"
            else:
                yield from _value_differences(decoded[name], value, f"{path}{name}.")
    elif isinstance(expected, list) and isinstance(decoded, list) and len(expected) == len(decoded):
        for index, (ours, theirs) in enumerate(zip(decoded, expected, strict=True)):
            yield from _value_differences(ours, theirs, f"{path.rstrip('.')}[{index}].")
    elif _comparable(decoded) != expected:
        yield f"{path.rstrip('.')}: decoded {_comparable(decoded)!r}, Kafka's value {expected!r}"


def _round_trip_failures(api: ApiDefinition, version: int, request: bool, sample: str, output: dict[str, Any],
                         expected: dict[str, Any] | None) -> Iterator[str]:
    where = f"{api.name} v{version} {'request' if request else 'response'} ({sample})"
    if "error" in output:
        yield f"{where}: Kafka could not write the sample: {output['error']}"
        return
    kafka_bytes = bytes.fromhex(output["bytes"])
    try:
        decoded = decode_body(api.key, version, request, kafka_bytes)
    except Exception as error:  # noqa: BLE001  (any failure to decode Kafka's bytes is the finding)
        yield f"{where}: cannot decode Kafka's bytes {kafka_bytes.hex()}: {error}"
        return
    if expected is not None:
        for difference in _value_differences(decoded, expected, ""):
            yield f"{where}: field {difference}"
    ours = encode_body(api.key, version, request, decoded)
    if ours != kafka_bytes:
        yield f"{where}: re-encoded to other bytes\n    Kafka's {kafka_bytes.hex()}\n    ours    {ours.hex()}"


@pytest.mark.parametrize(("line", "api_name"), _pairs())
def test_kafkas_bytes_decode_and_encode_back(
    golden: dict[str, dict[tuple[str, int, bool, str], Any]], line: str, api_name: str
) -> None:
    api = OURS[api_name]
    cases = {key: value for key, value in golden[line].items() if key[0] == api_name}
    if not cases:
        pytest.skip(f"Kafka {kafka(line).version} no longer has {api_name}")
    failures = [
        failure
        for (_, version, request, sample), (output, expected) in sorted(cases.items())
        for failure in _round_trip_failures(api, version, request, sample, output, expected)
    ]
    assert not failures, f"against Apache Kafka {kafka(line).version}'s bytes:\n" + "\n".join(failures)
