"""Consumer groups against a real broker: cooperative rebalancing (librdkafka's cooperative-sticky),
static membership, kafka-python groups across a restart, session timeouts, the error codes of
bad group requests (and that they change nothing), and committed offsets surviving the loss of
the other log dir."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from kafka import KafkaConsumer

from minikafka.coordinator.records import offsets_partition_for
from minikafka.group.schemas import CONSUMER_SUBSCRIPTION
from protocol import encode_request, parse_response
from protocol.errors import ErrorCode
from protocol.record_codec import NewRecord, encode_batch
from tests.integration.broker_process import BrokerProcess, wait_until
from tests.integration.clients import confluent_produce, create_topic
from tests.integration.disk_faults import replace_with_file

pytestmark = pytest.mark.integration

E = ErrorCode
OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "500",
             "offsets.topic.num.partitions": "10"}
FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, COMMIT, FETCH, DELETE_GROUPS, OFFSET_DELETE, PRODUCE = (
    10, 11, 12, 13, 14, 15, 8, 9, 42, 47, 0)


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory):
    broker = BrokerProcess(tmp_path_factory.mktemp("groups"), overrides=OVERRIDES)
    try:
        yield broker.start()
    finally:
        broker.close()


class Wire:
    """Requests encoded with minikafka's codec on one blocking connection."""

    _ids = itertools.count(1)

    def __init__(self, broker: BrokerProcess) -> None:
        self.connection = broker.wire(timeout=30)

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.connection.close()

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        correlation_id = next(self._ids)
        self.connection.send_raw(encode_request(api_key, version, correlation_id, "group-tests", body))
        got, response = parse_response(api_key, version, self.connection.recv_frame())
        assert got == correlation_id
        return response


def _subscription(*topics: str) -> bytes:
    return CONSUMER_SUBSCRIPTION.encode(0, {"topics": list(topics), "user_data": None})


def _join(wire: Wire, group: str, member_id: str = "", session_ms: int = 10_000, instance: str | None = None,
          topics: tuple[str, ...] = ("t",)) -> Any:
    return wire.call(JOIN, 7, {"group_id": group, "session_timeout_ms": session_ms, "rebalance_timeout_ms": 5000,
                               "member_id": member_id, "group_instance_id": instance, "protocol_type": "consumer",
                               "protocols": [{"name": "range", "metadata": _subscription(*topics)}]})


def _member(wire: Wire, group: str, **kwargs: Any) -> tuple[str, int]:
    """Join alone (as a v4+ client: first for an id, then for real) and sync; (member id, generation)."""
    first = _join(wire, group, **kwargs)
    member_id = first.member_id
    if first.error_code == E.MEMBER_ID_REQUIRED:
        first = _join(wire, group, member_id=member_id, **kwargs)
    assert first.error_code == E.NONE, first
    synced = wire.call(SYNC, 5, {"group_id": group, "generation_id": first.generation_id, "member_id": member_id,
                                 "group_instance_id": kwargs.get("instance"), "protocol_type": "consumer",
                                 "protocol_name": "range", "assignments": [{"member_id": member_id,
                                                                             "assignment": b"mine"}]})
    assert synced.error_code == E.NONE and synced.assignment == b"mine", synced
    return member_id, first.generation_id


