"""An acks=all answer across a resignation: a leader whose ZooKeeper session ended stops leading
but keeps what it appended. If the controller gives it the same leadership back, the producers
waiting on those batches are answered as usual once the followers have them; if the replica
follows another broker instead, they are told NOT_LEADER_OR_FOLLOWER. Answering that at the
resignation told idempotent producers that stored batches were refused (librdkafka then sent
them again under a new producer epoch, and they were stored twice)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from minikafka.replica.replica_manager import ProduceResult, ReplicaManager
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import LogConfig
from minikafka.storage.log_manager import LogManager
from protocol.errors import ErrorCode
from tests.unit.storage.helpers import make_batch

ME, FOLLOWER = 1, 2
TOPIC_ID = uuid.UUID(int=9)


def _manager(tmp_path: Path) -> tuple[LogManager, ReplicaManager]:
    logs = LogManager([str(tmp_path / "d")], ME, "cluster", LogConfig(), LogDirFailureChannel())
    logs.startup()
    return logs, ReplicaManager(ME, logs)


def _lead(replicas: ReplicaManager, epoch: int) -> None:
    replicas.become_leader("t", 0, TOPIC_ID, epoch, LogConfig(), isr=(ME, FOLLOWER), replicas=(ME, FOLLOWER),
                           partition_epoch=epoch)


def _appended_as_leader(replicas: ReplicaManager) -> ProduceResult:
    """Five records appended in leader epoch 3, waiting for the follower (acks=all)."""
    _lead(replicas, 3)
    result = replicas.append("t", 0, make_batch(5), now=1, acks=-1)
    assert result.error == ErrorCode.NONE
    return result


def _follow_the_other_broker(replicas: ReplicaManager) -> None:
    replicas.become_follower("t", 0, TOPIC_ID, 4, LogConfig(), leader_id=FOLLOWER, is_new_replica=False,
                             isr=(FOLLOWER, ME), replicas=(ME, FOLLOWER), partition_epoch=4)


async def test_a_resigned_leader_given_its_leadership_back_answers_the_waiting_producer(tmp_path: Path) -> None:
    logs, replicas = _manager(tmp_path)
    try:
        result = _appended_as_leader(replicas)
        waiting = asyncio.ensure_future(replicas.wait_for_replication("t", 0, result, 10_000))
        await asyncio.sleep(0)
        assert replicas.resign_leaderships() == [("t", 0)]
        await asyncio.sleep(0.1)
        assert not waiting.done(), "the batches are still this leadership's: no answer yet"
        _lead(replicas, 3)  # the controller's LeaderAndIsr for the new registration: same epoch
        partition = replicas.get_partition("t", 0)
        assert partition is not None
        partition.update_follower(FOLLOWER, partition.log.log_end_offset, now=2)
        replicas._wake(("t", 0))
        await asyncio.wait_for(waiting, 5)
        assert result.error == ErrorCode.NONE and result.base_offset == 0
    finally:
        logs.shutdown()


async def test_a_resigned_leader_that_follows_another_broker_tells_the_producer(tmp_path: Path) -> None:
    logs, replicas = _manager(tmp_path)
    try:
        result = _appended_as_leader(replicas)
        waiting = asyncio.ensure_future(replicas.wait_for_replication("t", 0, result, 10_000))
        await asyncio.sleep(0)  # it waits for the followers
        replicas.resign_leaderships()
        _follow_the_other_broker(replicas)
        await asyncio.wait_for(waiting, 5)
        assert result.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        logs.shutdown()


async def test_a_leader_that_followed_another_broker_meanwhile_does_not_confirm_the_old_append(tmp_path: Path) -> None:
    logs, replicas = _manager(tmp_path)
    try:
        result = _appended_as_leader(replicas)
        _follow_the_other_broker(replicas)
        _lead(replicas, 5)
        partition = replicas.get_partition("t", 0)
        assert partition is not None
        partition.update_follower(FOLLOWER, partition.log.log_end_offset, now=2)
        await asyncio.wait_for(replicas.wait_for_replication("t", 0, result, 10_000), 5)
        assert result.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        logs.shutdown()


async def test_a_produce_to_a_resigned_leader_waits_for_the_controllers_news(tmp_path: Path) -> None:
    # Refused now and taken once the leadership is back, the producer's next batch would leave a
    # gap in its sequence numbers (OUT_OF_ORDER_SEQUENCE_NUMBER): it waits instead.
    logs, replicas = _manager(tmp_path)
    try:
        _lead(replicas, 3)
        await asyncio.wait_for(replicas.leadership_confirmed([("t", 0)], 10_000), 1)  # a leader: at once
        replicas.resign_leaderships()
        waiting = asyncio.ensure_future(replicas.leadership_confirmed([("t", 0), ("other", 0)], 10_000))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        _lead(replicas, 3)
        await asyncio.wait_for(waiting, 5)
        assert replicas.append("t", 0, make_batch(1), now=2, acks=-1).error == ErrorCode.NONE

        replicas.resign_leaderships()
        waiting = asyncio.ensure_future(replicas.leadership_confirmed([("t", 0)], 10_000))
        await asyncio.sleep(0)
        _follow_the_other_broker(replicas)  # another leader: the produce is refused as usual
        await asyncio.wait_for(waiting, 5)
        assert replicas.append("t", 0, make_batch(1), now=3, acks=-1).error == ErrorCode.NOT_LEADER_OR_FOLLOWER

        _lead(replicas, 5)
        replicas.resign_leaderships()
        await asyncio.wait_for(replicas.leadership_confirmed([("t", 0)], 200), 5)  # no news: bounded
        partition = replicas.get_partition("t", 0)
        assert partition is not None and partition.leadership_unconfirmed, "it gave up waiting, news or not"
    finally:
        logs.shutdown()
