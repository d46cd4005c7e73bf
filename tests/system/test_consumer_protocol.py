"""KIP-848 consumer groups on a 3-broker cluster with group.protocol=consumer, with confluent-kafka
and with Kafka's Java client 4.x.

Members (each its own process: tests/system/consumer_protocol_member.py, or a JVM running
tests/interop/java/EventLogMember.java) join and leave, one is killed with kill -9, and the broker coordinating the group is killed with kill -9, while a
producer writes keyed records. Then, from the members' own event logs:
- every partition is owned by one member at a time (its assign/revoke callbacks' timeline);
- every acknowledged record is read, and none is read twice past an offset its reader committed.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from minikafka.coordinator.records import offsets_partition_for
from tests.integration.broker_process import wait_until
from tests.interop.jvm import sources
from tests.interop.kafka import kafka
from tests.system.cluster import Cluster
from tests.system.load import ProducerRun
from tests.system.zookeeper import ZooKeeperProcess

TOPIC = "kip848-events"
GROUP = "kip848-readers"
PARTITIONS = 6
OFFSETS_PARTITIONS = 6  # the system tests' offsets.topic.num.partitions
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("kip848")
    zookeeper = ZooKeeperProcess(root / "zookeeper").start()
    made = Cluster(root, zookeeper, overrides={"group.consumer.session.timeout.ms": "6000",
                                              "group.consumer.heartbeat.interval.ms": "500"})
    try:
        yield made.start()
    except BaseException:
        print(made.stderr(), file=sys.stderr)
        raise
    finally:
        made.close()
        zookeeper.close()


@dataclass
class Member:
    """A member process and what its event log says."""

    name: str
    events_path: Path
    process: subprocess.Popen[bytes]
    killed_at: float | None = None
    events: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def start(cls, cluster: Cluster, directory: Path, name: str, group: str = GROUP, topic: str = TOPIC,
              protocol: str = "consumer", client: str = "confluent", hold: bool = False) -> Member:
        """With `hold` (Java only), the JVM starts but joins at `go`."""
        path = directory / f"{name}.jsonl"
        if client == "java":
            command = _java_member_command("--bootstrap", cluster.bootstrap, "--group", group, "--topic", topic,
                                           "--name", name, "--events", str(path), "--protocol", protocol,
                                           "--hold", "yes" if hold else "no")
        else:
            command = [sys.executable, "-m", "tests.system.consumer_protocol_member", cluster.bootstrap, group, topic,
                       name, str(path), protocol]
        process = subprocess.Popen(
            command, cwd=REPO, stdin=subprocess.PIPE if hold else subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(directory / f"{name}.stderr", "wb"), env=dict(os.environ, PYTHONUNBUFFERED="1"))
        return cls(name, path, process)

    def read(self) -> list[dict[str, Any]]:
        if self.events_path.exists():
            lines = self.events_path.read_text(encoding="utf-8").splitlines()
            # A process killed mid-write may leave half a line.
            self.events = [json.loads(line) for line in lines if line.endswith("}")]
        return self.events

    def owned(self) -> set[int]:
        owned: set[int] = set()
        for event in self.read():
            if event["e"] == "assign":
                owned |= set(event["p"])
            elif event["e"] in ("revoke", "lost"):
                owned -= set(event["p"])
        return owned

    def read_count(self) -> int:
        return sum(len(e["r"]) for e in self.read() if e["e"] == "read")

    def commit_count(self) -> int:
        return sum(1 for e in self.read() if e["e"] == "commit")

    def go(self) -> Member:
        """A held member joins its group."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        return self

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.go()  # a member still held sees it is to stop, and does not join
            try:
                self.process.wait(30)
            finally:
                if self.process.poll() is None:
                    self.process.kill()
                    self.process.wait(10)

    def kill9(self) -> None:
        self.killed_at = time.time()
        self.process.kill()
        self.process.wait(10)


def _java_member_command(*args: str) -> list[str]:
    """A JVM of its own running Kafka 4's consumer (EventLogMember): killing it kills one member."""
    return kafka("4").java_command("EventLogMember", *args, extra_classpath=[_java_classes()], heap="128m")


@functools.cache
def _java_classes() -> Path:
    return kafka("4").compile(sources("4"))


