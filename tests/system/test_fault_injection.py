"""Three brokers and ZooKeeper through random faults, one at a time, under acks=all load.

Idempotent acks=all producers (confluent-kafka and kafka-python) and a consumer group run
throughout. The faults come in an order drawn from a seed: kill -9 of a broker and of the
controller, SIGSTOP of a broker shorter and longer than its ZooKeeper session, SIGSTOP of
ZooKeeper, and a log dir failing (then its disk replaced). After each one the cluster must heal
by itself within HEAL_BOUND_S and stay healed: every broker registered, every partition led with its whole
replica set in sync, the producers acknowledged again, and every consumer group of the load stable
with all its members (DescribeGroups) and committing again. At the end every acknowledged record
is stored exactly once, at the offset it was acknowledged with, in its producer's order, and
the group was given it.

The seed is printed and attached to a failure: ``MINIKAFKA_FAULT_SEED=<seed>`` replays a run,
``MINIKAFKA_FAULTS=<n>`` draws n faults instead of one of each kind. The rolling restart
(SIGTERM each broker in turn) is its own test: no produce error at all, and it prints the
slowest acknowledgement.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence

import pytest

from tests.integration.disk_faults import replace_with_empty_dir, replace_with_file
from tests.system.cluster import Cluster
from tests.system.load import (
    GroupMember,
    GroupWatch,
    LoadGroup,
    ProducerRun,
    Record,
    assert_delivered_to_group,
    assert_exactly_once,
    read_all,
    wait_acked,
)

# The two tests share the module's cluster (each leaves it healed, or fails): a topic and a
# group each.
pytestmark = pytest.mark.shared_cluster
PARTITIONS = 6
OFFSETS_TOPIC = "__consumer_offsets"
TOPIC = "faults"  # of the random faults (and of test_network_partitions)
SESSION_S = 4.0  # zookeeper.session.timeout.ms of the system tests' cluster
HEAL_BOUND_S = 60.0


# ---- the faults: each does its harm, undoes what a person would (restart, resume, new disk) ----
def kill_broker(cluster: Cluster, rng: random.Random) -> str:
    victim = rng.choice([b for b in cluster.brokers if b != cluster.controller_id()])
    return _kill_and_restart(cluster, victim, rng, "a broker")


def kill_controller(cluster: Cluster, rng: random.Random) -> str:
    return _kill_and_restart(cluster, cluster.controller_id(), rng, "the controller")


def _kill_and_restart(cluster: Cluster, victim: int, rng: random.Random, what: str) -> str:
    down_s = rng.uniform(0.5, 2 * SESSION_S)
    cluster.brokers[victim].kill9()
    time.sleep(down_s)
    cluster.brokers[victim].start()
    return f"kill -9 of {what} ({victim}), restarted {down_s:.1f}s later"


def pause_broker_briefly(cluster: Cluster, rng: random.Random) -> str:
    return _pause(cluster, rng.choice(list(cluster.brokers)), rng.uniform(0.5, 0.6 * SESSION_S))


def pause_broker_past_its_session(cluster: Cluster, rng: random.Random) -> str:
    return _pause(cluster, rng.choice(list(cluster.brokers)), rng.uniform(1.5 * SESSION_S, 2.5 * SESSION_S))


def _pause(cluster: Cluster, victim: int, paused_s: float) -> str:
    cluster.pause(victim)
    try:
        time.sleep(paused_s)
    finally:
        cluster.resume(victim)
    return f"SIGSTOP of broker {victim} for {paused_s:.1f}s (session {SESSION_S:.0f}s)"


def pause_zookeeper(cluster: Cluster, rng: random.Random) -> str:
    paused_s = rng.uniform(1.0, 2 * SESSION_S)
    cluster.zookeeper.pause()
    try:
        time.sleep(paused_s)
    finally:
        cluster.zookeeper.resume()
    return f"SIGSTOP of ZooKeeper for {paused_s:.1f}s"


def fail_a_log_dir(cluster: Cluster, rng: random.Random) -> str:
    """A disk of a broker fails (its dir becomes a regular file, KIP-112's recipe) and serves
    nothing for a while; then it is swapped for a new, empty one and the broker restarted."""
    victim = rng.choice(list(cluster.brokers))
    broker = cluster.brokers[victim]
    held = {d for name, d in broker.partition_dirs().items() if name.startswith(f"{TOPIC}-")}
    log_dir = rng.choice(sorted(held or set(broker.log_dirs)))
    replace_with_file(log_dir)
    failed_s = rng.uniform(1.0, 2 * SESSION_S)
    time.sleep(failed_s)
    broker.stop()
    replace_with_empty_dir(log_dir)
    broker.start()
    return f"log dir {log_dir.name} of broker {victim} failed for {failed_s:.1f}s, then replaced by a new disk"


FAULTS: dict[str, Callable[[Cluster, random.Random], str]] = {
    "kill-broker": kill_broker,
    "kill-controller": kill_controller,
    "pause-broker-briefly": pause_broker_briefly,
    "pause-broker-past-session": pause_broker_past_its_session,
    "pause-zookeeper": pause_zookeeper,
    "fail-log-dir": fail_a_log_dir,
}


def _draw(rng: random.Random) -> list[str]:
    count = os.environ.get("MINIKAFKA_FAULTS")
    if count:
        return [rng.choice(sorted(FAULTS)) for _ in range(int(count))]
    kinds = sorted(FAULTS)
    rng.shuffle(kinds)
    return kinds


# ---- healing ----------------------------------------------------------------------------------
def _unhealed(cluster: Cluster, topic_under_load: str) -> list[str]:
    """What is not yet as it should be, as every running broker's metadata tells (empty: healed)."""
    wrong: list[str] = []
    for broker_id, broker in cluster.brokers.items():
        metadata = cluster.metadata(via=broker)
        if sorted(b.node_id for b in metadata.brokers) != sorted(cluster.brokers):
            wrong.append(f"broker {broker_id} knows brokers {sorted(b.node_id for b in metadata.brokers)}")
        if metadata.controller_id not in cluster.brokers:
            wrong.append(f"broker {broker_id} knows no controller")
        for topic in metadata.topics:
            if topic.name not in (topic_under_load, OFFSETS_TOPIC):
                continue
            for p in topic.partitions:
                if p.leader_id < 0 or sorted(p.isr_nodes) != sorted(p.replica_nodes) or p.offline_replicas:
                    wrong.append(f"broker {broker_id}: {topic.name}-{p.partition_index} leader {p.leader_id}, "
                                 f"replicas {p.replica_nodes}, in sync {p.isr_nodes}, offline {p.offline_replicas}")
    return wrong


def _wait_healed(cluster: Cluster, runs: list[ProducerRun], what: str, groups: Sequence[LoadGroup]) -> float:
    """Seconds until the cluster healed (and stayed so for a session timeout, so that what the
    fault sets off later, a session expiring, is not missed) and every group of the load settled
    (stable with all its members, committed offsets moving again); then every producer must be
    acknowledged again, all within HEAL_BOUND_S."""
    started = time.monotonic()
    acked = {r.client: len(r.acked) for r in runs}
    watch = GroupWatch(cluster.bootstrap, list(groups))
    try:
        healed_since: float | None = None
        settled_since: float | None = None
        while True:
            try:
                wrong = _unhealed(cluster, runs[0].topic)
            except Exception as exc:  # a broker not answering yet
                wrong = [repr(exc)]
            unsettled = watch.unsettled()
            now = time.monotonic()
            if wrong:
                healed_since = None
            elif healed_since is None:
                healed_since = now
            if unsettled:
                settled_since = None
            elif settled_since is None:
                settled_since = now
            if healed_since is not None and now - healed_since >= SESSION_S and settled_since is not None:
                break
            assert now - started < HEAL_BOUND_S, f"not healed {HEAL_BOUND_S:.0f}s after {what}: {wrong + unsettled}"
            time.sleep(0.2)
    finally:
        watch.close()
    assert healed_since is not None and settled_since is not None
    wait_acked(runs, acked, timeout=max(0.1, HEAL_BOUND_S - (time.monotonic() - started)))
    return max(healed_since, settled_since) - started


def _load(cluster: Cluster, topic: str = TOPIC) -> tuple[list[ProducerRun], list[GroupMember]]:
    """Two producers and a group of two on a new topic (the group named after it)."""
    cluster.create_topic(topic, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    runs = [ProducerRun("confluent", cluster.bootstrap, topic, PARTITIONS, pace_s=0.004).start(),
            ProducerRun("kafka-python", cluster.bootstrap, topic, PARTITIONS, pace_s=0.008).start()]
    members = [GroupMember(cluster.bootstrap, f"{topic}-watchers", topic, f"watcher-{i}").start() for i in range(2)]
    wait_acked(runs, {})
    return runs, members


def _groups(members: list[GroupMember]) -> list[LoadGroup]:
    """The load's group, as the heal check asks after it."""
    return [LoadGroup(members[0].group, len(members))]


def _check(cluster: Cluster, runs: list[ProducerRun], members: list[GroupMember]) -> list[Record]:
    """The exact check of what the load stored and gave its group; what it stored."""
    for run in runs:
        run.stop()
    stored = read_all(cluster.bootstrap, runs[0].topic, PARTITIONS)
    assert_exactly_once(runs, stored)
    assert_delivered_to_group(members, stored)
    return stored


def test_a_rolling_restart_under_acks_all_load_has_no_produce_error(cluster: Cluster) -> None:
    runs, members = _load(cluster, "rolling-restart")
    try:
        for broker_id in sorted(cluster.brokers, key=lambda b: b == cluster.controller_id()):
            assert cluster.brokers[broker_id].stop() == 0, f"broker {broker_id} did not stop cleanly"
            cluster.brokers[broker_id].start()
            _wait_healed(cluster, runs, f"the restart of broker {broker_id}", _groups(members))
    finally:
        _check(cluster, runs, members)
    for run in runs:
        assert not run.failed, f"{run.client}: {len(run.failed)} produce errors, e.g. {list(run.failed.items())[:3]}"
        print(f"rolling restart: {run.client} slowest acknowledgement {run.slowest_ack_s:.2f}s "
              f"of {len(run.acked)} records")


@pytest.mark.timeout(900)
def test_random_faults_one_at_a_time_lose_nothing_and_heal(cluster: Cluster) -> None:
    seed = int(os.environ.get("MINIKAFKA_FAULT_SEED") or random.SystemRandom().randrange(1_000_000))
    print(f"fault-injection seed {seed} (replay: MINIKAFKA_FAULT_SEED={seed})")
    rng = random.Random(seed)
    done: list[str] = []
    try:
        runs, members = _load(cluster, TOPIC)
        try:
            _wait_healed(cluster, runs, "the start", _groups(members))
            for kind in _draw(rng):
                what = FAULTS[kind](cluster, rng)
                healed_s = _wait_healed(cluster, runs, what, _groups(members))
                done.append(f"{what}: healed in {healed_s:.1f}s")
                print(done[-1])
        finally:
            _check(cluster, runs, members)
    except BaseException as exc:
        exc.add_note(f"fault-injection seed {seed}; faults done: {done or 'none'}")
        raise
