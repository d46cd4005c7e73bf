"""The controller's side of a broker's clean stop (ControlledShutdown) and of its death, against a
real ZooKeeper.

The controller runs in this process with brokers registered by hand (their addresses answer
nobody: only what it writes to ZooKeeper is looked at). It moves every leadership off the
stopping broker and takes it out of every ISR in one ZooKeeper transaction: a write per
partition, one after another, took half a second for six partitions on a busy machine. A
partition whose leader changed its ISR meanwhile is decided again on the state that won, so the
stopping broker leaves that ISR too: left in it, acks=all there waits for a broker that is gone.

Then real brokers (a three-broker Cluster on the same ZooKeeper) stopping with SIGTERM while what
they would ask cannot answer: each attempt at a controlled shutdown is bounded, and after
controlled.shutdown.max.retries the broker stops anyway, as Kafka's does.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace

import pytest

from minikafka.controller.zk_controller import ZkController
from minikafka.zk.kafka_zk import BrokerRegistration, KafkaZk, state_path
from protocol.errors import ErrorCode
from tests.integration.broker_process import BrokerProcess, free_port
from tests.system.cluster import Cluster
from tests.system.in_process import CONNECT_MS, controller_of, hold_events, until
from tests.system.zookeeper import ZooKeeperProcess

LEAVING = 1
# Partition -> replicas, the first the leader: led by the leaving broker, followed by it, and one
# it holds alone (it keeps leading that one: nobody else can).
ASSIGNMENT = {0: (1, 2, 3), 1: (2, 1, 3), 2: (1, 3, 2), 3: (3, 2, 1), 4: (1,)}


@dataclass
class Harness:
    controller: ZkController
    zk: KafkaZk  # the brokers' session, for what a leader writes and for reading back

    async def shut_down(self) -> list[tuple[str, int]] | None:
        epoch = self.controller.state.brokers[LEAVING].epoch
        return await asyncio.wait_for(self.controller.controlled_shutdown(LEAVING, epoch), 20)


@pytest.fixture(scope="module")
def shared_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """One ZooKeeper for the module (its JVM takes seconds to start); each test has its own chroot."""
    server = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"))
    try:
        yield server.start()
    finally:
        server.close()


@pytest.fixture
async def harness(shared_zookeeper: ZooKeeperProcess, request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    async with controller_of(f"{shared_zookeeper.connect}/{request.node.name}", (1, 2, 3),
                             {"t": ASSIGNMENT}) as (controller, brokers_session):
        yield Harness(controller, brokers_session)


async def test_a_controlled_shutdown_writes_every_partition_state_in_one_transaction(harness: Harness) -> None:
    assert await harness.shut_down() == [("t", 4)]
    changed = sorted(set(ASSIGNMENT) - {4})
    states = {index: await harness.zk.partition_state("t", index) for index in ASSIGNMENT}
    for index in changed:
        found = states[index]
        assert found is not None
        assert found[0].leader != LEAVING and LEAVING not in found[0].isr, (index, found)
        assert found[0].leader == next(b for b in ASSIGNMENT[index] if b != LEAVING)
    assert states[4] is not None and states[4][0].leader == LEAVING, "the partition only it holds stays with it"
    # One multi-op transaction: every znode it set carries that transaction's zxid.
    stats = [await harness.zk.get(state_path("t", index)) for index in changed]
    zxids = {stat[1].mzxid for stat in stats if stat is not None}
    assert len(zxids) == 1, f"the states were written in {len(zxids)} ZooKeeper transactions"


async def test_a_partition_whose_leader_changed_its_isr_meanwhile_still_loses_the_stopping_broker(
        harness: Harness) -> None:
    before = await harness.zk.partition_state("t", 1)
    assert before is not None and before[0].isr == (2, 1, 3)
    release = await hold_events(harness.controller)
    stopping = asyncio.create_task(harness.shut_down())
    await until(lambda: harness.controller._events.qsize() > 0, "the controlled shutdown queued")
    # Partition 1's leader drops broker 3 from its ISR (after a lag) while the request waits: the
    # controller decides on the state it knew, and its conditional write loses.
    await harness.zk.update_isr("t", 1, replace(before[0], isr=(2, 1)), before[1])
    release.set()
    assert await stopping == [("t", 4)]
    for index in set(ASSIGNMENT) - {4}:
        found = await harness.zk.partition_state("t", index)
        assert found is not None and found[0].leader != LEAVING and LEAVING not in found[0].isr, (index, found)
    after = await harness.zk.partition_state("t", 1)
    assert after is not None and after[0].isr == (2,), "the leader's own ISR change was lost"


async def test_a_broker_gone_leaves_every_isr_in_a_new_leader_epoch(harness: Harness) -> None:
    # Not a clean stop: the broker's registration vanishes (its session ended). A follower's
    # removal from the ISR comes in a new leader epoch, as from Kafka's controller: a Kafka
    # leader ignores a LeaderAndIsr of the epoch it has, so it would keep the dead follower in
    # its ISR and never propose adding it back.
    before = {index: await harness.zk.partition_state("t", index) for index in ASSIGNMENT}
    await harness.zk.delete("/brokers/ids/3")

    async def without_3() -> bool:
        # The controller may write the partitions' states in more than one transaction.
        for index in (0, 1, 2):
            found = await harness.zk.partition_state("t", index)
            if found is None or 3 in found[0].isr:
                return False
        return True
    await until(without_3, "broker 3 out of the ISRs of t-0, t-1 and t-2")
    for index in (0, 1, 2):  # broker 3 follows; the leaders stay
        old, new = before[index], await harness.zk.partition_state("t", index)
        assert old is not None and new is not None
        assert new[0].leader == old[0].leader and 3 not in new[0].isr, (index, new)
        assert new[0].leader_epoch == old[0].leader_epoch + 1, (index, old, new)


async def test_leaderships_go_back_to_their_preferred_replicas_in_one_transaction(
        shared_zookeeper: ZooKeeperProcess) -> None:
    # Broker 1 registers after the partitions were created (as a broker restarting does), so its
    # partitions are led elsewhere; once back in their ISRs, one election gives them all back.
    connect = f"{shared_zookeeper.connect}/preferred"
    replicated = {index: replicas for index, replicas in ASSIGNMENT.items() if len(replicas) > 1}
    async with controller_of(connect, (2, 3), {"t": replicated}) as (controller, brokers_session):
        returning = KafkaZk(connect, 6000, CONNECT_MS)
        await returning.start()
        try:
            await returning.register_broker(BrokerRegistration(
                LEAVING, {"PLAINTEXT": ("127.0.0.1", free_port(), "PLAINTEXT")}))
            await until(lambda: LEAVING in controller.state.live, "the returning broker registered")
            prefers = [index for index, replicas in replicated.items() if replicas[0] == LEAVING]
            for index in prefers:  # its leaders take it back into their ISRs, as after its catch-up
                found = await brokers_session.partition_state("t", index)
                assert found is not None and found[0].leader != LEAVING
                await brokers_session.update_isr("t", index, replace(found[0], isr=(*found[0].isr, LEAVING)),
                                                 found[1])
            await until(lambda: all(LEAVING in controller.state.partitions[("t", i)].state.isr for i in prefers),
                        "the controller told of the ISR changes")
            outcomes = await asyncio.wait_for(controller.elect_preferred(None), 20)
            assert {tp: error for tp, (error, _) in outcomes.items() if error == ErrorCode.NONE} == \
                dict.fromkeys([("t", i) for i in prefers], ErrorCode.NONE), outcomes
            stats = [await brokers_session.get(state_path("t", index)) for index in prefers]
            assert all(stat is not None for stat in stats)
            assert len({stat[1].mzxid for stat in stats if stat is not None}) == 1, "not one ZooKeeper transaction"
            for index in prefers:
                found = await brokers_session.partition_state("t", index)
                assert found is not None and found[0].leader == LEAVING
        finally:
            await returning.close()


# How long a stopping broker may take here: a few seconds of work (its ZooKeeper session's end
# included), far below the 30 s request timeout an unbounded or unwatched wait ran into.
STOP_BOUND_S = 20.0


@pytest.fixture(scope="module")
def stopping_cluster(shared_zookeeper: ZooKeeperProcess, tmp_path_factory: pytest.TempPathFactory
                     ) -> Iterator[Cluster]:
    made = Cluster(tmp_path_factory.mktemp("stopping"), shared_zookeeper, chroot="/stopping")
    try:
        made.start()
        made.create_topic("stopping", 3, 3)
        yield made
    finally:
        shared_zookeeper.resume()
        made.close()


@pytest.fixture
def cluster(stopping_cluster: Cluster) -> Iterator[Cluster]:
    """The module's cluster, every broker running and the topic's ISRs full again."""
    stopping_cluster.restore().wait_for_leaders("stopping", 3, isr_size=3)
    yield stopping_cluster
    stopping_cluster.zookeeper.resume()
    for broker_id in list(stopping_cluster.paused):
        stopping_cluster.resume(broker_id)


def _stopped_within(broker: BrokerProcess, bound: float) -> int:
    """The exit status of a broker sent SIGTERM, which must stop within ``bound`` seconds."""
    assert broker.process is not None
    try:
        return broker.process.wait(bound)
    except subprocess.TimeoutExpired:
        raise AssertionError(broker.describe_failure(f"still stopping {bound:.0f} s after SIGTERM")) from None


def _sigterm(broker: BrokerProcess) -> None:
    assert broker.process is not None
    broker.process.send_signal(signal.SIGTERM)


def test_a_controller_whose_zookeeper_stops_answering_still_stops(cluster: Cluster) -> None:
    # The controller moves its own leaderships through its own event queue, whose events wait on
    # ZooKeeper: with ZooKeeper gone quiet (its ensemble stopping too) that wait had no end.
    controller = cluster.brokers[cluster.controller_id()]
    mark = controller.stderr_size()
    cluster.zookeeper.pause()
    _sigterm(controller)
    assert _stopped_within(controller, STOP_BOUND_S) == 0
    text = controller.stderr_since(mark)
    # It finds ZooKeeper gone before its first attempt, or during one (which then fails).
    assert "stopping without a controlled shutdown" in text or (
        "controlled shutdown request failed (attempt 1 of 3)" in text and "stopping anyway" in text), text
    assert "stopped cleanly" in text


def test_brokers_whose_controller_stopped_answering_stop_at_once(cluster: Cluster) -> None:
    # Their ControlledShutdown waits on a paused controller; once its session expires one of them
    # becomes the controller while stopping: the request out is given up then, not after 30 s.
    controller_id = cluster.controller_id()
    others = [cluster.brokers[b] for b in cluster.brokers if b != controller_id]
    marks = [broker.stderr_size() for broker in others]
    cluster.pause(controller_id)
    for broker in others:
        _sigterm(broker)
    for broker in others:
        assert _stopped_within(broker, STOP_BOUND_S) == 0
    texts = [broker.stderr_since(mark) for broker, mark in zip(others, marks, strict=True)]
    assert any("the controller changed while the request was out" in text for text in texts), texts
    assert all("stopped cleanly" in text for text in texts), texts
