"""A LeaderAndIsr without topic ids (v4 and older: inter.broker.protocol.version below 2.8-IV1)
names no topic id; a replica that has one is kept, as Kafka keeps it, rather than taken for a
replica of a deleted topic."""

from __future__ import annotations

import uuid
from pathlib import Path

from minikafka.config.broker import BrokerConfig
from minikafka.replica.leadership import Leadership, PartitionCommand
from minikafka.replica.replica_manager import ReplicaManager
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import ZERO_UUID, LogConfig
from minikafka.storage.log_manager import LogManager
from protocol.errors import ErrorCode
from tests.unit.storage.helpers import make_batch

ME = 1
TOPIC_ID = uuid.UUID(int=7)


async def _no_configs(_topic: str) -> dict[str, str]:
    return {}


def _command(topic_id: uuid.UUID, leader_epoch: int) -> PartitionCommand:
    return PartitionCommand(topic="t", topic_id=topic_id, index=0, leader=ME, leader_epoch=leader_epoch, isr=(ME,),
                            replicas=(ME,), partition_epoch=leader_epoch, is_new=leader_epoch == 0)


async def test_a_leader_and_isr_without_topic_ids_keeps_the_replica_and_its_records(tmp_path: Path) -> None:
    manager = LogManager([str(tmp_path / "d1")], ME, "cluster", LogConfig(), LogDirFailureChannel())
    manager.startup()
    try:
        leadership = Leadership(BrokerConfig({"broker.id": str(ME)}), ReplicaManager(ME, manager))
        assert await leadership.become_leader_or_follower([_command(TOPIC_ID, 0)], _no_configs) == {
            ("t", 0): ErrorCode.NONE}
        log = manager.get_log("t", 0)
        assert log is not None
        log.append_as_leader(make_batch(), leader_epoch=0, now_ms=0)
        assert await leadership.become_leader_or_follower([_command(ZERO_UUID, 1)], _no_configs) == {
            ("t", 0): ErrorCode.NONE}
        kept = manager.get_log("t", 0)
        assert kept is log and kept.topic_id == TOPIC_ID and kept.log_end_offset == 1
    finally:
        manager.shutdown()