def _intervals(members: list[Member], end: float) -> dict[int, list[tuple[float, float, str]]]:
    """Per partition, the (from, to, member) spans each member owned it, from its callbacks. A
    killed member's spans end when it was killed."""
    spans: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for member in members:
        since: dict[int, float] = {}
        for event in member.read():
            if event["e"] == "assign":
                for p in event["p"]:
                    since[p] = event["t"]
            elif event["e"] in ("revoke", "lost"):
                for p in event["p"]:
                    spans[p].append((since.pop(p), event["t"], member.name))
        for p, start in since.items():
            spans[p].append((start, member.killed_at or end, member.name))
    return spans


def _check(members: list[Member], producer: ProducerRun) -> None:
    for partition, spans in _intervals(members, time.time()).items():
        spans.sort()
        held_until, holder = 0.0, ""
        for start, end, owner in spans:
            assert held_until <= start, f"partition {partition} owned by {holder} and {owner} at once"
            if end > held_until:
                held_until, holder = end, owner
    readings: dict[tuple[int, int], list[tuple[float, str, str]]] = {}  # (when, reader, key)
    commits: dict[str, list[tuple[float, int, int]]] = {}  # reader -> (when, partition, next offset)
    for member in members:
        for event in member.read():
            if event["e"] == "read":
                for partition, offset, key in event["r"]:
                    readings.setdefault((partition, offset), []).append((event["t"], member.name, key))
            elif event["e"] == "commit":
                commits.setdefault(member.name, []).extend(
                    (event["t"], int(partition), offset) for partition, offset in event["c"].items())
    acked = {(p, o): key.decode() for key, (p, o) in producer.acked.items()}
    assert acked, "nothing was produced"
    missing = set(acked) - set(readings)
    assert not missing, f"{len(missing)} acknowledged records never read, e.g. {sorted(missing)[:5]}"
    wrong = [(where, reads) for where, reads in readings.items()
             if any(key != acked.get(where, key) for _, _, key in reads)]
    assert not wrong, f"records read are not what was written: {wrong[:3]}"
    # Read again: fine only if its earlier reader had not committed past it before the next read
    # (a killed member, a commit that failed); one that had handed it on, so no one reads it again.
    past_commit = []
    for (partition, offset), reads in readings.items():
        reads.sort()
        for (read_at, reader, _), (again_at, _, _) in itertools.pairwise(reads):
            if any(read_at <= at <= again_at and p == partition and committed > offset
                   for at, p, committed in commits.get(reader, [])):
                past_commit.append(((partition, offset), [r for _, r, _ in reads]))
    assert not past_commit, f"records read again past a committed offset: {past_commit[:5]}"


def _owners(members: list[Member]) -> dict[int, str]:
    return {p: m.name for m in members if m.process.poll() is None for p in m.owned()}


