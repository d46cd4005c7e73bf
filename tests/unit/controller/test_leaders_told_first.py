"""The controller tells a partition's new leader first, and its followers and every broker's
metadata only once that leader answered (channel.py's ``after``): brokers on 127.0.0.1 that
read the controller's requests with the protocol's own parser and answer when the test lets
them."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from minikafka.config.broker import BrokerConfig
from minikafka.controller import channel, requests
from minikafka.controller.channel import LEADER_AND_ISR, NAMES, UPDATE_METADATA, ControllerChannels
from minikafka.controller.state import ControllerState, PartitionRecord
from minikafka.controller.zk_controller import ZkController
from minikafka.zk.kafka_zk import BrokerRegistration, KafkaZk, LeaderIsr, TopicAssignment
from protocol import encode_response, parse_request
from tests.system.in_process import until

# Between two leaders' answers: time enough for a request that waited for the first alone to go out.
WINDOW_S = 0.3
TOPIC_ID = uuid.UUID(int=7)


@dataclass
class Broker:
    """Reads the controller's requests and answers them, each LeaderAndIsr only once ``answering``
    is set. ``told`` lists (request name, partitions named) in the order they arrived, ``told_at``
    when (the event loop's clock); ``answered_at`` is when it answered its first LeaderAndIsr."""

    broker_id: int
    answering: asyncio.Event = field(default_factory=asyncio.Event)
    told: list[tuple[str, list[int]]] = field(default_factory=list)
    told_at: list[float] = field(default_factory=list)
    answered_at: float | None = None
    server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                size, = struct.unpack(">i", await reader.readexactly(4))
                request = parse_request(await reader.readexactly(size))
                key = request.header.api_key
                body = request.body
                states = body.get("topic_states") or body.get("partition_states") or []
                partitions = sorted(p.partition_index for t in states for p in getattr(t, "partition_states", [t]))
                self.told.append((NAMES[key], partitions))
                self.told_at.append(asyncio.get_running_loop().time())
                if key == LEADER_AND_ISR:
                    await self.answering.wait()
                answer = {"error_code": 0, "topics": [], "partition_errors": []}
                for part in encode_response(key, request.header.api_version, request.header.correlation_id, answer):
                    assert isinstance(part, bytes)
                    writer.write(part)
                await writer.drain()
                if key == LEADER_AND_ISR and self.answered_at is None:
                    self.answered_at = asyncio.get_running_loop().time()
        writer.close()

    def registration(self) -> BrokerRegistration:
        return BrokerRegistration(self.broker_id, {"INTERNAL": ("127.0.0.1", self.port, "PLAINTEXT")}, epoch=10)


@contextlib.asynccontextmanager
async def brokers(*ids: int) -> AsyncIterator[dict[int, Broker]]:
    running = {b: Broker(b) for b in ids}
    for broker in running.values():
        broker.server = await asyncio.start_server(broker.serve, "127.0.0.1", 0)
    try:
        yield running
    finally:
        for broker in running.values():
            broker.answering.set()
            assert broker.server is not None
            broker.server.close()


def _controller(running: dict[int, Broker]) -> ZkController:
    config = BrokerConfig({"broker.id": "1", "listeners": "INTERNAL://127.0.0.1:9093",
                           "listener.security.protocol.map": "INTERNAL:PLAINTEXT",
                           "inter.broker.listener.name": "INTERNAL"})
    controller = ZkController(config, KafkaZk("127.0.0.1:1", 4000, 4000), "INTERNAL")
    state = controller.state
    state.epoch = 3
    for broker_id, broker in running.items():
        state.brokers[broker_id] = broker.registration()
        controller._open_channel(broker_id, state.brokers[broker_id])
    # Partition 0 led by 2, partition 1 by 3: each broker leads one and follows the other.
    state.topics["roll"] = TopicAssignment(TOPIC_ID, {0: (2, 1, 3), 1: (3, 1, 2)})
    for index, leader in ((0, 2), (1, 3)):
        state.record(("roll", index), PartitionRecord(LeaderIsr(leader, 7, (1, 2, 3), 3), 9))
    return controller


def test_followers_and_metadata_wait_for_the_new_leaders() -> None:
    async def scenario() -> None:
        async with brokers(1, 2, 3) as running:
            controller = _controller(running)
            try:
                controller._tell_replicas({tp: controller.state.partitions[tp] for tp in (("roll", 0), ("roll", 1))})
                await until(lambda: bool(running[2].told and running[3].told), "each leader's LeaderAndIsr")
                running[2].answering.set()
                await until(lambda: running[2].answered_at is not None, "broker 2's answer")
                await asyncio.sleep(WINDOW_S)
                running[3].answering.set()
                running[1].answering.set()
                await until(lambda: all(len(b.told) == (2 if b.broker_id == 1 else 3) for b in running.values()),
                            "every request")
                assert running[1].told == [("LeaderAndIsr", [0, 1]), ("UpdateMetadata", [0, 1])]
                assert running[2].told == [("LeaderAndIsr", [0]), ("LeaderAndIsr", [1]), ("UpdateMetadata", [0, 1])]
                assert running[3].told == [("LeaderAndIsr", [1]), ("LeaderAndIsr", [0]), ("UpdateMetadata", [0, 1])]
                # Everything but each leader's own LeaderAndIsr came after the later leader answered.
                last_answer = running[3].answered_at
                assert last_answer is not None
                assert min(t for b in running.values() for t in b.told_at[0 if b.broker_id == 1 else 1:]) \
                    >= last_answer
            finally:
                await controller.channels.close()

    asyncio.run(scenario())


def test_new_partitions_are_told_to_every_replica_at_once() -> None:
    """A partition just created had no leader a client could have been sent to."""
    async def scenario() -> None:
        async with brokers(1, 2, 3) as running:
            controller = _controller(running)
            try:
                controller._tell_replicas({("roll", 0): controller.state.partitions[("roll", 0)]}, new=True)
                await until(lambda: all(b.told for b in running.values()), "every replica's LeaderAndIsr")
                assert [b.told for b in running.values()] == [[("LeaderAndIsr", [0])]] * 3
            finally:
                await controller.channels.close()

    asyncio.run(scenario())


def test_a_leader_that_does_not_answer_holds_the_others_only_so_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channel, "AFTER_WAIT_S", 1.0)

    async def scenario() -> None:
        async with brokers(1, 2, 3) as running:
            running[1].answering.set()
            running[3].answering.set()
            controller = _controller(running)
            try:
                told_at = asyncio.get_running_loop().time()
                controller._tell_replicas({("roll", 0): controller.state.partitions[("roll", 0)]})
                await until(lambda: len(running[1].told) == 2 and len(running[3].told) == 2, "the followers' requests")
                assert running[1].told == [("LeaderAndIsr", [0]), ("UpdateMetadata", [0])]
                assert min(running[1].told_at + running[3].told_at) - told_at >= 1.0
            finally:
                await controller.channels.close()

    asyncio.run(scenario())


def test_a_request_queued_after_a_held_one_waits_behind_it_and_a_closed_channel_ends_both() -> None:
    async def scenario() -> None:
        async with brokers(1) as running:
            channels = ControllerChannels(controller_id=9)
            channels.add(1, 10, ("127.0.0.1", running[1].port))
            held_by: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            body = requests.update_metadata(ControllerState(epoch=3), 9, {})
            held = channels.send(1, UPDATE_METADATA, body, after=held_by)
            behind = channels.send(1, UPDATE_METADATA, body)
            await until(lambda: channels.channels[1].current is not None, "the channel taking the held request")
            assert running[1].told == [] and not channels.channels[1].idle
            await channels.remove(1)  # the broker left: nothing waits for it any longer
            assert held.done() and behind.done()
            assert channels.send(1, UPDATE_METADATA, body).done()  # no channel: nothing to wait for

    asyncio.run(scenario())
