"""A reassignment the controller decided on a partition state its leader had just changed.

A leader writes an ISR change to ZooKeeper before the controller reads its notification, so the
controller can decide a reassignment on the state before it and lose its conditional write. The
replicas take a new replica set only with a new leader epoch: if the controller then told them
the state that won (the leader's own, with the epoch the leader holds), the leader kept its old
replica set and never took the new replica into the ISR, and the move never ended. Here the
controller runs in this process against a real ZooKeeper with brokers registered by hand, and
the test holds its event queue so that the ISR change lands between the controller's read and
its write every time.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

from minikafka.config.broker import BrokerConfig
from minikafka.controller.zk_controller import ZkController
from minikafka.zk.kafka_zk import BrokerRegistration, KafkaZk, TopicAssignment
from protocol.errors import ErrorCode
from tests.integration.broker_process import free_port
from tests.system.in_process import hold_events, until
from tests.system.zookeeper import ZooKeeperProcess


async def test_a_reassignment_decided_before_an_isr_change_still_gets_a_new_leader_epoch(
        zookeeper: ZooKeeperProcess) -> None:
    connect = zookeeper.connect + "/minikafka"
    controller_session, brokers_session = KafkaZk(connect, 6000, 10000), KafkaZk(connect, 6000, 10000)
    await controller_session.start()
    await brokers_session.start()
    controller = ZkController(BrokerConfig({"broker.id": "9", "zookeeper.connect": connect}), controller_session,
                              "PLAINTEXT")
    try:
        for broker in (1, 2, 3):  # addresses nobody listens on: the controller's requests to them fail
            await brokers_session.register_broker(BrokerRegistration(
                broker, {"PLAINTEXT": ("127.0.0.1", free_port(), "PLAINTEXT")}))
        await brokers_session.create_topic("t", TopicAssignment(uuid.uuid4(), {0: (1, 2)}), {})
        controller.start()
        await until(lambda: controller.active and ("t", 0) in controller.state.partitions,
                     "the controller leading and the partition created")
        found = await brokers_session.partition_state("t", 0)
        assert found is not None and found[0].leader == 1 and found[0].isr == (1, 2)
        epoch = found[0].leader_epoch

        release = await hold_events(controller)
        moving = asyncio.create_task(controller.alter_reassignments({("t", 0): [1, 3]}))
        await until(lambda: controller._events.qsize() > 0, "the reassignment queued")
        # The leader drops broker 2 from the ISR, as after a lag, while the reassignment waits.
        await brokers_session.update_isr("t", 0, replace(found[0], isr=(1,)), found[1])
        release.set()
        assert (await asyncio.wait_for(moving, 20))[("t", 0)][0] == ErrorCode.NONE

        after = await brokers_session.partition_state("t", 0)
        assert after is not None
        assert after[0].leader_epoch == epoch + 1, "the reassignment gave the replicas no new leader epoch"
        assert after[0].isr == (1,), "the leader's ISR change was lost"
        assignment = await brokers_session.topic_assignment("t")
        assert assignment is not None and assignment.partitions[0] == (1, 3, 2)
        assert assignment.adding_replicas == {0: (3,)} and assignment.removing_replicas == {0: (2,)}
    finally:
        await controller.stop()
        await brokers_session.close()
        await controller_session.close()