@pytest.mark.parametrize("client", ["confluent", "java"])
def test_members_join_leave_die_and_survive_a_coordinator_failover(cluster: Cluster, tmp_path: Path,
                                                                   client: str) -> None:
    topic, group = f"{TOPIC}-{client}", f"{GROUP}-{client}"
    cluster.create_topic(topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    producer = ProducerRun("confluent", cluster.bootstrap, topic, PARTITIONS, pace_s=0.004).start()
    members: list[Member] = []

    def start(name: str, hold: bool = False) -> Member:
        return Member.start(cluster, tmp_path, name, group, topic, client=client, hold=hold)

    # JVMs start slowly on a loaded machine: the later members' start while the first ones join.
    held = {name: start(name, hold=True) for name in ("m3", "m4")} if client == "java" else {}

    def join(name: str) -> Member:
        return held.pop(name).go() if name in held else start(name)

    try:
        members += [start("m1"), start("m2")]
        wait_until(lambda: len(_owners(members)) == PARTITIONS and all(m.owned() for m in members), 60,
                   interval=0.2, what="two members sharing all partitions")
        members.append(join("m3"))
        wait_until(lambda: len(_owners(members)) == PARTITIONS and all(m.owned() for m in members), 60,
                   interval=0.2, what="a third member given its share")
        described = _await_stable(cluster, group, "the group stable with its three members")
        assert described.type.name == "CONSUMER" and len(described.members) == 3
        members[0].stop()  # leaves the group
        wait_until(lambda: len(_owners(members)) == PARTITIONS and all(m.owned() for m in members[1:]), 60,
                   interval=0.2, what="the leaver's partitions taken over")
        members[1].kill9()  # no leave: the group notices when its session times out
        wait_until(lambda: set(_owners(members[2:])) == set(range(PARTITIONS)), 60, interval=0.2,
                   what="the killed member's partitions taken over")
        members.append(join("m4"))
        wait_until(lambda: members[3].owned() and len(_owners(members)) == PARTITIONS, 60, interval=0.2,
                   what="a fourth member given its share")
        coordinator = cluster.leader("__consumer_offsets", offsets_partition_for(group, OFFSETS_PARTITIONS))
        cluster.brokers[coordinator].kill9()
        wait_until(lambda: cluster.leader("__consumer_offsets", offsets_partition_for(group, OFFSETS_PARTITIONS))
                   not in (coordinator, -1), 60, interval=0.2, what="another broker coordinating the group")
        reading, committing = sum(m.read_count() for m in members), sum(m.commit_count() for m in members)
        wait_until(lambda: sum(m.read_count() for m in members) > reading + 300
                   and sum(m.commit_count() for m in members) > committing + 10, 90, interval=0.2,
                   what="the group reading and committing through its new coordinator")
        cluster.brokers[coordinator].start()
        producer.stop()
        _await_every_acknowledged_read(members, producer)
    finally:
        if not producer._stop.is_set():
            producer.stop()
        for member in [*members, *held.values()]:
            member.stop()
    assert not producer.failed
    _check(members, producer)


def _await_sharing(members: list[Member], what: str) -> None:
    def sharing() -> bool:
        live = [m for m in members if m.process.poll() is None]
        return len(_owners(live)) == PARTITIONS and all(m.owned() for m in live)
    wait_until(sharing, 60, interval=0.2, what=what)


def _await_every_acknowledged_read(members: list[Member], producer: ProducerRun) -> None:
    def all_read() -> bool:
        read = {(p, o) for m in members for e in m.read() if e["e"] == "read" for p, o, _ in e["r"]}
        return {(p, o) for p, o in producer.acked.values()} <= read
    wait_until(all_read, 90, interval=0.3, what="every acknowledged record read")


def _describe(cluster: Cluster, group: str = GROUP) -> Any:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    return admin.describe_consumer_groups([group])[group].result(30)


def _await_stable(cluster: Cluster, group: str, what: str) -> Any:
    """The group as described once it is Stable. A member owns its new partitions a heartbeat before
    the coordinator has its acknowledgement, and the group is Reconciling until then (UNKNOWN to
    librdkafka's admin client)."""
    def stable() -> Any:
        described = _describe(cluster, group)
        return described if described.state.name == "STABLE" else None
    return wait_until(stable, 30, interval=0.2, what=what)


@pytest.mark.parametrize(("old", "new"), [("classic", "consumer"), ("consumer", "classic")])
def test_a_group_changes_protocol_member_by_member(cluster: Cluster, tmp_path: Path, old: str, new: str) -> None:
    """Members (librdkafka's; cooperative-sticky when classic) restart one at a time with the other
    protocol, each new one joining before the old one leaves. Upgrade: the first consumer-protocol
    member turns the group into a consumer group with the classic members in it. Downgrade: the
    classic members join the consumer group, and when its last consumer-protocol member leaves it
    becomes a classic group again, whose members rebalance among themselves (Kafka 4's online
    migrations). Reading goes on throughout."""
    topic, group = f"kip848-{old}-to-{new}", f"kip848-{old}-to-{new}-readers"
    cluster.create_topic(topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    producer = ProducerRun("confluent", cluster.bootstrap, topic, PARTITIONS, pace_s=0.004).start()
    members: list[Member] = []
    try:
        members += [Member.start(cluster, tmp_path, f"{old}{i}", group, topic, old) for i in range(2)]
        _await_sharing(members, f"two {old} members sharing all partitions")
        for i in range(2):
            members.append(Member.start(cluster, tmp_path, f"{new}{i}", group, topic, new))
            _await_sharing(members, f"the {old} and {new} members sharing all partitions (step {i + 1})")
            described = _describe(cluster, group)
            assert described.type.name == "CONSUMER", described
            assert {m.client_id for m in described.members} == {m.name for m in members if m.process.poll() is None}
            members[i].stop()
            _await_sharing(members, f"the partitions of {old}{i} taken over")
        described = _await_stable(cluster, group, f"the {new} group stable")
        assert described.type.name == new.upper(), described
        assert {m.client_id for m in described.members} == {f"{new}0", f"{new}1"}
        producer.stop()
        _await_every_acknowledged_read(members, producer)
    finally:
        if not producer._stop.is_set():
            producer.stop()
        for member in members:
            member.stop()
    assert not producer.failed
    _check(members, producer)
