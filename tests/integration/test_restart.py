"""Restarts keep data, offsets and the idempotent producers' state.

A clean SIGTERM restart keeps every record and offset. After a kill -9 the broker still knows
each idempotent producer's last sequence numbers: a retried batch is recognised as a duplicate
(not appended again), the next sequence is accepted, a gap is refused.
"""

from __future__ import annotations

import pytest
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.record.memory_records import MemoryRecordsBuilder

from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import (
    aiokafka_consume,
    confluent_consume,
    confluent_produce,
    create_topic,
    kafka_python_consume,
    kafka_python_produce,
)

pytestmark = pytest.mark.integration

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46


def _records(tag: str, count: int) -> list[tuple[bytes, bytes]]:
    return [(f"{tag}-{i}".encode(), f"{tag} value {i}".encode()) for i in range(count)]


def _positions(read) -> dict[bytes, tuple[int, int, bytes]]:
    return {r.key: (r.partition, r.offset, r.value) for r in read}


def test_clean_restart_keeps_records_and_offsets(broker: BrokerProcess) -> None:
    topic = "restart-clean"
    create_topic(broker.bootstrap, topic, 3)
    first = _records("first", 1500)
    first_acks = confluent_produce(broker.bootstrap, topic, first)
    before = _positions(confluent_consume(broker.bootstrap, topic, range(3)))
    ends = {p: max(off for part, off in first_acks if part == p) + 1 for p, _ in first_acks}

    broker.restart(clean=True)

    assert _positions(confluent_consume(broker.bootstrap, topic, range(3))) == before
    second = _records("second", 300)
    second_acks = kafka_python_produce(broker.bootstrap, topic, second)
    for (partition, offset), key in zip(second_acks, (k for k, _ in second), strict=True):
        assert offset >= ends.get(partition, 0), f"{key!r} got offset {offset}, reused below end {ends[partition]}"
    after = _positions(aiokafka_consume(broker.bootstrap, topic, range(3)))
    assert len(after) == len(first) + len(second)
    for key, position in before.items():
        assert after[key] == position


def test_kill9_then_new_idempotent_producer_no_loss_no_dup(broker: BrokerProcess) -> None:
    topic = "restart-kill9"
    create_topic(broker.bootstrap, topic, 4)
    first = _records("old-producer", 2000)
    first_acks = kafka_python_produce(broker.bootstrap, topic, first)  # idempotent, acks=all by default

    broker.restart(clean=False)

    second = _records("new-producer", 2000)
    second_acks = kafka_python_produce(broker.bootstrap, topic, second)
    read = kafka_python_consume(broker.bootstrap, topic, range(4))
    keys = [r.key for r in read]
    assert len(keys) == len(set(keys)), "duplicates after kill -9"
    where = _positions(read)
    for (key, value), (partition, offset) in zip(first + second, first_acks + second_acks, strict=True):
        assert where[key] == (partition, offset, value), key
    assert len(read) == len(first) + len(second)


def _idempotent_batch(producer_id: int, epoch: int, base_sequence: int, count: int, tag: str) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20,
                                   producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence)
    for i in range(count):
        builder.append(timestamp=1_700_000_000_000 + i, key=f"{tag}-{i}".encode(), value=b"idempotent")
    builder.close()
    return bytes(builder.buffer())


def _produce(broker: BrokerProcess, topic: str, batch: bytes, version: int) -> tuple[int, int]:
    partition = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10_000,
                             topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[partition])])
    with broker.wire() as wire:
        response = wire.request(request, version, ProduceResponse)
    (result,) = response.responses[0].partition_responses
    return result.error_code, result.base_offset


def test_producer_state_survives_kill9(broker: BrokerProcess) -> None:
    topic = "restart-producer-state"
    create_topic(broker.bootstrap, topic, 1)
    advertised = broker.advertised_versions()
    produce_version = min(9, advertised[0][1])  # v9 still names topics (v13 uses ids)
    with broker.wire() as wire:
        init = wire.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000,
                                                  producer_id=-1, producer_epoch=-1),
                            min(4, advertised[22][1]), InitProducerIdResponse)
    assert init.error_code == 0 and init.producer_id >= 0, init
    pid, epoch = init.producer_id, init.producer_epoch

    first = _idempotent_batch(pid, epoch, 0, 5, "seq0")
    second = _idempotent_batch(pid, epoch, 5, 5, "seq5")
    assert _produce(broker, topic, first, produce_version) == (0, 0)
    assert _produce(broker, topic, second, produce_version) == (0, 5)

    broker.restart(clean=False)

    # The client never saw the ack of `second` (say): it retries the very same batch.
    error, offset = _produce(broker, topic, second, produce_version)
    assert error in (0, DUPLICATE_SEQUENCE_NUMBER), f"retried batch answered error {error}"
    if error == 0:
        assert offset == 5, f"a duplicate must be answered with its original offset 5, got {offset}"
    assert _produce(broker, topic, _idempotent_batch(pid, epoch, 10, 5, "seq10"), produce_version) == (0, 10)
    error, _ = _produce(broker, topic, _idempotent_batch(pid, epoch, 20, 1, "gap"), produce_version)
    assert error == OUT_OF_ORDER_SEQUENCE_NUMBER, f"a sequence gap was answered {error}"

    read = confluent_consume(broker.bootstrap, topic, [0])
    assert [r.key.decode() for r in read] == (
        [f"seq0-{i}" for i in range(5)] + [f"seq5-{i}" for i in range(5)] + [f"seq10-{i}" for i in range(5)])
    assert [r.offset for r in read] == list(range(15))
