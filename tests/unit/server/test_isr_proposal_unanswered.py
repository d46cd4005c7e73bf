"""An ISR change the controller did not answer stays pending and is proposed again.

Whether an unanswered AlterPartition was recorded is unknown (the controller may have written
the state znode and died, or been cut off, before its answer came back). As Kafka's leaders do,
the leader keeps the proposal pending, so that a replica it adds keeps counting toward the high
watermark, and sends it again until an answer or the controller's LeaderAndIsr settles it.
Dropping it instead would let the leader acknowledge acks=all records without a replica that
ZooKeeper may already list as in sync, and that the next election may make the leader.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from minikafka.config.broker import BrokerConfig
from minikafka.replica.partition import IsrProposal, Partition
from minikafka.replica.replica_manager import ReplicaManager
from minikafka.server import cluster_membership
from minikafka.server.cluster_membership import ClusterMembership
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import LogConfig
from minikafka.storage.log_manager import LogManager
from minikafka.zk.kafka_zk import BrokerRegistration, KafkaZk
from tests.unit.storage.helpers import make_batch

ME, JOINING = 1, 2


async def test_an_unanswered_isr_expansion_stays_pending_and_is_proposed_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = LogManager([str(tmp_path / "d")], ME, "cluster", LogConfig(), LogDirFailureChannel())
    manager.startup()
    membership: ClusterMembership | None = None

    def propose_isr(partition: Partition, proposal: IsrProposal) -> None:  # as the broker routes it
        assert membership is not None
        membership.propose_isr(partition, proposal)
    replicas = ReplicaManager(ME, manager, propose_isr=propose_isr)
    config = BrokerConfig({"broker.id": str(ME), "zookeeper.connect": "127.0.0.1:1",
                           "log.dirs": str(tmp_path / "d")})
    lookups: list[int] = []

    def no_controller_known() -> None:
        # Between two controllers: each send of the proposal looks for one and finds none.
        lookups.append(1)
        return None
    membership = ClusterMembership(config, KafkaZk("127.0.0.1:1", 4000, 1000), replicas,
                                   BrokerRegistration(ME, {}), "PLAINTEXT", controller_endpoint=no_controller_known)
    monkeypatch.setattr(cluster_membership, "CONTROLLER_RETRY_BACKOFF_S", 0.05)
    try:
        partition = replicas.become_leader("t", 0, uuid.UUID(int=7), 3, LogConfig(), isr=(ME,),
                                           replicas=(ME, JOINING), partition_epoch=4)
        assert partition is not None
        partition.append(make_batch(10), now=1)
        # The joining replica caught up: the leader proposes it for the ISR.
        partition.update_follower(JOINING, partition.log.log_end_offset, now=2)
        proposal = partition.pending_isr
        assert proposal is not None and proposal.isr == (ME, JOINING)

        async def sent_again() -> None:
            while len(lookups) < 3:
                await asyncio.sleep(0.01)
        await asyncio.wait_for(sent_again(), 5)
        assert partition.pending_isr is proposal, "an unanswered proposal is not dropped"
        assert JOINING in partition.maximal_isr, "the replica it adds counts toward the high watermark"
        # The controller's news settles it: a new leadership drops the proposal, nothing is sent again.
        partition.make_follower(JOINING, 4, (JOINING, ME), (ME, JOINING), 5)
        sent = len(lookups)
        await asyncio.sleep(0.3)
        assert len(lookups) <= sent + 1
    finally:
        membership._stopping = True
        manager.shutdown()
