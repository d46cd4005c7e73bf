"""What a leader learns from a follower's Fetch: its fetch offset, but only one within the
leader's log. A follower whose log diverged past the leader's end (it has not truncated yet)
gets OFFSET_OUT_OF_RANGE and counts neither as caught up nor toward the high watermark."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from minikafka.replica.replica_manager import FetchRequestPartition, ReplicaManager
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import LogConfig
from minikafka.storage.log_manager import LogManager
from protocol.errors import ErrorCode
from tests.unit.replica.helpers import recorded_proposals
from tests.unit.storage.helpers import make_batch

ME, IN_SYNC, DIVERGED = 1, 2, 3


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[ReplicaManager]:
    manager = LogManager([str(tmp_path / "d1")], ME, "cluster", LogConfig(), LogDirFailureChannel())
    manager.startup()
    replicas = ReplicaManager(ME, manager)
    replicas.become_leader("t", 0, uuid.UUID(int=7), 1, LogConfig(), isr=(ME, IN_SYNC),
                           replicas=(ME, IN_SYNC, DIVERGED))
    assert replicas.append("t", 0, make_batch(10), 1_000).error == ErrorCode.NONE
    yield replicas
    manager.shutdown()


async def fetch(replicas: ReplicaManager, replica_id: int, offset: int) -> ErrorCode:
    [result] = await replicas.fetch([FetchRequestPartition("t", 0, offset, 1 << 20, replica_id=replica_id)],
                                    max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)
    if result.records is not None:
        result.records.close()
    return result.error


async def test_a_fetch_offset_past_the_log_end_counts_for_nothing(replicas: ReplicaManager) -> None:
    partition = replicas.partitions[("t", 0)]
    proposals = recorded_proposals(partition)
    assert await fetch(replicas, DIVERGED, 15) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert proposals == [], "a log longer than the leader's is not caught up"
    assert await fetch(replicas, IN_SYNC, 12) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert partition.log.high_watermark == 0, "nor does it hold what the leader has"
    assert await fetch(replicas, IN_SYNC, 10) == ErrorCode.NONE
    assert partition.log.high_watermark == 10
    assert await fetch(replicas, DIVERGED, 10) == ErrorCode.NONE
    assert [p.isr for p in proposals] == [(ME, IN_SYNC, DIVERGED)], "once truncated, it joins"


async def test_a_follower_naming_an_epoch_the_leader_does_not_have_is_told_where_its_log_diverged(
        replicas: ReplicaManager) -> None:
    # Offsets 0-9 in epoch 1, 10-14 in epoch 3. A follower that led in epoch 2 (offsets 10-17,
    # never replicated) and names that epoch with Fetch v12+ (a Kafka follower asks no
    # OffsetsForLeaderEpoch) is told epoch 1 ends at 10, gets no records, and counts for nothing.
    partition = replicas.become_leader("t", 0, uuid.UUID(int=7), 3, LogConfig(), is_new_replica=False,
                                       isr=(ME, IN_SYNC), replicas=(ME, IN_SYNC, DIVERGED))
    assert partition is not None
    assert replicas.append("t", 0, make_batch(5), 1_000).error == ErrorCode.NONE
    proposals = recorded_proposals(partition)

    async def fetch_naming(replica_id: int, offset: int, epoch: int) -> tuple[ErrorCode, object, int]:
        [result] = await replicas.fetch([FetchRequestPartition("t", 0, offset, 1 << 20, replica_id=replica_id,
                                                               last_fetched_epoch=epoch)],
                                        max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)
        if result.records is not None:
            result.records.close()
        return result.error, result.diverging_epoch, result.size

    assert await fetch_naming(DIVERGED, 18, 2) == (ErrorCode.NONE, (1, 10), 0)
    assert await fetch_naming(DIVERGED, 12, 1) == (ErrorCode.NONE, (1, 10), 0), "epoch 1 ends at 10 here"
    assert proposals == [] and partition.log.high_watermark == 0, "a diverged log counts for nothing"
    # Logs that are a prefix of the leader's are read as usual.
    error, diverging, size = await fetch_naming(IN_SYNC, 10, 1)
    assert (error, diverging) == (ErrorCode.NONE, None) and size > 0
    assert await fetch_naming(IN_SYNC, 15, 3) == (ErrorCode.NONE, None, 0)
    assert partition.log.high_watermark == 15
    error, diverging, size = await fetch_naming(DIVERGED, 10, 1)  # truncated to 10: it catches up
    assert (error, diverging) == (ErrorCode.NONE, None) and size > 0
