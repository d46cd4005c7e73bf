"""Partitions on a real Log for the replication rules' unit tests (no sockets)."""

from __future__ import annotations

import uuid
from pathlib import Path

from minikafka.replica.partition import IsrProposal, Partition
from minikafka.storage.dir_io import DirGuard
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import Log, LogConfig


def leader_partition(tmp_path: Path, me: int, isr: tuple[int, ...], replicas: tuple[int, ...]) -> Partition:
    """Partition t-0 led by ``me`` at leader epoch 5, partition epoch 7, its log in ``tmp_path``."""
    log_dir = str(tmp_path)
    log = Log.create(log_dir, "t", 0, uuid.uuid4(), LogConfig(), DirGuard(log_dir, LogDirFailureChannel()))
    partition = Partition("t", 0, log.topic_id, 0, log, me)
    partition.make_leader(5, isr, replicas, partition_epoch=7, now=0)
    return partition


def recorded_proposals(partition: Partition) -> list[IsrProposal]:
    """Record the partition's ISR proposals instead of writing them anywhere."""
    proposals: list[IsrProposal] = []
    partition.propose_isr = lambda _partition, proposal: proposals.append(proposal)
    return proposals
