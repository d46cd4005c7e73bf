"""minikafka.controller.eligible=false keeps a broker out of controller elections, so that the
controller of a mixed cluster stays an Apache Kafka broker while its brokers are rolled. With no
other controller to take over, it also shows that a controller stopping cleanly delivers its last
decisions (the handover of its own leaderships) before it goes."""

from __future__ import annotations

from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic
from kazoo.client import KazooClient

from tests.integration.broker_process import wait_until
from tests.system.cluster import Cluster
from tests.system.zookeeper import ZooKeeperProcess


def test_an_ineligible_broker_never_becomes_controller(tmp_path: Path, zookeeper: ZooKeeperProcess) -> None:
    cluster = Cluster(tmp_path, zookeeper, size=3)
    try:
        ineligible, first, second = cluster.brokers[1], cluster.brokers[2], cluster.brokers[3]
        ineligible.overrides["minikafka.controller.eligible"] = "false"
        first.start()
        ineligible.start()
        wait_until(lambda: len(cluster.metadata(via=ineligible).brokers) == 2, 30, what="both brokers in Metadata")
        assert cluster.metadata(via=ineligible).controller_id == 2
        admin = KafkaAdminClient(bootstrap_servers=first.bootstrap)
        try:
            admin.create_topics([NewTopic("handed-over", replica_assignments={0: [2, 1]})])
        finally:
            admin.close()
        wait_until(lambda: cluster.partitions("handed-over", via=ineligible)[0].isr_nodes == [2, 1], 30,
                   what="the partition led by the controller, both replicas in sync")
        # The controller resigns /controller as it stops: the ineligible broker, alone, leaves it empty...
        first.stop()
        # ... so only the stopping controller can have told it that it leads now: its last requests
        # (the handover of its own leaderships) reach the brokers before it closes its channels.
        handed_over = cluster.partitions("handed-over", via=ineligible)[0]
        assert (handed_over.leader_id, handed_over.isr_nodes) == (1, [1]), handed_over
        zk = KazooClient(hosts=zookeeper.connect + "/minikafka")
        zk.start(timeout=10)
        try:
            wait_until(lambda: zk.exists("/controller") is None, 30, what="no /controller")
        finally:
            zk.stop()
            zk.close()
        # ... and the next eligible broker to come takes it.
        second.start()
        wait_until(lambda: cluster.metadata(via=second).controller_id == 3, 30, what="broker 3 as controller")
        wait_until(lambda: cluster.metadata(via=ineligible).controller_id == 3, 30, what="broker 1 told of it")
        assert "never stands for controller" in ineligible.stderr_text()
    finally:
        cluster.close()
