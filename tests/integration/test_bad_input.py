"""A storm of broken frames must not hurt the broker.

Thousands of frames, most of them mutations of real, valid requests (encoded with kafka-python's
message classes), each sent on a fresh connection (some pipelined several to a connection). The
client half-closes after sending, so a broker that waits for bytes that never come sees EOF.
Every connection must end in complete response frames and/or a close, never a hang or a torn
frame; the broker must stay up; data written before the storm must be intact after it.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest
from kafka.protocol.admin import DescribeClusterRequest, DescribeConfigsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.record.memory_records import MemoryRecordsBuilder

from protocol import encode_request, parse_response
from protocol.errors import ErrorCode
from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import confluent_consume, confluent_produce, create_topic, kafka_python_consume

pytestmark = pytest.mark.integration

SEED = 20240611
MAX_FRAME = 1 << 20
FUZZ_TOPIC = "fuzz"
INTACT_TOPIC = "intact"
CONNECTION_TIMEOUT = 8.0
STORM_BUDGET_S = 45.0
SENTINEL_ID = 0x5E771E

API_KEYS = {"ApiVersions": 18, "Metadata": 3, "Produce": 0, "Fetch": 1, "ListOffsets": 2, "InitProducerId": 22,
            "OffsetForLeaderEpoch": 23, "DescribeConfigs": 32, "DescribeCluster": 60}


def _records_blob() -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i in range(3):
        builder.append(timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"fuzz value %d" % i)
    builder.close()
    return bytes(builder.buffer())


def _request_makers() -> dict[str, Callable[[], object]]:
    """Fresh kafka-python request objects, one per supported API, aimed at the fuzz topic."""
    blob = _records_blob()
    produce_partition = ProduceRequest.TopicProduceData.PartitionProduceData
    fetch_partition = FetchRequest.FetchTopic.FetchPartition
    offsets_partition = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    epoch_topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    return {
        "ApiVersions": lambda: ApiVersionsRequest(client_software_name="fuzz", client_software_version="1"),
        "Metadata": lambda: MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=FUZZ_TOPIC)], allow_auto_topic_creation=False),
        "Produce": lambda: ProduceRequest(
            transactional_id=None, acks=1, timeout_ms=1000,
            topic_data=[ProduceRequest.TopicProduceData(
                name=FUZZ_TOPIC, partition_data=[produce_partition(index=0, records=blob)])]),
        "Fetch": lambda: FetchRequest(
            replica_id=-1, max_wait_ms=50, min_bytes=1, max_bytes=1 << 16, isolation_level=0,
            session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=FUZZ_TOPIC, partitions=[fetch_partition(
                partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=1 << 16)])],
            forgotten_topics_data=[], rack_id=""),
        "ListOffsets": lambda: ListOffsetsRequest(
            replica_id=-1, isolation_level=0, timeout_ms=1000,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=FUZZ_TOPIC, partitions=[offsets_partition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1, max_num_offsets=1)])]),
        "InitProducerId": lambda: InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1),
        "OffsetForLeaderEpoch": lambda: OffsetForLeaderEpochRequest(
            replica_id=-1, topics=[epoch_topic(topic=FUZZ_TOPIC, partitions=[epoch_topic.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=-1, leader_epoch=0)])]),
        "DescribeConfigs": lambda: DescribeConfigsRequest(
            resources=[DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=2, resource_name=FUZZ_TOPIC, configuration_keys=None)],
            include_synonyms=False, include_documentation=False),
        "DescribeCluster": lambda: DescribeClusterRequest(include_cluster_authorized_operations=False),
    }


def _encode(request: object, version: int, correlation_id: int) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="fuzz")  # type: ignore[attr-defined]
    return bytes(request.encode(version=version, header=True, framed=True))  # type: ignore[attr-defined]


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


SENTINEL = _encode(ApiVersionsRequest(), 0, SENTINEL_ID)


@dataclass
class ValidFrame:
    """A well-formed request frame the broker advertises support for; the seed of mutations."""

    api: str
    api_key: int
    version: int
    correlation_id: int
    frame: bytes


@dataclass
class Case:
    """What one connection sends; built once by the StormBuilder, then only read."""

    kind: str
    payload: bytes
    # Correlation ids that must be answered, in order, before any close (empty: anything goes).
    must_answer: list[int] = field(default_factory=list)
    check: Callable[[list[tuple[int, bytes]]], str | None] | None = None


@dataclass
class Outcome:
    """What one connection got back; made by the worker thread that ran the exchange."""

    case: Case
    responses: list[tuple[int, bytes]]
    ending: str  # "eof", "reset", "timeout", "torn"
    problem: str | None = None


def _exchange(address: tuple[str, int], case: Case) -> Outcome:
    responses: list[tuple[int, bytes]] = []
    try:
        sock = socket.create_connection(address, timeout=CONNECTION_TIMEOUT)
    except OSError as exc:
        return Outcome(case, responses, "reset", f"cannot connect: {exc!r}")
    buffer = bytearray()
    ending = "eof"
    try:
        sock.settimeout(CONNECTION_TIMEOUT)
        try:
            sock.sendall(case.payload + SENTINEL)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the broker closed while we were still sending: a close is an allowed answer
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                ending = "timeout"
                break
            except ConnectionResetError:
                ending = "reset"
                break
            if not chunk:
                break
            buffer += chunk
            while len(buffer) >= 4:
                (size,) = struct.unpack_from(">i", buffer, 0)
                if size < 4 or size > 64 << 20:
                    return Outcome(case, responses, "torn", f"response frame size {size}")
                if len(buffer) < 4 + size:
                    break
                body = bytes(buffer[4:4 + size])
                del buffer[:4 + size]
                responses.append((struct.unpack_from(">i", body, 0)[0], body))
    finally:
        sock.close()
    if buffer and ending == "eof":
        ending = "torn"
    outcome = Outcome(case, responses, ending)
    outcome.problem = _judge(outcome)
    return outcome


def _describe_head(payload: bytes) -> str:
    """The API key and version the first frame claims, for failure messages."""
    if len(payload) < 8:
        return "no header"
    size, key, version = struct.unpack_from(">ihh", payload, 0)
    names = {k: n for n, k in API_KEYS.items()}
    return f"size {size}, api {names.get(key, key)} v{version}"


def _judge(outcome: Outcome) -> str | None:
    if outcome.ending == "timeout":
        return f"neither answered nor closed {CONNECTION_TIMEOUT:.0f}s after the client half-closed (hang)"
    if outcome.ending == "torn":
        return "connection ended inside a response frame"
    got = [cid for cid, _ in outcome.responses]
    want = outcome.case.must_answer
    if want and got[:len(want)] != want:
        return f"responses {got} do not start with the expected {want}"
    if outcome.case.check is not None:
        return outcome.case.check(outcome.responses)
    return None


def _unsupported_api_versions_check(correlation_id: int) -> Callable[[list[tuple[int, bytes]]], str | None]:
    def check(responses: list[tuple[int, bytes]]) -> str | None:
        first = next((body for cid, body in responses if cid == correlation_id), None)
        if first is None:
            return "unsupported ApiVersions got no response"
        try:
            decoded = ApiVersionsResponse.decode(first, version=0, header=True)
        except Exception as exc:  # a malformed body is exactly what this check reports
            return f"unsupported ApiVersions response is not a v0 body: {exc!r}"
        if decoded.error_code != 35:
            return f"unsupported ApiVersions answered error {decoded.error_code}, expected 35"
        if not any(k.api_key == 18 for k in decoded.api_keys):
            return "unsupported ApiVersions response does not list ApiVersions itself"
        return None
    return check


class StormBuilder:
    """Makes the cases from the valid frames; all randomness from one seeded generator."""

    def __init__(self, valid: list[ValidFrame], advertised: dict[int, tuple[int, int]], rng: random.Random):
        self.valid = valid
        self.advertised = advertised
        self.rng = rng
        self.next_id = 1000

    def _cid(self) -> int:
        self.next_id += 1
        return self.next_id

    def _valid(self) -> ValidFrame:
        return self.rng.choice(self.valid)

    def flip_bits(self) -> Case:
        frame = bytearray(self._valid().frame)
        for _ in range(self.rng.randint(1, 6)):
            position = self.rng.randrange(4, len(frame))
            frame[position] ^= 1 << self.rng.randrange(8)
        return Case("bit-flip", bytes(frame))

    def mutate_bytes(self) -> Case:
        body = bytearray(self._valid().frame[4:])
        for _ in range(self.rng.randint(1, 4)):
            action = self.rng.choice(("set", "insert", "delete"))
            position = self.rng.randrange(len(body))
            if action == "set":
                body[position] = self.rng.choice((0x00, 0xFF, 0x7F, 0x80, self.rng.randrange(256)))
            elif action == "insert":
                body[position:position] = self.rng.randbytes(self.rng.randint(1, 8))
            elif len(body) > 1:
                del body[position:position + self.rng.randint(1, 8)]
        return Case("byte-mutation", _frame(bytes(body)))

    def truncate_consistent(self) -> Case:
        body = self._valid().frame[4:]
        return Case("truncated-body", _frame(body[:self.rng.randrange(len(body))]))

    def truncate_midframe(self) -> Case:
        frame = self._valid().frame
        return Case("truncated-frame", frame[:self.rng.randrange(1, len(frame))])

    def bad_size(self) -> Case:
        body = self._valid().frame[4:]
        size = self.rng.choice((-1, -(1 << 31), 0, 1, 2, 3, len(body) + self.rng.randint(1, 100), MAX_FRAME + 1,
                                (1 << 31) - 1))
        return Case("bad-size", struct.pack(">i", size) + body)

    def unknown_api_key(self) -> Case:
        frame = bytearray(self._valid().frame)
        key = self.rng.choice((-1, -32768, 999, 32767, self.rng.randint(100, 30000)))
        while key in self.advertised:
            key += 1
        struct.pack_into(">h", frame, 4, key)
        return Case("unknown-api-key", bytes(frame))

    def garbage_after_header(self) -> Case:
        valid = self._valid()
        # Header v1 (non-flexible, as kafka-python writes it): key, version, id, client id "fuzz".
        header = struct.pack(">hhih", valid.api_key, valid.version, self._cid(), 4) + b"fuzz"
        return Case("garbage-after-header", _frame(header + self.rng.randbytes(self.rng.randint(0, 300))))

    def unsupported_version(self) -> Case:
        api, key = self.rng.choice(sorted(API_KEYS.items()))
        if key not in self.advertised:
            key = 18
        top = self.advertised[key][1]
        version = self.rng.choice((top + 1, top + 2, top + 50, 32767, -1))
        cid = self._cid()
        if key == 18:
            # Shaped like a real client's probe: a v3 request (flexible header), renumbered.
            frame = bytearray(_encode(_request_makers()["ApiVersions"](), 3, cid))
        else:
            frame = bytearray(next(v for v in self.valid if v.api_key == key).frame)
        struct.pack_into(">h", frame, 6, version)
        struct.pack_into(">i", frame, 8, cid)
        if key == 18 and version >= 0:
            return Case("unsupported-api-versions", bytes(frame), must_answer=[cid, SENTINEL_ID],
                        check=_unsupported_api_versions_check(cid))
        return Case(f"unsupported-version-{api}", bytes(frame))

    def random_frame(self) -> Case:
        return Case("random", _frame(self.rng.randbytes(self.rng.randint(0, 2000))))

    def oversized(self) -> Case:
        declared = MAX_FRAME + self.rng.randint(1, MAX_FRAME)
        head = self._valid().frame[4:]
        return Case("oversized", struct.pack(">i", declared) + head + bytes(min(declared, 256 * 1024)))

    def pipelined(self) -> Case:
        parts = []
        must: list[int] = []
        broken = False
        for _ in range(self.rng.randint(2, 6)):
            if self.rng.random() < 0.5:
                valid = self._valid()
                cid = self._cid()
                frame = bytearray(valid.frame)
                struct.pack_into(">i", frame, 8, cid)
                parts.append(bytes(frame))
                if not broken:
                    must.append(cid)
            else:
                parts.append(self.rng.choice((self.flip_bits, self.mutate_bytes, self.truncate_consistent))().payload)
                broken = True
        if not broken:
            must.append(SENTINEL_ID)
        return Case("pipelined", b"".join(parts), must_answer=must)


def _valid_frames(advertised: dict[int, tuple[int, int]]) -> list[ValidFrame]:
    frames = []
    cid = 1
    for api, make in _request_makers().items():
        key = API_KEYS[api]
        if key not in advertised:
            continue
        low, high = advertised[key]
        cls = type(make())
        for version in range(low, min(high, cls.max_version) + 1):  # type: ignore[attr-defined]
            if api in ("Produce", "Fetch") and version >= 13:
                continue  # these versions address topics by id; the names above would not resolve
            cid += 1
            frames.append(ValidFrame(api, key, version, cid, _encode(make(), version, cid)))
    return frames


@pytest.fixture
def fuzz_broker(broker_factory) -> BrokerProcess:
    return broker_factory(overrides={"socket.request.max.bytes": str(MAX_FRAME),
                                     "auto.create.topics.enable": "false", "broker.rack": "rack-1"})


def test_broken_frames_never_hang_or_hurt_the_broker(fuzz_broker: BrokerProcess) -> None:
    broker = fuzz_broker
    create_topic(broker.bootstrap, FUZZ_TOPIC, 1)
    create_topic(broker.bootstrap, INTACT_TOPIC, 2)
    before = [(f"before-{i}".encode(), f"intact value {i}".encode()) for i in range(500)]
    before_acks = confluent_produce(broker.bootstrap, INTACT_TOPIC, before)

    advertised = broker.advertised_versions()
    valid = _valid_frames(advertised)
    assert {v.api for v in valid} >= {"ApiVersions", "Metadata", "Produce", "Fetch"}
    rng = random.Random(SEED)
    storm = StormBuilder(valid, advertised, rng)

    cases = [Case(f"valid-{v.api}-v{v.version}", v.frame, must_answer=[v.correlation_id, SENTINEL_ID])
             for v in valid]
    weighted = [
        (storm.flip_bits, 900), (storm.mutate_bytes, 500), (storm.truncate_consistent, 200),
        (storm.truncate_midframe, 150), (storm.bad_size, 150), (storm.unknown_api_key, 100),
        (storm.garbage_after_header, 200), (storm.unsupported_version, 150), (storm.random_frame, 150),
        (storm.pipelined, 200), (storm.oversized, 20),
    ]
    for make, count in weighted:
        cases += [make() for _ in range(count)]
    rng.shuffle(cases)

    started = time.monotonic()
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=16) as pool:
        for start in range(0, len(cases), 200):
            if time.monotonic() - started > STORM_BUDGET_S:
                break
            outcomes += pool.map(lambda c: _exchange(broker.address, c), cases[start:start + 200])
            assert broker.is_running(), broker.describe_failure("broker died during the storm")
    elapsed = time.monotonic() - started

    assert len(outcomes) == len(cases), (
        f"storm cut short: {len(outcomes)} of {len(cases)} connections in {elapsed:.0f}s")
    problems = [o for o in outcomes if o.problem]
    summary = Counter((o.case.kind.split("-v")[0], o.problem) for o in problems)
    examples = "\n".join(
        f"  {o.case.kind} ({_describe_head(o.case.payload)}): {o.problem}; ending={o.ending}; "
        f"payload[:64]={o.case.payload[:64].hex()}"
        for o in problems[:10])
    assert not problems, f"{len(problems)} of {len(outcomes)} connections misbehaved: {dict(summary)}\n{examples}"
    endings = Counter(o.ending for o in outcomes)
    assert endings["eof"] + endings["reset"] == len(outcomes)

    assert broker.is_running(), broker.describe_failure("broker died after the storm")
    with broker.wire() as wire:
        assert wire.api_versions(version=0).error_code == 0

    after = [(f"after-{i}".encode(), f"after value {i}".encode()) for i in range(200)]
    after_acks = confluent_produce(broker.bootstrap, INTACT_TOPIC, after)
    for read in (confluent_consume(broker.bootstrap, INTACT_TOPIC, range(2)),
                 kafka_python_consume(broker.bootstrap, INTACT_TOPIC, range(2))):
        got = {(r.partition, r.offset): (r.key, r.value) for r in read}
        assert len(read) == len(before) + len(after)
        for (key, value), position in zip(before + after, before_acks + after_acks, strict=True):
            assert got[position] == (key, value), f"record at {position} changed"


def _closed_within(sock: socket.socket, timeout: float) -> bool:
    """True if the peer closes (EOF or reset) within `timeout`, discarding anything it sends."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return False


