"""Helpers for tests that run ZkControllers in the test's own event loop against a real
ZooKeeper, and hold a controller's event queue to make a race happen in one order every time."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping

from minikafka.config.broker import BrokerConfig
from minikafka.controller.zk_controller import ZkController
from minikafka.zk.kafka_zk import BrokerRegistration, KafkaZk, TopicAssignment
from tests.integration.broker_process import free_port

# A ZooKeeper just started on a busy machine took over 10 s to open a first session.
CONNECT_MS = 30_000


async def until(condition: Callable[[], bool | Awaitable[bool]], what: str) -> None:
    """Poll ``condition`` (plain or async) every 10 ms; fail after 20 s naming ``what``."""
    try:
        async with asyncio.timeout(20):
            while True:
                held = condition()
                if await held if inspect.isawaitable(held) else held:
                    return
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def hold_events(controller: ZkController) -> asyncio.Event:
    """Hold the controller's event queue (as a slow event would) until the returned event is set."""
    release, holding = asyncio.Event(), asyncio.Event()

    async def held() -> None:
        holding.set()
        await release.wait()
    controller.post(held)
    await holding.wait()
    return release


@contextlib.asynccontextmanager
async def controller_of(connect: str, brokers: Iterable[int], topics: Mapping[str, Mapping[int, tuple[int, ...]]]
                        ) -> AsyncIterator[tuple[ZkController, KafkaZk]]:
    """A controller (broker 9) elected in this process, ``brokers`` registered by hand at addresses
    nobody listens on (its requests to them fail: only what it writes to ZooKeeper is looked at),
    and ``topics`` (name -> partition -> replicas) created; with the brokers' own ZooKeeper
    session, for what a leader would write and for reading back."""
    controller_session, brokers_session = KafkaZk(connect, 6000, CONNECT_MS), KafkaZk(connect, 6000, CONNECT_MS)
    await controller_session.start()
    await brokers_session.start()
    controller = ZkController(BrokerConfig({"broker.id": "9", "zookeeper.connect": connect}), controller_session,
                              "PLAINTEXT")
    try:
        for broker in brokers:
            await brokers_session.register_broker(BrokerRegistration(
                broker, {"PLAINTEXT": ("127.0.0.1", free_port(), "PLAINTEXT")}))
        for name, assignment in topics.items():
            await brokers_session.create_topic(name, TopicAssignment(uuid.uuid4(), dict(assignment)), {})
        controller.start()
        count = sum(len(assignment) for assignment in topics.values())
        await until(lambda: controller.active and len(controller.state.partitions) == count,
                    "the controller leading and the partitions created")
        yield controller, brokers_session
    finally:
        await controller.stop()
        await brokers_session.close()
        await controller_session.close()