def _commit(wire: Wire, group: str, generation: int, member_id: str, offsets: dict[tuple[str, int], int],
            instance: str | None = None) -> dict[tuple[str, int], int]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), offset in offsets.items():
        topics.setdefault(topic, []).append({"partition_index": p, "committed_offset": offset,
                                             "committed_metadata": ""})
    response = wire.call(COMMIT, 8, {"group_id": group, "generation_id_or_member_epoch": generation,
                                     "member_id": member_id, "group_instance_id": instance,
                                     "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def _committed(wire: Wire, group: str) -> dict[tuple[str, int], int]:
    response = wire.call(FETCH, 8, {"groups": [{"group_id": group, "topics": None}]})
    (found,) = response.groups
    assert found.error_code == E.NONE, found
    return {(t.name, p.partition_index): p.committed_offset for t in found.topics for p in t.partitions}


def test_bad_group_requests_get_kafkas_error_codes_and_change_nothing(group_broker: BrokerProcess) -> None:
    create_topic(group_broker.bootstrap, "bad-input", 2)
    with Wire(group_broker) as wire, Wire(group_broker) as other:
        found = wire.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["bad-g"]})
        assert found.coordinators[0].error_code == E.NONE and found.coordinators[0].node_id == 1
        with group_broker.wire() as metadata_wire:
            (offsets_topic,) = metadata_wire.metadata(["__consumer_offsets"], version=1).topics
        assert offsets_topic.error_code == 0 and offsets_topic.is_internal
        assert len(offsets_topic.partitions) == 10
        assert _join(wire, "bad-g", session_ms=100).error_code == E.INVALID_SESSION_TIMEOUT
        assert _join(wire, "").error_code == E.INVALID_GROUP_ID
        member, generation = _member(wire, "bad-g", topics=("bad-input",))
        assert _commit(wire, "bad-g", generation, member, {("bad-input", 0): 5}) == {("bad-input", 0): E.NONE}

        assert _commit(other, "bad-g", generation, "intruder", {("bad-input", 0): 1}) == {
            ("bad-input", 0): E.UNKNOWN_MEMBER_ID}
        assert _commit(other, "bad-g", generation - 1, member, {("bad-input", 0): 1}) == {
            ("bad-input", 0): E.ILLEGAL_GENERATION}
        assert _commit(other, "bad-g", -1, "", {("bad-input", 0): 1}) == {("bad-input", 0): E.UNKNOWN_MEMBER_ID}
        assert _commit(wire, "bad-g", generation, member, {("no-such-topic", 0): 1, ("bad-input", 7): 1}) == {
            ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("bad-input", 7): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert _committed(other, "bad-g") == {("bad-input", 0): 5}, "a refused commit changed the offsets"

        heartbeat = other.call(HEARTBEAT, 4, {"group_id": "bad-g", "generation_id": generation,
                                              "member_id": "intruder"})
        assert heartbeat.error_code == E.UNKNOWN_MEMBER_ID
        assert other.call(HEARTBEAT, 4, {"group_id": "no-such-group", "generation_id": 1,
                                         "member_id": "m"}).error_code == E.UNKNOWN_MEMBER_ID

        deleted = other.call(DELETE_GROUPS, 2, {"groups_names": ["bad-g", "no-such-group"]})
        assert {r.group_id: r.error_code for r in deleted.results} == {
            "bad-g": E.NON_EMPTY_GROUP, "no-such-group": E.GROUP_ID_NOT_FOUND}
        dropped = other.call(OFFSET_DELETE, 0, {"group_id": "bad-g", "topics": [
            {"name": "bad-input", "partitions": [{"partition_index": 0}]}]})
        assert dropped.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC
        assert _committed(other, "bad-g") == {("bad-input", 0): 5}

        described = other.call(DESCRIBE, 6, {"groups": ["no-such-group", "bad-g"]})
        unknown, known = described.groups
        assert unknown.error_code == E.GROUP_ID_NOT_FOUND
        assert (known.error_code, known.group_state, known.protocol_data) == (E.NONE, "Stable", "range")
        assert [m.member_id for m in known.members] == [member]
        assert known.members[0].client_host == "/127.0.0.1"
        assert other.call(DESCRIBE, 5, {"groups": ["no-such-group"]}).groups[0].group_state == "Dead"

        produced = other.call(PRODUCE, 9, {"acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "__consumer_offsets", "partition_data": [
                {"index": 0, "records": encode_batch([NewRecord(b"k", b"v")], 0)}]}]})
        assert produced.responses[0].partition_responses[0].error_code == E.INVALID_TOPIC_EXCEPTION

        left = wire.call(LEAVE, 5, {"group_id": "bad-g", "members": [{"member_id": member}]})
        assert (left.error_code, left.members[0].error_code) == (E.NONE, E.NONE)
        deleted = other.call(DELETE_GROUPS, 2, {"groups_names": ["bad-g"]})
        assert deleted.results[0].error_code == E.NONE
        assert _committed(other, "bad-g") == {}