def test_oversized_frame_is_refused_from_its_size_alone(fuzz_broker: BrokerProcess) -> None:
    """The broker must not wait for (or buffer) a body larger than socket.request.max.bytes."""
    with socket.create_connection(fuzz_broker.address, timeout=5) as sock:
        sock.sendall(struct.pack(">i", MAX_FRAME + 1) + SENTINEL[4:])
        assert _closed_within(sock, 5.0), "connection still open 5s after announcing an oversized frame"
    with socket.create_connection(fuzz_broker.address, timeout=5) as sock:
        sock.sendall(struct.pack(">i", -5))
        assert _closed_within(sock, 5.0), "connection still open 5s after a negative frame size"
    with fuzz_broker.wire() as wire:
        assert wire.api_versions(version=0).error_code == 0


@pytest.mark.parametrize("offset_from_max", [1, 2, 100])
def test_unsupported_api_versions_gets_error_35_with_v0_body(fuzz_broker: BrokerProcess, offset_from_max: int) -> None:
    top = fuzz_broker.advertised_versions()[18][1]
    version = min(top + offset_from_max, 32767)
    frame = bytearray(_encode(_request_makers()["ApiVersions"](), 3, 77))
    struct.pack_into(">h", frame, 6, version)
    with fuzz_broker.wire() as wire:
        wire.send_raw(bytes(frame))
        body = wire.recv_frame()
        response = ApiVersionsResponse.decode(body, version=0, header=True)
        assert response.header.correlation_id == 77
        assert response.error_code == 35
        listed = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert listed.get(18, (0, -1))[1] == top, listed
        # The connection stays usable: the client now retries at a version both support.
        assert wire.api_versions(version=min(top, 3)).error_code == 0


def test_describe_cluster_of_the_controllers_endpoint_is_refused(fuzz_broker: BrokerProcess) -> None:
    """Only the brokers endpoint type (1) is served; a controller-endpoint request (2, KRaft's) is refused
    with UNSUPPORTED_ENDPOINT_TYPE, its type echoed and no brokers."""
    with fuzz_broker.wire() as wire:
        wire.send_raw(encode_request(60, 1, 5, "bad-input", {"include_cluster_authorized_operations": False,
                                                             "endpoint_type": 2}))
        correlation_id, refused = parse_response(60, 1, wire.recv_frame())
        wire.send_raw(encode_request(60, 1, 6, "bad-input", {"include_cluster_authorized_operations": False,
                                                             "endpoint_type": 1}))
        _, served = parse_response(60, 1, wire.recv_frame())
    assert correlation_id == 5
    assert (refused.error_code, refused.endpoint_type, refused.brokers, refused.throttle_time_ms) == (
        ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, 2, [], 0)
    assert refused.error_message == "only the brokers endpoint type is served"
    assert refused.cluster_id == served.cluster_id and served.error_code == ErrorCode.NONE
    assert [(b.port, b.rack) for b in served.brokers] == [(fuzz_broker.address[1], "rack-1")]
