"""Every supported client library produces to and consumes from the broker, with every codec,
and negotiates the API versions it should (read back from the broker's /metrics)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

import confluent_kafka
import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import (
    aiokafka_consume,
    aiokafka_produce,
    confluent_consume,
    confluent_produce,
    create_topic,
    kafka_python_consume,
    kafka_python_produce,
)

pytestmark = pytest.mark.integration

API_KEYS = {"Produce": 0, "Fetch": 1, "ListOffsets": 2, "Metadata": 3, "ApiVersions": 18}
CODECS = ["gzip", "snappy", "lz4", "zstd"]


def _records(tag: str, count: int) -> list[tuple[bytes, bytes]]:
    return [(f"{tag}-{i}".encode(), f"{tag} value {i} ".encode() * 8) for i in range(count)]


def _assert_round_trip(sent: list[tuple[bytes, bytes]], acked: list[tuple[int, int]], read) -> None:
    by_key = {r.key: r for r in read}
    assert len(read) == len(sent), f"read {len(read)} records, sent {len(sent)}"
    assert len(by_key) == len(sent), "duplicate keys read back"
    for (key, value), (partition, offset) in zip(sent, acked, strict=True):
        got = by_key[key]
        assert (got.value, got.partition, got.offset) == (value, partition, offset), key


# ---------------------------------------------------------------- which versions each client may use

def _kafka_python_max() -> dict[str, int]:
    from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
    from kafka.protocol.producer import ProduceRequest

    # kafka-python 3.0 builds Produce with max_version=9 (kafka/producer/sender.py) and Fetch
    # with max_version=12 (kafka/consumer/fetcher.py), below what its message classes can encode.
    return {
        "Produce": min(ProduceRequest.max_version, 9),
        "Fetch": min(FetchRequest.max_version, 12),
        "ListOffsets": ListOffsetsRequest.max_version,
        "Metadata": MetadataRequest.max_version,
        "ApiVersions": ApiVersionsRequest.max_version,
    }


def _aiokafka_max() -> dict[str, int]:
    from aiokafka.protocol.admin import ApiVersionRequest
    from aiokafka.protocol.fetch import FetchRequest
    from aiokafka.protocol.metadata import MetadataRequest
    from aiokafka.protocol.offset import OffsetRequest
    from aiokafka.protocol.produce import ProduceRequest

    def top(request_class) -> int:
        return max(struct.API_VERSION for struct in request_class._CLASSES)

    return {
        "Produce": top(ProduceRequest),
        "Fetch": top(FetchRequest),
        "ListOffsets": top(OffsetRequest),
        "Metadata": top(MetadataRequest),
        "ApiVersions": top(ApiVersionRequest),
    }


# The highest version librdkafka asks for, per API, read from its source (the ApiVersion
# ranges passed to rd_kafka_broker_ApiVersion_supported(): rdkafka_msgset_writer.c for
# Produce, rdkafka_fetcher.c for Fetch, rdkafka_request.c for the others), cross-checked with
# the table in its INTRODUCTION.md. Read at the 2.15.0 tree and at v2.0.2 (what Debian's kcat
# bundles); 2.16 is assumed unchanged from 2.15 for these five APIs. librdkafka drops Fetch to
# v12 when Metadata gave a topic no topic id, so a Fetch mismatch of 12 points there.
LIBRDKAFKA_MAX = {
    (2, 0): {"Produce": 7, "Fetch": 11, "ListOffsets": 2, "Metadata": 4, "ApiVersions": 3},
    (2, 15): {"Produce": 10, "Fetch": 16, "ListOffsets": 7, "Metadata": 13, "ApiVersions": 3},
    (2, 16): {"Produce": 10, "Fetch": 16, "ListOffsets": 7, "Metadata": 13, "ApiVersions": 3},
}


def _librdkafka_max(version: str) -> dict[str, int] | None:
    major, minor = (int(x) for x in version.split(".")[:2])
    return LIBRDKAFKA_MAX.get((major, minor))


@dataclass
class VersionCheck:
    """The versions one client is expected to use, and the ApiVersions probes it may send first."""

    client: str
    client_max: dict[str, int]
    # A client sends ApiVersions at its own highest version before it knows the broker's, and
    # retries lower after UNSUPPORTED_VERSION; aiokafka instead always sends v0 first.
    api_versions_fixed: int | None = None

    def expected(self, broker_max: dict[str, int]) -> dict[str, int]:
        wanted = {api: min(self.client_max[api], broker_max[api]) for api in API_KEYS}
        if self.api_versions_fixed is not None:
            wanted["ApiVersions"] = self.api_versions_fixed
        return wanted

    def verify(self, used: dict[str, set[int]], broker_max: dict[str, int]) -> None:
        expected = self.expected(broker_max)
        problems = []
        for api, want in expected.items():
            got = set(used.get(api, set()))
            if api == "ApiVersions" and self.api_versions_fixed is None:
                got.discard(self.client_max["ApiVersions"])  # the first probe, answered with an error if too high
                if not got and want == self.client_max["ApiVersions"]:
                    got = {want}
            if got != {want}:
                problems.append(f"{api}: used {sorted(used.get(api, set()))}, expected {want} "
                                f"(client max {self.client_max[api]}, broker max {broker_max[api]})")
        assert not problems, f"{self.client}: " + "; ".join(problems)


def _versions_used(before: dict[tuple[str, int], int], after: dict[tuple[str, int], int]) -> dict[str, set[int]]:
    used: dict[str, set[int]] = {}
    for (api, version), count in after.items():
        if count > before.get((api, version), 0):
            used.setdefault(api, set()).add(version)
    return used


def _settled_versions(broker: BrokerProcess, window: float = 0.7, timeout: float = 15.0) -> dict[tuple[str, int], int]:
    """The counters once no request arrived for `window` seconds: a long-poll Fetch of a client
    closed a moment ago can still land, and must not be charged to the next client."""
    deadline = time.monotonic() + timeout
    current = broker.request_versions()
    while time.monotonic() < deadline:
        time.sleep(window)
        latest = broker.request_versions()
        if latest == current:
            return latest
        current = latest
    raise TimeoutError(f"broker request counters still moving after {timeout}s")


def _run_measured(broker: BrokerProcess, action: Callable[[], None]) -> dict[str, set[int]]:
    before = _settled_versions(broker)
    action()
    return _versions_used(before, _settled_versions(broker))


def _broker_max(broker: BrokerProcess) -> dict[str, int]:
    advertised = broker.advertised_versions()
    missing = [api for api, key in API_KEYS.items() if key not in advertised]
    assert not missing, f"broker does not advertise {missing}"
    return {api: advertised[key][1] for api, key in API_KEYS.items()}


def _assert_within_advertised(broker: BrokerProcess, used: dict[str, set[int]], probes: dict[str, int]) -> None:
    """No client sent any API at a version above the broker's advertised max (the ApiVersions
    probe excepted, which the broker answers with UNSUPPORTED_VERSION as it should)."""
    from kafka.protocol.api_key import ApiKey

    advertised = broker.advertised_versions()
    for api, versions in used.items():
        key = int(api) if api.lstrip("-").isdigit() else ApiKey[api].value
        assert key in advertised, f"a client sent {api} versions {sorted(versions)}, which the broker does not list"
        top = max(versions - {probes.get(api, -1)}, default=0)
        assert top <= advertised[key][1], f"{api} v{top} used but broker advertises max {advertised[key][1]}"


def _assert_negotiated(broker: BrokerProcess, check: VersionCheck, used: dict[str, set[int]]) -> None:
    check.verify(used, _broker_max(broker))
    probes = {} if check.api_versions_fixed is not None else {"ApiVersions": check.client_max["ApiVersions"]}
    _assert_within_advertised(broker, used, probes)


# ---------------------------------------------------------------- the clients

def _round_trip_measured(broker: BrokerProcess, topic: str, produce: Callable, consume: Callable) -> dict[str, set[int]]:
    """300 records into a new 3-partition topic and back with one client; the versions it used."""
    create_topic(broker.bootstrap, topic, 3)
    sent = _records(topic, 300)
    result: dict[str, object] = {}

    def run() -> None:
        result["acked"] = produce(broker.bootstrap, topic, sent)
        result["read"] = consume(broker.bootstrap, topic, range(3))

    used = _run_measured(broker, run)
    _assert_round_trip(sent, result["acked"], result["read"])
    return used


def test_kafka_python_produces_consumes_and_negotiates(module_broker: BrokerProcess) -> None:
    used = _round_trip_measured(module_broker, "clients-kafka-python", kafka_python_produce, kafka_python_consume)
    _assert_negotiated(module_broker, VersionCheck("kafka-python", _kafka_python_max()), used)


def test_confluent_kafka_produces_consumes_and_negotiates(module_broker: BrokerProcess) -> None:
    used = _round_trip_measured(module_broker, "clients-confluent", confluent_produce, confluent_consume)
    librdkafka = confluent_kafka.libversion()[0]
    client_max = _librdkafka_max(librdkafka)
    if client_max is None:
        pytest.fail(f"no version table for librdkafka {librdkafka}; add its maxima to LIBRDKAFKA_MAX")
    _assert_negotiated(module_broker, VersionCheck(f"confluent-kafka (librdkafka {librdkafka})", client_max), used)


def test_aiokafka_produces_consumes_and_negotiates(module_broker: BrokerProcess) -> None:
    def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> list[tuple[int, int]]:
        return aiokafka_produce(bootstrap, topic, records, acks="all", enable_idempotence=True)

    used = _round_trip_measured(module_broker, "clients-aiokafka", produce, aiokafka_consume)
    _assert_negotiated(module_broker, VersionCheck("aiokafka", _aiokafka_max(), api_versions_fixed=0), used)


def _kcat() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        pytest.skip("kcat is not installed (`make system-deps` installs it)")
    return path


def _kcat_librdkafka(kcat: str) -> str | None:
    out = subprocess.run([kcat, "-V"], capture_output=True, text=True, timeout=10)
    match = re.search(r"librdkafka (\d+\.\d+\.\d+)", out.stdout + out.stderr)
    return match.group(1) if match else None


def test_kcat_lists_produces_consumes_and_negotiates(module_broker: BrokerProcess) -> None:
    kcat = _kcat()
    topic = "clients-kcat"
    create_topic(module_broker.bootstrap, topic, 2)
    lines = [f"kc-{i}:kcat value {i}" for i in range(200)]
    common = [kcat, "-b", module_broker.bootstrap]
    output: list[str] = []

    def run() -> None:
        listing = subprocess.run(common + ["-L", "-t", topic], capture_output=True, text=True, timeout=30)
        assert listing.returncode == 0, listing.stderr
        assert f'topic "{topic}" with 2 partitions' in listing.stdout, listing.stdout
        assert "broker 1 at" in listing.stdout, listing.stdout
        produced = subprocess.run(common + ["-P", "-t", topic, "-K", ":", "-X", "acks=all"],
                                  input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
        assert produced.returncode == 0, produced.stderr
        consumed = subprocess.run(common + ["-C", "-t", topic, "-o", "beginning", "-e", "-q",
                                            "-f", "%k:%s %p %o\n"],
                                  capture_output=True, text=True, timeout=60)
        assert consumed.returncode == 0, consumed.stderr
        output.extend(consumed.stdout.splitlines())

    used = _run_measured(module_broker, run)
    got = {}
    for line in output:
        record, partition, offset = line.rsplit(" ", 2)
        got[record] = (int(partition), int(offset))
    assert sorted(got) == sorted(lines)
    per_partition: dict[int, list[int]] = {}
    for partition, offset in got.values():
        per_partition.setdefault(partition, []).append(offset)
    for partition, offsets in per_partition.items():
        assert sorted(offsets) == list(range(len(offsets))), f"partition {partition} offsets not contiguous"

    librdkafka = _kcat_librdkafka(kcat)
    client_max = _librdkafka_max(librdkafka) if librdkafka else None
    if client_max is None:
        pytest.skip(f"kcat works; no version table for its librdkafka {librdkafka}")
    _assert_negotiated(module_broker, VersionCheck(f"kcat (librdkafka {librdkafka})", client_max), used)


# ---------------------------------------------------------------- compression

@pytest.mark.parametrize("codec", CODECS)
def test_confluent_compression_round_trip(module_broker: BrokerProcess, codec: str) -> None:
    topic = f"codec-confluent-{codec}"
    create_topic(module_broker.bootstrap, topic, 2)
    # Repetitive values so every codec really compresses; several batches per partition.
    sent = [(f"{codec}-{i}".encode(), (f"{codec}:{i}:" + "abcdefgh" * 40).encode()) for i in range(2000)]
    acked = confluent_produce(module_broker.bootstrap, topic, sent, compression_type=codec, linger_ms=20)
    _assert_round_trip(sent, acked, confluent_consume(module_broker.bootstrap, topic, range(2)))
    # The other two libraries must decode what librdkafka compressed, through the broker.
    _assert_round_trip(sent, acked, kafka_python_consume(module_broker.bootstrap, topic, range(2)))
    _assert_round_trip(sent, acked, aiokafka_consume(module_broker.bootstrap, topic, range(2)))


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_compression_round_trip(module_broker: BrokerProcess, codec: str) -> None:
    topic = f"codec-kafka-python-{codec}"
    create_topic(module_broker.bootstrap, topic, 2)
    sent = [(f"{codec}-{i}".encode(), (f"{codec}:{i}:" + "ijklmnop" * 40).encode()) for i in range(2000)]
    acked = kafka_python_produce(module_broker.bootstrap, topic, sent, compression_type=codec, linger_ms=20)
    _assert_round_trip(sent, acked, kafka_python_consume(module_broker.bootstrap, topic, range(2)))
    _assert_round_trip(sent, acked, confluent_consume(module_broker.bootstrap, topic, range(2)))
