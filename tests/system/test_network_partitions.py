"""Three brokers and ZooKeeper through network partitions, one at a time, under load: the
seeded nemesis of test_fault_injection with links cut instead of processes (tests/system/
partition_proxy.py puts a proxy on every link a broker dials).

The faults: the leader of a partition cut from ZooKeeper but not from clients or followers;
the leader cut from its followers but not from ZooKeeper; the controller cut from ZooKeeper; a
follower cut from its leader; a one-way cut (between a leader and a follower, or a broker and
ZooKeeper); a slow link (hundreds of ms with jitter) around one broker; a broker's ZooKeeper
session expired while it runs; a majority/minority split (one broker alone, ZooKeeper with the
other two). Each fault lasts long enough to matter (past the ZooKeeper session, past
replica.lag.time.max.ms), then the links heal.

The load: idempotent acks=all producers (confluent-kafka, kafka-python) and a consumer group
(the fault-injection test's); a consume-transform-produce loop on the producers' topic
(tests/system/eos_worker.py: read_committed, in a group of its own, output and consumed offsets in
one transaction, every seventh transaction aborted, and on an error an abort and a new start from
the committed offsets; a worker that gives up is started again); and a prober that sends acks=all
writes of its own to every broker, leader or not, keeping which broker acknowledged which offset.

The checks: every acknowledged record is stored once, where it was acknowledged, in its
producer's order, and the group was given it; every input record the loop committed as consumed
is in its output exactly once for a read_committed reader, who is given nothing of an aborted
transaction; no two brokers acknowledged acks=all writes to one partition in the same leader
epoch (each probe's leader epoch is the one stored with its record); and after each fault heals,
the cluster heals within HEAL_BOUND_S (every broker registered, every partition led with its
whole replica set in sync, both groups stable with their members and committing again, producers
acknowledged again).

``make test`` runs one random seed with PARTITION_FAULTS faults (printed, and attached to a
failure); ``MINIKAFKA_PARTITION_SEED=<seed>`` replays one, ``MINIKAFKA_PARTITION_SOAK_S=<s>``
draws faults (every kind first, in a seeded order) until that many seconds have passed.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka.record.memory_records import MemoryRecordsBuilder
from kazoo.client import KazooClient

from tests.integration.broker_process import HOST, wait_until
from tests.system.cluster import Cluster, inter_broker_request
from tests.system.load import LoadGroup, TransformLoop, assert_transformed_once
from tests.system.partition_proxy import Proxy
from tests.system.test_fault_injection import SESSION_S, TOPIC, _check, _groups, _load, _wait_healed
from tests.system.zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.system
PARTITIONS = 6  # of TOPIC, as test_fault_injection makes it
LAG_S = 3.0  # replica.lag.time.max.ms of the system tests' cluster
HEAL_BOUND_S = 60.0  # test_fault_injection's bound, which _wait_healed asserts
PARTITION_FAULTS = 2  # in make test: about 90 s with the cluster's start and stop
EOS_OUTPUT, EOS_GROUP, EOS_PARTITIONS = "partition-eos-out", "partition-eos", 3  # the loop's output, its group
PROBE_TOPIC = "partition-probes"
PRODUCE = 0


# ---- the cluster, its links through the proxy ------------------------------------------------------
@dataclass
class Partitioned:
    cluster: Cluster
    proxy: Proxy
    seed: int
    rng: random.Random

    def leader(self, partition: int = 0) -> int:
        return self.cluster.leader(TOPIC, partition)

    def replicas(self, partition: int = 0) -> list[int]:
        return list(self.cluster.partitions(TOPIC)[partition].replica_nodes)

    @property
    def names(self) -> list[str]:
        return [str(b) for b in self.cluster.brokers]

    def hold(self, seconds: float) -> None:
        time.sleep(seconds)  # the fault lasting: its duration is the point, there is no condition to poll
        self.proxy.heal()


@pytest.fixture(scope="module")
def partitioned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Partitioned]:
    root = tmp_path_factory.mktemp("partitions")
    zookeeper = ZooKeeperProcess(root / "zookeeper").start()
    cluster: Cluster | None = None
    proxy: Proxy | None = None
    seed = int(os.environ.get("MINIKAFKA_PARTITION_SEED") or random.SystemRandom().randrange(1_000_000))
    print(f"network-partition seed {seed} (replay: MINIKAFKA_PARTITION_SEED={seed})")
    try:
        cluster = Cluster(root, zookeeper)
        made = cluster

        def pids() -> dict[int, str]:
            return {b.process.pid: str(i) for i, b in made.brokers.items() if b.process is not None}
        proxy = Proxy(pids, seed)
        for broker_id, broker in cluster.brokers.items():
            zk_port = proxy.route("zk", (HOST, zookeeper.port), source=str(broker_id))
            internal = proxy.route(str(broker_id), (HOST, cluster.internal_ports[broker_id]))
            broker.overrides["zookeeper.connect"] = f"{HOST}:{zk_port}/minikafka"
            broker.overrides["advertised.listeners"] = \
                f"PLAINTEXT://{HOST}:{broker.port},INTERNAL://{HOST}:{internal}"
        cluster.start()
        yield Partitioned(cluster, proxy, seed, random.Random(seed))
    except BaseException as exc:
        exc.add_note(f"network-partition seed {seed}")
        raise
    finally:
        if cluster is not None:  # through the proxy still: each broker hands its leaderships over
            cluster.close()
        if proxy is not None:
            proxy.close()
        zookeeper.close()


# ---- the faults: each cuts, waits, heals; says what it did ---------------------------------------
def leader_cut_from_zookeeper(p: Partitioned) -> str:
    leader, seconds = p.leader(), p.rng.uniform(1.5 * SESSION_S, 2.5 * SESSION_S)
    p.proxy.cut(str(leader), "zk")
    p.hold(seconds)
    return f"the leader ({leader}) of {TOPIC}-0 cut from ZooKeeper for {seconds:.1f}s"


def leader_cut_from_followers(p: Partitioned) -> str:
    leader, seconds = p.leader(), p.rng.uniform(1.5 * LAG_S, 3 * LAG_S)
    followers = [b for b in p.replicas() if b != leader]
    for follower in followers:
        p.proxy.cut(str(leader), str(follower))
    p.hold(seconds)
    return f"the leader ({leader}) of {TOPIC}-0 cut from its followers {followers} for {seconds:.1f}s"


def controller_cut_from_zookeeper(p: Partitioned) -> str:
    controller, seconds = p.cluster.controller_id(), p.rng.uniform(1.5 * SESSION_S, 2.5 * SESSION_S)
    p.proxy.cut(str(controller), "zk")
    p.hold(seconds)
    return f"the controller ({controller}) cut from ZooKeeper for {seconds:.1f}s"


def follower_cut_from_leader(p: Partitioned) -> str:
    leader, seconds = p.leader(), p.rng.uniform(1.5 * LAG_S, 3 * LAG_S)
    follower = p.rng.choice([b for b in p.replicas() if b != leader])
    p.proxy.cut(str(follower), str(leader))
    p.hold(seconds)
    return f"a follower ({follower}) of {TOPIC}-0 cut from its leader ({leader}) for {seconds:.1f}s"


def one_way_cut(p: Partitioned) -> str:
    leader, seconds = p.leader(), p.rng.uniform(1.5 * LAG_S, 2.5 * SESSION_S)
    follower = p.rng.choice([b for b in p.replicas() if b != leader])
    broker = str(p.rng.choice(p.replicas()))
    source, target = p.rng.choice([(str(leader), str(follower)), (str(follower), str(leader)),
                                   (broker, "zk"), ("zk", broker)])
    p.proxy.cut(source, target, both_ways=False)
    p.hold(seconds)
    return f"{source} -> {target} cut one way (leader {leader} of {TOPIC}-0) for {seconds:.1f}s"


def slow_links(p: Partitioned) -> str:
    broker = p.rng.choice(p.names)
    delay, jitter, seconds = p.rng.uniform(0.2, 0.5), p.rng.uniform(0.05, 0.2), p.rng.uniform(5, 10)
    for other in [*p.names, "zk"]:
        if other != broker:
            p.proxy.slow(broker, other, delay, jitter)
    p.hold(seconds)
    return f"every link of broker {broker} slowed by {delay * 1000:.0f}+-{jitter * 1000:.0f} ms for {seconds:.1f}s"


def session_expiry(p: Partitioned) -> str:
    """A broker that is no leader of partition 0 (leader_cut_from_zookeeper covers that one)."""
    broker = p.rng.choice([b for b in p.names if b != str(p.leader())])
    p.proxy.cut(broker, "zk")
    seconds = SESSION_S + 2.0
    p.hold(seconds)
    return f"broker {broker}'s ZooKeeper session expired while it ran (cut from ZooKeeper for {seconds:.1f}s)"


def majority_minority_split(p: Partitioned) -> str:
    alone, seconds = p.rng.choice(p.names), p.rng.uniform(1.5 * SESSION_S, 2.5 * SESSION_S)
    for other in [*p.names, "zk"]:
        if other != alone:
            p.proxy.cut(alone, other)
    p.hold(seconds)
    return f"broker {alone} alone, the others with ZooKeeper, for {seconds:.1f}s"


FAULTS: dict[str, Callable[[Partitioned], str]] = {
    "leader-zookeeper": leader_cut_from_zookeeper,
    "leader-followers": leader_cut_from_followers,
    "controller-zookeeper": controller_cut_from_zookeeper,
    "follower-leader": follower_cut_from_leader,
    "one-way": one_way_cut,
    "slow-links": slow_links,
    "session-expiry": session_expiry,
    "majority-minority": majority_minority_split,
}


def _draw(rng: random.Random, soak_s: float) -> Iterator[str]:
    """Every kind once in a seeded order, then at random, until ``soak_s`` passed; without a
    soak, PARTITION_FAULTS of them."""
    kinds = sorted(FAULTS)
    rng.shuffle(kinds)
    if not soak_s:
        yield from kinds[:PARTITION_FAULTS]
        return
    ends = time.monotonic() + soak_s
    yield from kinds
    while time.monotonic() < ends:
        yield rng.choice(sorted(FAULTS))


# ---- the prober: acks=all writes to every broker, and which broker acknowledged what -------------
@dataclass
class Prober:
    """One thread per broker, writing one keyed record per request (Produce v8, acks=all) to each
    partition of PROBE_TOPIC in turn, straight to that broker whether it leads or not."""

    cluster: Cluster
    acked: list[tuple[int, int, int, bytes]] = field(default_factory=list)  # (broker, partition, offset, key)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Prober:
        for broker_id in self.cluster.brokers:
            thread = threading.Thread(target=self._run, args=(broker_id,), name=f"prober-{broker_id}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
            assert not thread.is_alive(), f"{thread.name} did not stop"

    def _run(self, broker_id: int) -> None:
        port, seq = self.cluster.brokers[broker_id].port, 0
        while not self._stop.is_set():
            partition, key = seq % PARTITIONS, f"probe-{broker_id}-{seq:07d}".encode()
            seq += 1
            try:
                error, offset = produce_one(port, PROBE_TOPIC, partition, key)
            except (OSError, AssertionError):  # the broker not answering: no acknowledgement
                time.sleep(0.2)
                continue
            if error == 0:
                self.acked.append((broker_id, partition, offset, key))
            time.sleep(0.05)


def produce_one(port: int, topic: str, partition: int, key: bytes, timeout_ms: int = 3000) -> tuple[int, int]:
    """One record written with acks=all straight to the broker at ``port`` (Produce v8, its own
    connection); (error code, offset)."""
    builder = MemoryRecordsBuilder(2, 0, 1 << 20)
    builder.append(int(time.time() * 1000), key, b"probe")
    builder.close()
    response = inter_broker_request(port, PRODUCE, 8, {
        "transactional_id": None, "acks": -1, "timeout_ms": timeout_ms,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": bytes(builder.buffer())}]}]})
    answer = response.responses[0].partition_responses[0]
    return int(answer.error_code), int(answer.base_offset)


def assert_one_leader_per_epoch(prober: Prober, bootstrap: str) -> None:
    """Every probe acknowledged is stored where acknowledged, and in no (partition, leader epoch)
    did two brokers acknowledge."""
    stored = _read_with_epochs(bootstrap, PROBE_TOPIC, PARTITIONS)
    ackers: dict[tuple[int, int], set[int]] = {}
    for broker, partition, offset, key in prober.acked:
        found = stored.get((partition, offset))
        assert found is not None and found[0] == key, (
            f"probe {key!r} acknowledged by broker {broker} at {PROBE_TOPIC}-{partition}@{offset} is lost "
            f"(stored there: {found})")
        ackers.setdefault((partition, found[1]), set()).add(broker)
    split = {where: sorted(brokers) for where, brokers in ackers.items() if len(brokers) > 1}
    assert not split, f"two brokers acknowledged acks=all writes in one leader epoch, (partition, epoch): {split}"
    assert prober.acked, "no probe was acknowledged at all"


def _read_with_epochs(bootstrap: str, topic: str, partitions: int) -> dict[tuple[int, int], tuple[bytes, int]]:
    """(partition, offset) -> (key, leader epoch of its batch), up to each high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "epochs", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        found: dict[tuple[int, int], tuple[bytes, int]] = {}
        deadline = time.monotonic() + 60
        while any(ends[p] and (p, ends[p] - 1) not in found for p in ends) and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if not message.error():
                    found[(message.partition(), message.offset())] = (message.key(), message.leader_epoch())
        return found
    finally:
        consumer.close()


