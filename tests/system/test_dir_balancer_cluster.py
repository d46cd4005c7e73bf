"""The disk balancer in a three-broker cluster: switched on for one broker only (a per-broker
dynamic config), it evens out that broker's two disks (tmpfs) and nothing else: no leader, replica
set or ISR changes, the other brokers' replicas stay where they were, and the controller records
the new dir of each moved replica (KIP-858).  Every acknowledged record is still there."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.structs import TopicPartitionReplica
from kazoo.client import KazooClient

from minikafka.tools.client import Cluster as ToolsCluster
from minikafka.tools.progress import sizes_of
from tests.integration.broker_process import wait_until
from tests.integration.clients import confluent_produce
from tests.integration.disk_faults import Tmpfs, log_lines, mount_unavailable
from tests.system.cluster import Cluster
from tests.system.load import read_all
from tests.system.observe import alter_configs
from tests.system.test_log_dir_failure_cluster import CHROOT, _directory_id
from tests.system.zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.system

TOPIC = "even"
PARTITIONS = 6
SETTINGS = {"log.segment.bytes": str(1 << 20), "log.dirs.balancer.interval.ms": "200",
            "log.dirs.balancer.threshold.percent": "5"}


def used_share(path: Path) -> float:
    st = os.statvfs(path)
    return 100.0 * (st.f_blocks - st.f_bavail) / st.f_blocks


def placement(cluster: Cluster) -> dict[tuple[int, int], str]:
    """(broker, partition) -> the log dir of that replica, from each broker's DescribeLogDirs;
    fails while a copy (future replica) is left."""
    tools = ToolsCluster.discover(cluster.bootstrap)
    try:
        sizes = sizes_of(tools, sorted(cluster.brokers))
    finally:
        tools.close()
    found = {}
    for (broker, topic, p), replica in sizes.items():
        if topic == TOPIC:
            assert replica.future_dir is None and replica.log_dir is not None, (broker, p, replica)
            found[(broker, p)] = replica.log_dir
    return found


def recorded_dirs(zookeeper: ZooKeeperProcess) -> dict[tuple[int, int], str]:
    """(broker, partition) -> the directory id the controller's partition state records."""
    zk = KazooClient(hosts=zookeeper.connect + CHROOT)
    zk.start(timeout=15)
    try:
        found = {}
        for p in range(PARTITIONS):
            raw, _ = zk.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state")
            found.update({(int(b), p): d for b, d in json.loads(raw).get("directories", {}).items()})
        return found
    finally:
        zk.stop()
        zk.close()


def test_one_brokers_balancer_moves_only_its_own_replicas_and_no_leadership(tmp_path: Path,
                                                                           zookeeper: ZooKeeperProcess) -> None:
    if (why := mount_unavailable()) is not None:
        pytest.skip(f"the brokers' disks are tmpfs mounts: {why}")
    cluster = Cluster(tmp_path, zookeeper, overrides=SETTINGS)
    mounts = [Tmpfs(d, 32 << 20) for broker in cluster.brokers.values() for d in broker.log_dirs]
    try:
        for mount in mounts:
            mount.mount()
        cluster.start()
        cluster.create_topic(TOPIC, PARTITIONS, 3)
        first, second = (str(d) for d in cluster.brokers[1].log_dirs)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            admin.alter_replica_log_dirs({TopicPartitionReplica(TOPIC, p, 1): first for p in range(PARTITIONS)})
        finally:
            admin.close()
        wait_until(lambda: all(placement(cluster)[(1, p)] == first for p in range(PARTITIONS)), 30,
                   what=f"every replica of broker 1 in {first}")
        acked = {}
        for p in range(PARTITIONS):
            keys = [b"%d-%d" % (p, i) for i in range(1000)]
            where = confluent_produce(cluster.bootstrap, TOPIC, [(k, k.ljust(1000, b".")) for k in keys], partition=p)
            acked.update(zip(keys, where, strict=True))
        before = {p: (s.leader_id, list(s.replica_nodes), sorted(s.isr_nodes))
                  for p, s in cluster.partitions(TOPIC).items()}
        placed_before = placement(cluster)
        assert used_share(Path(first)) - used_share(Path(second)) > 10

        alter_configs(cluster.bootstrap, ConfigResource(ConfigResourceType.BROKER, "1",
                                                        configs={"log.dirs.balancer.enable": "true"}))
        wait_until(lambda: abs(used_share(Path(first)) - used_share(Path(second))) <= 5 and placement(cluster),
                   60, interval=0.2, what="broker 1's disks within 5 points, no copy left")

        placed = placement(cluster)
        moved = {p for p in range(PARTITIONS) if placed[(1, p)] == second}
        assert moved and log_lines(cluster.brokers[1], "disk balancer plans to move")
        assert {k: v for k, v in placed.items() if k[0] != 1} == {k: v for k, v in placed_before.items() if k[0] != 1}
        for broker_id in (2, 3):
            assert not log_lines(cluster.brokers[broker_id], "disk balancer plans")
        after = {p: (s.leader_id, list(s.replica_nodes), sorted(s.isr_nodes))
                 for p, s in cluster.partitions(TOPIC).items()}
        assert after == before
        ids = {d: _directory_id(Path(d)) for d in (first, second)}
        wait_until(lambda: all(recorded_dirs(zookeeper)[(1, p)] == ids[placed[(1, p)]] for p in range(PARTITIONS)),
                   30, interval=0.2, what="the controller recording broker 1's new dirs")
        records = read_all(cluster.bootstrap, TOPIC, PARTITIONS)
        assert {r.key: (r.partition, r.offset) for r in records} == acked and len(records) == len(acked)
    finally:
        cluster.close()
        for mount in mounts:
            mount.close()
