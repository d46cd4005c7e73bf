"""KIP-392 on a real ReplicaManager and Log (no sockets): a leader with the rack-aware selector
names an in-sync follower in the consumer's rack instead of returning records, stops naming it
once it leaves the ISR, and a follower serves a consumer's Fetch v11+ up to its high watermark."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from minikafka.metadata.cache import BrokerInfo, MetadataCache
from minikafka.replica.replica_manager import FetchRequestPartition, FetchResultPartition, ReplicaManager
from minikafka.replica.replica_selector import ClientMetadata, RackAwareReplicaSelector
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import LogConfig
from minikafka.storage.log_manager import LogManager
from protocol.errors import ErrorCode
from tests.unit.storage.helpers import make_batch

ME, NEAR, FAR = 1, 2, 3
RACKS = {ME: "a", NEAR: "b", FAR: "c"}
TOPIC_ID = uuid.UUID(int=9)


def _replicas(tmp_path: Path) -> Iterator[ReplicaManager]:
    manager = LogManager([str(tmp_path / "d1")], ME, "cluster", LogConfig(), LogDirFailureChannel())
    manager.startup()
    replicas = ReplicaManager(ME, manager)
    replicas.metadata = MetadataCache("cluster")
    replicas.metadata.set_brokers([BrokerInfo(b, {"PLAINTEXT": ("127.0.0.1", 9000 + b)}, rack)
                                   for b, rack in RACKS.items()], ME)
    replicas.replica_selector = RackAwareReplicaSelector()
    yield replicas
    manager.shutdown()


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[ReplicaManager]:
    for replicas in _replicas(tmp_path):
        replicas.become_leader("t", 0, TOPIC_ID, 0, LogConfig(), isr=(ME, NEAR, FAR), replicas=(ME, NEAR, FAR))
        assert replicas.append("t", 0, make_batch(10), 1_000).error == ErrorCode.NONE
        yield replicas


async def _fetch(replicas: ReplicaManager, replica_id: int, client: ClientMetadata | None,
                 max_wait_ms: int = 0, offset: int = 0) -> FetchResultPartition:
    (result,) = await replicas.fetch([FetchRequestPartition("t", 0, offset, 1 << 20, replica_id=replica_id)],
                                     max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, client=client)
    if result.records is not None:
        result.records.close()
    return result


async def test_the_leader_sends_a_consumer_to_the_in_sync_follower_in_its_rack(leader: ReplicaManager) -> None:
    for follower in (NEAR, FAR):
        await _fetch(leader, follower, None, offset=10)  # at the log end: the high watermark is 10
    in_b = ClientMetadata("b", "PLAINTEXT")
    sent = await _fetch(leader, -1, in_b, max_wait_ms=60_000)  # answered at once, not after the wait
    assert (sent.error, sent.preferred_read_replica, sent.size, sent.high_watermark) == (ErrorCode.NONE, NEAR, 0, 10)
    served = await _fetch(leader, -1, ClientMetadata("a", "PLAINTEXT"))
    assert (served.preferred_read_replica, served.size > 0) == (-1, True), "the leader is in its rack"
    assert (await _fetch(leader, -1, None)).preferred_read_replica == -1, "Fetch before v11 names no replica"
    assert (await _fetch(leader, -1, ClientMetadata("b", "OTHER"))).preferred_read_replica == -1, \
        "a replica the consumer cannot reach on its listener is not offered"

    partition = leader.get_partition("t", 0)
    assert partition is not None
    partition.maybe_shrink_isr(now=partition.followers[NEAR].last_caught_up_ms + 10**9, max_lag_ms=1)
    assert NEAR not in partition.isr
    assert (await _fetch(leader, -1, in_b)).preferred_read_replica == -1, "out of the ISR, it is not named"


async def test_no_selector_keeps_consumers_on_the_leader(leader: ReplicaManager) -> None:
    for follower in (NEAR, FAR):
        await _fetch(leader, follower, None, offset=10)
    leader.replica_selector = None
    result = await _fetch(leader, -1, ClientMetadata("b", "PLAINTEXT"))
    assert (result.preferred_read_replica, result.size > 0) == (-1, True)


async def test_a_follower_serves_a_consumer_up_to_its_high_watermark(tmp_path: Path) -> None:
    for replicas in _replicas(tmp_path):
        partition = replicas.become_follower("t", 0, TOPIC_ID, 0, LogConfig(), leader_id=NEAR, is_new_replica=True,
                                             isr=(ME, NEAR), replicas=(NEAR, ME), partition_epoch=0)
        assert partition is not None
        partition.append_as_follower(make_batch(10), leader_high_watermark=0)
        near_me = ClientMetadata("a", "PLAINTEXT")
        assert (await _fetch(replicas, -1, near_me)).size == 0, "nothing below the high watermark yet"
        partition.follow_high_watermark(10)
        result = await _fetch(replicas, -1, near_me)
        assert (result.error, result.size > 0, result.high_watermark) == (ErrorCode.NONE, True, 10)
        assert (await _fetch(replicas, -1, None)).error == ErrorCode.NOT_LEADER_OR_FOLLOWER, "Fetch before v11"