# ---- the tests ------------------------------------------------------------------------------------
def test_a_leader_cut_from_zookeeper_acknowledges_nothing_once_deposed(partitioned: Partitioned) -> None:
    """The leader of a partition (RF 3, min.insync.replicas=1) loses ZooKeeper but not its clients
    or followers. Once the controller made another broker leader, the old one, which cannot know
    it (it cannot reach ZooKeeper to learn its session expired), acknowledges no acks=all write:
    its ISR cannot shrink without ZooKeeper and the others follow the new leader. After the heal
    it follows, and what the new leader acknowledged is there."""
    cluster, topic = partitioned.cluster, "deposed"
    cluster.create_topic(topic, 1, 3, **{"min.insync.replicas": "1"})
    old = cluster.partitions(topic)[0].leader_id
    other = next(b for i, b in cluster.brokers.items() if i != old)
    partitioned.proxy.cut(str(old), "zk")
    try:
        new = wait_until(lambda: (lambda leader: leader if leader not in (old, -1) else None)(
            cluster.partitions(topic, other)[0].leader_id), 30, interval=0.1, what=f"a leader other than {old}")
        refused = [produce_one(cluster.brokers[old].port, topic, 0, b"to-the-deposed-%d" % i, 1000)[0]
                   for i in range(3)]
        assert all(error != 0 for error in refused), f"the deposed leader {old} acknowledged acks=all: {refused}"
        acked = [produce_one(cluster.brokers[new].port, topic, 0, b"to-the-new-%d" % i) for i in range(3)]
        assert all(error == 0 for error, _ in acked), acked
    finally:
        partitioned.proxy.heal()
    # Healed once the old leader has registered again (until it hears from ZooKeeper that its
    # session expired, its own metadata still shows it leading, as a Kafka broker's would) and
    # every broker has all three in sync.
    registered = KazooClient(hosts=cluster.zookeeper.connect + "/minikafka")
    registered.start(timeout=30)
    try:
        wait_until(lambda: len(registered.get_children("/brokers/ids")) == 3, 60, interval=0.1,
                   what=f"broker {old} registered again")
    finally:
        registered.stop()
        registered.close()
    wait_until(lambda: all(len(cluster.partitions(topic, b)[0].isr_nodes) == 3 for b in cluster.brokers.values()),
               60, interval=0.1, what="every broker showing three in sync")
    stored = _read_with_epochs(cluster.bootstrap, topic, 1)
    assert [stored[(0, offset)][0] for _, offset in acked] == [b"to-the-new-%d" % i for i in range(3)]