def test_static_member_is_fenced_by_its_replacement(group_broker: BrokerProcess) -> None:
    with Wire(group_broker) as first, Wire(group_broker) as second:
        old, generation = _member(first, "static-g", instance="host-1")
        new, new_generation = _member(second, "static-g", instance="host-1")
        assert new != old and new_generation == generation, "a static member's restart must not rebalance"
        heartbeat = first.call(HEARTBEAT, 4, {"group_id": "static-g", "generation_id": generation,
                                              "member_id": old, "group_instance_id": "host-1"})
        assert heartbeat.error_code == E.FENCED_INSTANCE_ID
        create_topic(group_broker.bootstrap, "static-t", 1)
        assert _commit(first, "static-g", generation, old, {("static-t", 0): 1}, instance="host-1") == {
            ("static-t", 0): E.FENCED_INSTANCE_ID}
        assert _commit(second, "static-g", generation, new, {("static-t", 0): 3}, instance="host-1") == {
            ("static-t", 0): E.NONE}


def test_a_silent_member_is_evicted_after_its_session_timeout(group_broker: BrokerProcess) -> None:
    with Wire(group_broker) as quiet, Wire(group_broker) as alive:
        quiet_id, _ = _member(quiet, "timeout-g", session_ms=1000)
        join = _join(alive, "timeout-g", session_ms=10_000)
        # The second join waits for the quiet member to rejoin, which it never does: once its
        # session times out the rebalance completes without it.
        started = time.monotonic()
        second = _join(alive, "timeout-g", member_id=join.member_id, session_ms=10_000)
        assert second.error_code == E.NONE and second.leader == join.member_id
        assert [m.member_id for m in second.members] == [join.member_id]
        assert time.monotonic() - started < 6
        assert quiet.call(HEARTBEAT, 4, {"group_id": "timeout-g", "generation_id": 1,
                                         "member_id": quiet_id}).error_code == E.UNKNOWN_MEMBER_ID


def test_cooperative_sticky_members_keep_their_partitions(group_broker: BrokerProcess) -> None:
    topic, partitions = "coop", 6
    create_topic(group_broker.bootstrap, topic, partitions)
    confluent_produce(group_broker.bootstrap, topic, [(b"k%d" % i, b"v") for i in range(600)])
    lock = threading.Lock()
    owned: dict[str, set[int]] = {"a": set(), "b": set()}  # kept by each member's rebalance callbacks
    revoked: dict[str, list[set[int]]] = {"a": [], "b": []}
    consumed: dict[str, int] = {"a": 0, "b": 0}
    stop = threading.Event()

    def run(name: str) -> None:
        def on_assign(consumer: Any, tps: list[Any]) -> None:
            with lock:
                owned[name] |= {tp.partition for tp in tps}

        def on_revoke(consumer: Any, tps: list[Any]) -> None:
            with lock:
                owned[name] -= {tp.partition for tp in tps}
                revoked[name].append({tp.partition for tp in tps})

        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": group_broker.bootstrap, "group.id": "coop-g", "client.id": name,
            "partition.assignment.strategy": "cooperative-sticky", "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        try:
            while not stop.is_set():
                msg = consumer.poll(0.1)
                if msg is not None and msg.error() is None:
                    with lock:
                        consumed[name] += 1
        finally:
            consumer.close()

    def snapshot() -> tuple[set[int], set[int]]:
        with lock:
            return set(owned["a"]), set(owned["b"])

    threads = [threading.Thread(target=run, args=("a",), daemon=True)]
    threads[0].start()
    try:
        wait_until(lambda: len(snapshot()[0]) == partitions, timeout=30, what="the first member owning everything")
        threads.append(threading.Thread(target=run, args=("b",), daemon=True))
        threads[1].start()
        wait_until(lambda: snapshot()[1] and len(snapshot()[0] | snapshot()[1]) == partitions
                   and not snapshot()[0] & snapshot()[1], timeout=30, what="the partitions shared by two members")
        kept, moved = snapshot()
        assert kept and moved and kept | moved == set(range(partitions))
        # Cooperative: the first member gave up only what moved, never its whole assignment.
        with lock:
            assert revoked["a"] == [moved], revoked
        wait_until(lambda: consumed["a"] + consumed["b"] >= 600, timeout=30, what="everything consumed")
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)


