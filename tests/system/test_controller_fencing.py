"""The controller's deletes in ZooKeeper are fenced: by the controller epoch, so that a controller
that lost its place deletes nothing its successor relies on, and, for /admin/reassign_partitions,
by the version it read, so that an operator's newer request is read rather than deleted unread.
Against a real ZooKeeper, through KafkaZk, with the two controllers' sessions made by hand.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable

import pytest

from minikafka.zk.kafka_zk import (
    REASSIGN_PARTITIONS,
    KafkaZk,
    LeaderIsr,
    StaleState,
    TopicAssignment,
    isr_change_notification,
    topic_path,
)
from tests.system.zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.shared_zookeeper  # each test under a chroot of its own


def _request(replicas: list[int]) -> bytes:
    return json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": replicas}]}).encode()


async def test_a_reassignment_request_rewritten_after_it_was_read_is_not_deleted(zookeeper: ZooKeeperProcess, chroot: str) -> None:
    zk = KafkaZk(zookeeper.connect + chroot, 6000, 10000)
    await zk.start()
    try:
        became = await zk.try_become_controller(1)
        assert became is not None
        await zk.create(REASSIGN_PARTITIONS, _request([1, 2]))
        read = await zk.requested_reassignments()
        assert read is not None and read.partitions == {("t", 0): (1, 2)}
        await zk.set(REASSIGN_PARTITIONS, _request([2, 3]))  # the operator's newer request
        with pytest.raises(StaleState):
            await zk.delete_requested_reassignments(read.version, became[1])
        newer = await zk.requested_reassignments()
        assert newer is not None and newer.partitions == {("t", 0): (2, 3)}
        await zk.delete_requested_reassignments(newer.version, became[1])
        assert await zk.requested_reassignments() is None
    finally:
        await zk.close()


async def test_a_former_controller_deletes_no_topic_znode_and_no_request(zookeeper: ZooKeeperProcess, chroot: str) -> None:
    connect = zookeeper.connect + chroot
    first, second = KafkaZk(connect, 6000, 10000), KafkaZk(connect, 6000, 10000)
    await first.start()
    await second.start()
    try:
        old = await first.try_become_controller(1)
        assert old is not None
        await first.create_topic("t", TopicAssignment(uuid.uuid4(), {0: (1, 2)}), {"retention.ms": "1000"})
        await first.create_partition_state("t", 0, LeaderIsr(1, 0, (1, 2), old[0]), old[1])
        await first.mark_topic_for_deletion("t")
        await first.create(REASSIGN_PARTITIONS, _request([1, 2]))
        request = await first.requested_reassignments()
        assert request is not None
        await first.resign_controller(1)
        new = await second.try_become_controller(2)
        assert new is not None and new[0] == old[0] + 1

        with pytest.raises(StaleState):
            await first.delete_topic_znodes("t", old[1])
        with pytest.raises(StaleState):
            await first.delete_requested_reassignments(request.version, old[1])
        for path in (topic_path("t"), f"{topic_path('t')}/partitions/0/state", "/config/topics/t",
                     "/admin/delete_topics/t", REASSIGN_PARTITIONS):
            assert await second.exists(path) is not None, f"the former controller deleted {path}"

        await second.delete_topic_znodes("t", new[1])
        await second.delete_requested_reassignments(request.version, new[1])
        for path in (topic_path("t"), "/config/topics/t", "/admin/delete_topics/t", REASSIGN_PARTITIONS):
            assert await second.exists(path) is None, f"the controller left {path}"
    finally:
        await first.close()
        await second.close()


async def test_a_wave_of_isr_change_notifications_is_deleted_in_one_commit_and_fenced(
        zookeeper: ZooKeeperProcess, chroot: str) -> None:
    """The notifications of many ISR changes go in one ZooKeeper transaction (each commit waits
    on ZooKeeper's fsync, so one per notification held the controller's next event for seconds
    under a loaded disk); a former controller deletes none; one already gone is no error."""
    connect = zookeeper.connect + chroot
    first, second = KafkaZk(connect, 6000, 10000), KafkaZk(connect, 6000, 10000)
    await first.start()
    await second.start()

    async def notify(count: int) -> list[str]:
        return [str(await first.create("/isr_change_notification/isr_change_",
                                       isr_change_notification([("t", i)]), sequence=True)) for i in range(count)]

    async def commits_during(work: Awaitable[None]) -> int:
        """ZooKeeper transactions committed by ``work`` (zxids of marker znodes either side)."""
        start = await _zxid(second)
        await work
        return await _zxid(second) - start - 1

    try:
        old = await first.try_become_controller(1)
        assert old is not None
        wave = await notify(20)
        assert await commits_during(first.delete_notifications(wave, old[1])) == 1
        assert await first.isr_change_notifications() == []

        wave = await notify(3)
        await first.delete_notification(wave[1], old[1])  # gone already: the rest still go
        await first.delete_notifications(wave, old[1])
        assert await first.isr_change_notifications() == []

        wave = await notify(3)
        await first.resign_controller(1)
        new = await second.try_become_controller(2)
        assert new is not None
        with pytest.raises(StaleState):
            await first.delete_notifications(wave, old[1])
        assert [path for path, _ in await second.isr_change_notifications()] == wave
    finally:
        await first.close()
        await second.close()


async def _zxid(zk: KafkaZk) -> int:
    """The zxid of a new marker znode's creation: the latest committed transaction's."""
    path = await zk.create("/zxid-marker-", b"", sequence=True, ephemeral=True)
    stat = await zk.exists(str(path))
    assert stat is not None
    return int(stat.czxid)