@pytest.mark.timeout(3600)
def test_network_partitions_lose_nothing_acknowledged_and_heal(partitioned: Partitioned, tmp_path: Path) -> None:
    cluster, rng = partitioned.cluster, partitioned.rng
    soak_s = float(os.environ.get("MINIKAFKA_PARTITION_SOAK_S") or 0)
    done: list[str] = []
    slowest = 0.0
    loop = TransformLoop(cluster.bootstrap, TOPIC, PARTITIONS, EOS_OUTPUT, EOS_GROUP, tmp_path)
    try:
        runs, members = _load(cluster)
        groups = [*_groups(members), LoadGroup(EOS_GROUP, 0)]
        cluster.create_topic(EOS_OUTPUT, EOS_PARTITIONS, 3, **{"min.insync.replicas": "2"})
        cluster.create_topic(PROBE_TOPIC, PARTITIONS, 3, **{"min.insync.replicas": "2"})
        prober = Prober(cluster).start()
        loop.start()
        try:
            _wait_healed(cluster, runs, "the start", groups)
            for kind in _draw(rng, soak_s):
                what = FAULTS[kind](partitioned)
                healed_s = _wait_healed(cluster, runs, what, groups)
                slowest = max(slowest, healed_s)
                done.append(f"{kind}: {what}: healed in {healed_s:.1f}s")
                print(done[-1])
        finally:
            partitioned.proxy.heal()
            prober.stop()
            try:
                loop.stop()
            finally:
                loop.kill()
                stored = _check(cluster, runs, members)
        transformed = assert_transformed_once(loop, stored, EOS_PARTITIONS)
        assert_one_leader_per_epoch(prober, cluster.bootstrap)
        for broker_id, broker in cluster.brokers.items():
            logged = Path(broker.stderr_path).read_text()
            assert "was never retrieved" not in logged, f"broker {broker_id} left a task's exception unretrieved"
        committed, aborted = loop.ended()
        print(f"network partitions: {len(done)} faults, slowest heal {slowest:.1f}s (bound {HEAL_BOUND_S:.0f}s); "
              f"{len(prober.acked)} probes; {transformed} records transformed exactly once in {len(committed)} "
              f"committed transactions, {len(aborted)} aborted, workers started again: {loop.restarts or 'none'}")
    except BaseException as exc:
        logs = [str(Path(b.stderr_path)) for b in cluster.brokers.values()]
        exc.add_note(f"network-partition seed {partitioned.seed} (replay: MINIKAFKA_PARTITION_SEED="
                     f"{partitioned.seed}); faults done: {done or 'none'}; the brokers' logs: {logs}; the "
                     f"transform workers' log: {loop.log}, started again: {loop.restarts or 'none'}")
        raise
    finally:
        loop.kill()


