"""A restarted follower rejoins the ISR after a controller took over with an old partition state.

The flake this reproduces: a new controller reads a partition's state, its leader then drops a
dead follower from the ISR in ZooKeeper, and the controller's take-over LeaderAndIsr carries the
state it read. A leader that took that state held an ISR ZooKeeper no longer had (with the
follower in it), so when the follower came back the leader never proposed it again and it stayed
out of the ISR for good. The test sends that very LeaderAndIsr itself, at the moment the race
would, with the current controller's epoch and the leader's broker epoch.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import Producer
from kazoo.client import KazooClient

from protocol.errors import ErrorCode
from tests.integration.broker_process import KafkaWire, wait_until
from tests.system.cluster import Cluster, inter_broker_request

pytestmark = pytest.mark.shared_zookeeper  # each test's cluster under a chroot of its own
TOPIC = "rejoin"
LEADER_AND_ISR = 4
STATE = f"/brokers/topics/{TOPIC}/partitions/0/state"


def _zookeeper_reads(cluster: Cluster, leader: int) -> tuple[dict[str, Any], int, int, int]:
    """The partition's state and its version, the controller epoch and the leader's broker epoch."""
    zk = KazooClient(hosts=cluster.zookeeper.connect + cluster.chroot)
    zk.start(10)
    try:
        data, stat = zk.get(STATE)
        return (json.loads(data), stat.version, int(zk.get("/controller_epoch")[0]),
                zk.exists(f"/brokers/ids/{leader}").czxid)
    finally:
        zk.stop()
        zk.close()


def _produce(cluster: Cluster, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(count):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"v", partition=0)
    assert producer.flush(30) == 0


# Below 2.7-IV2 the leader writes its ISR changes to the state znode itself, as Kafka's leaders
# did, and claims producer id blocks in /latest_producer_id_block itself, as before 3.0-IV0.
@pytest.mark.cluster_settings(**{"inter.broker.protocol.version": "2.7-IV1"})
def test_a_leader_ignores_a_take_over_state_older_than_its_own_isr_change(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, 1, 3, **{"min.insync.replicas": "2"})
    leader = cluster.leader(TOPIC, 0)
    follower = next(b for b in cluster.brokers if b not in (leader, cluster.controller_id()))
    _produce(cluster, 20)
    old_state, old_version, controller_epoch, broker_epoch = _zookeeper_reads(cluster, leader)
    assert sorted(old_state["isr"]) == [1, 2, 3]
    with KafkaWire(cluster.brokers[leader].address) as wire:
        topic_id = wire.metadata([TOPIC], version=10).topics[0].topic_id

    cluster.brokers[follower].kill9()
    wait_until(lambda: follower not in cluster.partitions(TOPIC)[0].isr_nodes, 30, interval=0.1,
               what=f"broker {follower} out of the ISR")
    _produce(cluster, 20)
    # What a controller that read the state before the shrink sends when it takes over.
    stale = inter_broker_request(cluster.internal_ports[leader], LEADER_AND_ISR, 6, {
        "controller_id": cluster.controller_id(), "controller_epoch": controller_epoch, "broker_epoch": broker_epoch,
        "type": 0, "live_leaders": [], "topic_states": [{
            "topic_name": TOPIC, "topic_id": topic_id, "partition_states": [{
                "partition_index": 0, "controller_epoch": old_state["controller_epoch"], "leader": leader,
                "leader_epoch": old_state["leader_epoch"], "isr": old_state["isr"], "partition_epoch": old_version,
                "replicas": [1, 2, 3], "adding_replicas": [], "removing_replicas": [], "is_new": False,
                "leader_recovery_state": 0}]}]})
    assert stale.error_code == ErrorCode.NONE
    assert stale.topics[0].partition_errors[0].error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert "ignoring the controller's state of leader epoch" in cluster.brokers[leader].stderr_text()

    cluster.brokers[follower].start()
    wait_until(lambda: sorted(cluster.partitions(TOPIC)[0].isr_nodes) == [1, 2, 3], 30, interval=0.1,
               what=f"broker {follower} back in the ISR")
    _produce(cluster, 20)
    assert cluster.partitions(TOPIC)[0].leader_id == leader
    logs = "".join(b.stderr_text(200_000) for b in cluster.brokers.values())
    assert f"{TOPIC}-0: in-sync replicas [" in cluster.brokers[leader].stderr_text(200_000)
    assert "proposed by its leader" not in logs and "recorded by the controller: " not in logs
    assert "the controller gave this broker producer ids" not in logs


def test_a_follower_back_from_a_pause_past_its_session_is_online_in_every_brokers_metadata(
        cluster: Cluster) -> None:
    # Resumed, the follower fetches at once and is back in the ISRs before it registers again:
    # the controller must still tell every broker that its replicas are online again.
    cluster.create_topic(TOPIC, 3, 3, **{"min.insync.replicas": "2"})
    follower = next(b for b in cluster.brokers if b != cluster.controller_id())
    cluster.pause(follower)
    try:
        others = [b for b in cluster.brokers.values() if b is not cluster.brokers[follower]]
        wait_until(lambda: len(cluster.metadata(via=others[0]).brokers) == 2, 30, interval=0.1,
                   what=f"broker {follower}'s session expired")
        _produce(cluster, 50)
    finally:
        cluster.resume(follower)

    def offline_anywhere() -> list[str]:
        return [f"broker {b}: {t.name}-{p.partition_index} offline {p.offline_replicas}"
                for b, broker in cluster.brokers.items() for t in cluster.metadata(via=broker).topics
                for p in t.partitions if p.offline_replicas]
    cluster.wait_for_leaders(TOPIC, 3, isr_size=3)
    wait_until(lambda: not offline_anywhere(), 15, interval=0.2, what="no replica offline in any metadata")