def test_kafka_python_group_commits_survive_a_restart(group_broker: BrokerProcess) -> None:
    topic = "kp-group"
    create_topic(group_broker.bootstrap, topic, 3)
    confluent_produce(group_broker.bootstrap, topic, [(b"k%d" % i, b"v") for i in range(90)])

    def consume(expected: int) -> dict[int, int]:
        consumer = KafkaConsumer(topic, bootstrap_servers=group_broker.bootstrap, group_id="kp-g",
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        try:
            seen = 0
            deadline = time.monotonic() + 30
            while seen < expected and time.monotonic() < deadline:
                seen += sum(len(batch) for batch in consumer.poll(timeout_ms=500).values())
            assert seen == expected
            consumer.commit()
            return {tp.partition: consumer.committed(tp) for tp in consumer.assignment()}
        finally:
            consumer.close()

    assert sum(consume(90).values()) == 90
    group_broker.restart(clean=False)
    confluent_produce(group_broker.bootstrap, topic, [(b"n%d" % i, b"v") for i in range(9)])
    committed = consume(9)
    assert sum(committed.values()) == 99


def test_offsets_survive_the_loss_of_the_other_log_dir(broker_factory) -> None:
    broker: BrokerProcess = broker_factory(overrides=OVERRIDES)
    create_topic(broker.bootstrap, "kept", 1)
    groups = [f"g{i}" for i in range(40)]
    with Wire(broker) as wire:
        for i, group in enumerate(groups):
            assert _commit(wire, group, -1, "", {("kept", 0): 100 + i}) == {("kept", 0): E.NONE}
    partitions = broker.partition_dirs()
    home = {g: partitions[f"__consumer_offsets-{offsets_partition_for(g, 10)}"] for g in groups}
    lost_dir = broker.log_dirs[1]
    survivors = [g for g in groups if home[g] != lost_dir]
    assert survivors and len(survivors) < len(groups)
    broker.kill9()
    replace_with_file(Path(lost_dir))
    broker.start()
    with Wire(broker) as wire:
        for i, group in enumerate(groups):
            found = wire.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0]
            if group in survivors:
                assert found.error_code == E.NONE
                assert _committed(wire, group) == {("kept", 0): 100 + i}, group
            else:
                assert found.error_code == E.COORDINATOR_NOT_AVAILABLE, group
    assert broker.is_running()


def test_commit_and_fetch_by_topic_id(group_broker: BrokerProcess) -> None:
    """OffsetCommit and OffsetFetch v10 name topics by id (no client in the test matrix sends them yet)."""
    create_topic(group_broker.bootstrap, "by-id", 2)
    with group_broker.wire() as metadata_wire:
        (topic,) = metadata_wire.metadata(["by-id"], version=12).topics
    unknown_id = uuid.UUID(int=12345)
    with Wire(group_broker) as wire:
        committed = wire.call(COMMIT, 10, {"group_id": "id-g", "generation_id_or_member_epoch": -1, "member_id": "",
                                           "topics": [
                                               {"topic_id": topic.topic_id, "partitions": [
                                                   {"partition_index": 1, "committed_offset": 17,
                                                    "committed_metadata": "m"}]},
                                               {"topic_id": unknown_id, "partitions": [
                                                   {"partition_index": 0, "committed_offset": 1,
                                                    "committed_metadata": None}]}]})
        assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in committed.topics] == [
            (topic.topic_id, [E.NONE]), (unknown_id, [E.UNKNOWN_TOPIC_ID])]
        fetched = wire.call(FETCH, 10, {"groups": [
            {"group_id": "id-g", "topics": [{"topic_id": topic.topic_id, "partition_indexes": [0, 1]}]},
            {"group_id": "id-g", "topics": None}]})
        wanted, everything = fetched.groups
        assert [(p.partition_index, p.committed_offset, p.metadata) for p in wanted.topics[0].partitions] == [
            (0, -1, ""), (1, 17, "m")]
        assert [(t.topic_id, [(p.partition_index, p.committed_offset) for p in t.partitions])
                for t in everything.topics] == [(topic.topic_id, [(1, 17)])]
        assert _committed(wire, "id-g") == {("by-id", 1): 17}
