"""The guard of KIP-890's verification on a partition leader (ReplicaManager, real logs, no
sockets): produce requests of one producer pipelined to a partition whose transaction is being
verified all append once verified, and a marker of the producer voids what was verified before it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from minikafka.config.broker import BrokerConfig
from minikafka.replica.replica_manager import ReplicaManager
from minikafka.replica.topic_config import log_config_for
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log_manager import LogManager
from protocol.errors import ErrorCode
from protocol.record_codec import ControlMarker
from tests.unit.storage.helpers import make_batch

BROKER, PRODUCER, EPOCH = 1, 4000, 0
TOPIC = "t"


@pytest.fixture
def replicas(tmp_path: Path) -> ReplicaManager:
    config = BrokerConfig({"log.dirs": str(tmp_path), "broker.id": str(BROKER)})
    log_config = log_config_for({}, config)
    log_manager = LogManager([str(tmp_path)], BROKER, "cluster", log_config, LogDirFailureChannel())
    log_manager.startup()
    manager = ReplicaManager(BROKER, log_manager)
    assert manager.become_leader(TOPIC, 0, uuid.uuid4(), 0, log_config) is not None
    return manager


def _batch(sequence: int) -> bytes:
    return make_batch(1, producer_id=PRODUCER, producer_epoch=EPOCH, base_sequence=sequence, transactional=True)


def test_requests_pipelined_while_their_transaction_is_verified_all_append(replicas: ReplicaManager) -> None:
    # Five in flight, as the Java producer sends them: each begins its verification before
    # the coordinator has answered the first.
    tokens = [replicas.begin_verification(TOPIC, 0, PRODUCER) for _ in range(5)]
    results = [replicas.append(TOPIC, 0, _batch(seq), now=1, verified=(PRODUCER, token))
               for seq, token in enumerate(tokens)]
    assert [r.error for r in results] == [ErrorCode.NONE] * 5
    assert [r.base_offset for r in results] == [0, 1, 2, 3, 4]


def test_a_marker_voids_a_verification_begun_before_it(replicas: ReplicaManager) -> None:
    stale = replicas.begin_verification(TOPIC, 0, PRODUCER)
    replicas.append_marker(TOPIC, 0, PRODUCER, EPOCH, ControlMarker(aborted=True, coordinator_epoch=0), now=1)
    fresh = replicas.begin_verification(TOPIC, 0, PRODUCER)
    assert fresh is not stale
    late = replicas.append(TOPIC, 0, _batch(0), now=2, verified=(PRODUCER, stale))
    assert late.error == ErrorCode.INVALID_TXN_STATE, "a batch of the ended transaction opens no new one"
    assert replicas.append(TOPIC, 0, _batch(0), now=3, verified=(PRODUCER, fresh)).error == ErrorCode.NONE
