"""A leader's view of its followers from their fetches (ReplicaManager.fetch on a real log)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from minikafka.replica.replica_manager import FetchRequestPartition, ReplicaManager
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import LogConfig
from minikafka.storage.log_manager import LogManager
from protocol.errors import ErrorCode
from tests.unit.storage.helpers import make_batch

ME, DIVERGED, IN_SYNC = 1, 2, 3


@pytest.fixture
def leader(tmp_path: Path):
    manager = LogManager([str(tmp_path / "d1")], ME, "cluster", LogConfig(), LogDirFailureChannel())
    manager.startup()
    replicas = ReplicaManager(ME, manager)
    replicas.become_leader("t", 0, uuid.UUID(int=7), 3, LogConfig(), isr=(ME, IN_SYNC),
                           replicas=(ME, DIVERGED, IN_SYNC))
    assert replicas.append("t", 0, make_batch(10), 1_000).error == ErrorCode.NONE
    yield replicas
    manager.shutdown()


async def _fetch(replicas: ReplicaManager, replica_id: int, offset: int) -> ErrorCode:
    (result,) = await replicas.fetch([FetchRequestPartition("t", 0, offset, 1 << 20, replica_id=replica_id)],
                                     max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)
    if result.records is not None:
        result.records.close()
    return result.error


async def test_a_follower_fetching_past_the_log_end_never_joins_the_isr(leader: ReplicaManager) -> None:
    # An old leader back with a tail nobody else has (offsets 10-14 of its own history) fetches
    # from its end before truncating: that says nothing of what it holds below it.
    partition = leader.get_partition("t", 0)
    assert await _fetch(leader, IN_SYNC, 10) == ErrorCode.NONE
    assert partition.log.high_watermark == 10
    assert await _fetch(leader, DIVERGED, 15) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert partition.isr == (ME, IN_SYNC) and partition.pending_isr is None
    assert partition.followers[DIVERGED].log_end_offset == -1
    assert await _fetch(leader, DIVERGED, 10) == ErrorCode.NONE, "once truncated, it catches up"
    assert partition.isr == (ME, DIVERGED, IN_SYNC)
