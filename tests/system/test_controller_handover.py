"""A controller that lost its place leaves the rest to its successor.

The fault-injection test found this: ZooKeeper paused, the controller's session expired and it
resigned with events still queued. They ran half a second later, after another broker had been
elected: the old controller read the ISR change notifications its successor had not handled yet
and deleted them, so the successor never learnt that a follower had rejoined a partition's ISR,
and every broker's Metadata kept that follower out of it for good. Here two controllers run in
this process against a real ZooKeeper, and the test holds each one's event queue to make that
order happen every time.
"""

from __future__ import annotations

import asyncio

from minikafka.config.broker import BrokerConfig
from minikafka.controller.zk_controller import ZkController
from minikafka.zk.kafka_zk import ISR_CHANGE_PREFIX, KafkaZk, isr_change_notification
from tests.system.in_process import hold_events, until
from tests.system.zookeeper import ZooKeeperProcess


async def _notify_isr_change(zk: KafkaZk, partition: tuple[str, int]) -> None:
    """The notification a leader writes with its ISR change (of a partition this test never creates)."""
    await zk.create(f"/isr_change_notification/{ISR_CHANGE_PREFIX}", isr_change_notification([partition]),
                    sequence=True)


async def _no_notification(zk: KafkaZk) -> bool:
    return not await zk.isr_change_notifications()


async def test_a_resigned_controllers_queued_events_leave_notifications_to_its_successor(
        zookeeper: ZooKeeperProcess) -> None:
    connect = zookeeper.connect + "/minikafka"
    sessions = [KafkaZk(connect, 6000, 10000) for _ in range(3)]
    for session in sessions:
        await session.start()
    first, second = (ZkController(BrokerConfig({"broker.id": str(b), "zookeeper.connect": connect}),
                                  sessions[b - 1], "PLAINTEXT") for b in (1, 2))
    leader = sessions[2]  # writes notifications as a partition leader does
    try:
        first.start()
        await until(lambda: first.active, "broker 1 elected")
        second.start()

        release_first = await hold_events(first)
        await _notify_isr_change(leader, ("t", 0))
        await until(lambda: first._events.qsize() > 0, "broker 1's watch queueing the ISR change")
        await first._resign()  # as when its session expired, with that event still queued
        await sessions[0].resign_controller(1)
        await until(lambda: second.active, "broker 2 elected")
        await until(lambda: _no_notification(leader), "broker 2's take-over handling the first change")

        release_second = await hold_events(second)
        await _notify_isr_change(leader, ("t", 1))
        waiting = await leader.isr_change_notifications()
        assert [partitions for _, partitions in waiting] == [[("t", 1)]]
        await until(lambda: second._events.qsize() > 0, "broker 2's watch queueing the ISR change")

        release_first.set()  # the former controller's queued events run now
        done = asyncio.Event()

        async def drained() -> None:
            done.set()
        first.post(drained)
        await asyncio.wait_for(done.wait(), 20)
        assert await leader.isr_change_notifications() == waiting, \
            "the former controller deleted a notification its successor had not handled"

        release_second.set()
        await until(lambda: _no_notification(leader), "broker 2 handling the second change")
    finally:
        for controller in (first, second):
            await controller.stop()
        for session in sessions:
            await session.close()