def test_the_proxy_holds_what_a_cut_sends_and_delivers_it_on_heal() -> None:
    """The proxy itself, against an echo server: bytes pass; a cut holds them without closing
    anything; a one-way cut holds one direction alone; a slow link delivers late, in order."""
    import socket
    import socketserver

    class Echo(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            while data := self.request.recv(4096):
                self.request.sendall(data)

    server = socketserver.ThreadingTCPServer((HOST, 0), Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    proxy = Proxy(dict)
    try:
        port = proxy.route("echo", server.server_address, source="me")
        with socket.create_connection((HOST, port), timeout=5) as sock:
            sock.sendall(b"one")
            assert sock.recv(16) == b"one"
            proxy.cut("me", "echo")
            sock.sendall(b"two")
            sock.settimeout(0.5)
            with pytest.raises(TimeoutError):  # held, not reset: the connection stays
                sock.recv(16)
            proxy.heal()
            sock.settimeout(5)
            assert sock.recv(16) == b"two"
            proxy.cut("echo", "me", both_ways=False)  # the answers are held, the requests arrive
            sock.sendall(b"three")
            sock.settimeout(0.5)
            with pytest.raises(TimeoutError):
                sock.recv(16)
            proxy.heal()
            sock.settimeout(5)
            assert sock.recv(16) == b"three"
            proxy.slow("me", "echo", 0.3, 0.1)
            sent = time.monotonic()
            for word in (b"a", b"b", b"c"):
                sock.sendall(word)
            got = b""
            while len(got) < 3:
                got += sock.recv(16)
            assert got == b"abc" and time.monotonic() - sent >= 0.2
    finally:
        proxy.close()
        server.shutdown()
        server.server_close()
