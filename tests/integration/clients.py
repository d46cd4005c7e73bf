"""Thin, blocking wrappers around the real client libraries, shared by the integration tests.

Nothing here keeps state between calls: each helper opens its client, does one job, closes
it. Consumers always use assign() with explicit partitions and never commit, so no test here
depends on consumer group state. They stop when the client's position in every partition reached
the end offset the same client reported before reading (a position moves past transaction markers
and aborted records, which a consumer never returns), or fail at a deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass

import confluent_kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

from tests.integration.broker_process import KafkaWire


@dataclass(frozen=True, slots=True)
class ReadRecord:
    """One record as a consumer returned it; immutable, shared freely between threads."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int | None = None


def create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    """CreateTopics through kafka-python's admin client, waiting until its leaders are known."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="tests-admin", request_timeout_ms=20_000)
    try:
        admin.create_topics(
            {name: {"num_partitions": partitions, "replication_factor": 1, "configs": configs or {}}},
            timeout_ms=20_000, wait_for_metadata=True,
        )
    finally:
        admin.close()


# ---------------------------------------------------------------- confluent-kafka (librdkafka)

def confluent_produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    *,
    partition: int | None = None,
    timeout: float = 60.0,
    **config: object,
) -> list[tuple[int, int]]:
    """Produce (key, value) pairs; returns (partition, offset) per record in send order.

    Any delivery error fails the call: these helpers are for runs where nothing should fail.
    """
    conf = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    conf.update({k.replace("_", "."): v for k, v in config.items()})
    producer = confluent_kafka.Producer(conf)
    results: list[tuple[int, int] | None] = []
    errors: list[str] = []

    def on_delivery(index: int):
        def report(err, msg) -> None:
            if err is not None:
                errors.append(f"record {index}: {err}")
            else:
                results[index] = (msg.partition(), msg.offset())
        return report

    for index, (key, value) in enumerate(records):
        results.append(None)
        extra = {} if partition is None else {"partition": partition}
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=on_delivery(index), **extra)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(timeout)
    assert remaining == 0, f"{remaining} records still undelivered after {timeout}s"
    assert not errors, f"delivery errors: {errors[:5]}"
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


def latest_offsets(bootstrap: str, topic: str, partitions: Iterable[int], *,
                   isolation_level: str = "read_uncommitted") -> list[int]:
    """ListOffsets' latest of each partition, as confluent-kafka reports it: the high watermark,
    or for read_committed the last stable offset."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "tests-never-committed",
                                         "isolation.level": isolation_level})
    try:
        return [consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)[1]
                for p in partitions]
    finally:
        consumer.close()


def confluent_consume(
    bootstrap: str, topic: str, partitions: Iterable[int], *, timeout: float = 60.0, **config: object,
) -> list[ReadRecord]:
    """Read the partitions from the beginning up to the end offsets seen at the start."""
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": "tests-never-committed",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
    }
    conf.update({k.replace("_", "."): v for k, v in config.items()})
    consumer = confluent_kafka.Consumer(conf)
    try:
        ends: dict[int, int] = {}
        for p in partitions:
            _low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in ends])
        next_offset = {p: 0 for p in ends}
        read: list[ReadRecord] = []
        deadline = time.monotonic() + timeout
        while any(next_offset[p] < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise TimeoutError(f"confluent consumer stuck at {next_offset}, ends {ends}")
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error() is not None:
                    raise RuntimeError(f"consumer error: {msg.error()}")
                _ts_type, ts = msg.timestamp()
                read.append(ReadRecord(msg.partition(), msg.offset(), msg.key(), msg.value(), ts))
            next_offset = {tp.partition: max(tp.offset, 0) for tp in consumer.position(
                [confluent_kafka.TopicPartition(topic, p) for p in ends])}
        return read
    finally:
        consumer.close()


# ---------------------------------------------------------------- kafka-python

def kafka_python_produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    *,
    partition: int | None = None,
    timeout: float = 60.0,
    **config: object,
) -> list[tuple[int, int]]:
    """Produce (key, value) pairs with kafka-python's defaults (idempotent, acks=all)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, **{"linger_ms": 5, **config})
    try:
        futures = [producer.send(topic, key=key, value=value, partition=partition) for key, value in records]
        producer.flush(timeout)
        metadata = [f.get(timeout=1) for f in futures]
        return [(m.partition, m.offset) for m in metadata]
    finally:
        producer.close(timeout=10)


def kafka_python_consume(
    bootstrap: str, topic: str, partitions: Iterable[int], *, timeout: float = 60.0,
    isolation_level: str = "read_uncommitted", **config: object,
) -> list[ReadRecord]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
        isolation_level=isolation_level, **config,
    )
    try:
        tps = [KpTopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        ends = {tp.partition: off for tp, off in consumer.end_offsets(tps).items()}
        consumer.seek_to_beginning(*tps)
        next_offset = {p: 0 for p in ends}
        read: list[ReadRecord] = []
        deadline = time.monotonic() + timeout
        while any(next_offset[p] < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka-python consumer stuck at {next_offset}, ends {ends}")
            for tp, batch in consumer.poll(timeout_ms=500).items():
                for msg in batch:
                    read.append(ReadRecord(tp.partition, msg.offset, msg.key, msg.value, msg.timestamp))
            next_offset = {tp.partition: consumer.position(tp) for tp in tps}
        return read
    finally:
        consumer.close()


# ---------------------------------------------------------------- aiokafka

async def _aiokafka_consume(bootstrap: str, topic: str, partitions: list[int], timeout: float,
                            isolation_level: str) -> list[ReadRecord]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
        isolation_level=isolation_level,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        ends = {tp.partition: off for tp, off in (await consumer.end_offsets(tps)).items()}
        await consumer.seek_to_beginning(*tps)
        next_offset = {p: 0 for p in ends}
        read: list[ReadRecord] = []
        deadline = time.monotonic() + timeout
        while any(next_offset[p] < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise TimeoutError(f"aiokafka consumer stuck at {next_offset}, ends {ends}")
            batches = await consumer.getmany(timeout_ms=500, max_records=5000)
            for tp, batch in batches.items():
                for msg in batch:
                    read.append(ReadRecord(tp.partition, msg.offset, msg.key, msg.value, msg.timestamp))
            next_offset = {tp.partition: await consumer.position(tp) for tp in tps}
        return read
    finally:
        await consumer.stop()


def aiokafka_consume(bootstrap: str, topic: str, partitions: Iterable[int], *, timeout: float = 60.0,
                     isolation_level: str = "read_uncommitted") -> list[ReadRecord]:
    return asyncio.run(_aiokafka_consume(bootstrap, topic, list(partitions), timeout, isolation_level))


async def _aiokafka_produce(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]], partition: int | None,
    config: dict[str, object],
) -> list[tuple[int, int]]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **config)
    await producer.start()
    try:
        futures = [await producer.send(topic, key=key, value=value, partition=partition) for key, value in records]
        metadata = await asyncio.gather(*futures)
        return [(m.partition, m.offset) for m in metadata]
    finally:
        await producer.stop()


def aiokafka_produce(
    bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes | None]], *,
    partition: int | None = None, **config: object,
) -> list[tuple[int, int]]:
    return asyncio.run(_aiokafka_produce(bootstrap, topic, list(records), partition, config))


def confluent_transactions(bootstrap: str, topic: str, outcomes: Iterable[tuple[bytes, bool | None]],
                           per_transaction: int, partitions: int = 2, **config: object) -> confluent_kafka.Producer:
    """One transaction per (value prefix, outcome): committed (True), aborted (False) or left
    open (None, the last); values ``<prefix>-<i>`` spread over ``partitions``. The producer is
    returned so that the caller ends the open transaction."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": topic, **config})
    producer.init_transactions(30)
    for prefix, commit in outcomes:
        producer.begin_transaction()
        for i in range(per_transaction):
            producer.produce(topic, value=b"%s-%d" % (prefix, i), partition=i % partitions)
        producer.flush(30)
        if commit is True:
            producer.commit_transaction(30)
        elif commit is False:
            producer.abort_transaction(30)
    return producer


# A client quota entity as AlterClientQuotas names it: {"user": "alice", "client-id": None (the default)}.
QuotaEntity = dict[str, str | None]


def alter_client_quotas(address: tuple[str, int], entity: QuotaEntity, ops: dict[str, float | None],
                        validate_only: bool = False) -> tuple[int, str | None]:
    """Set (a value) or remove (None) quotas of one entity with AlterClientQuotas (kafka-python's
    encoder); the entry's (error code, message)."""
    entry = AlterClientQuotasRequest.EntryData(
        entity=[AlterClientQuotasRequest.EntryData.EntityData(entity_type=k, entity_name=v) for k, v in entity.items()],
        ops=[AlterClientQuotasRequest.EntryData.OpData(key=key, value=value or 0.0, remove=value is None)
             for key, value in ops.items()])
    with KafkaWire(address) as wire:
        response = wire.request(AlterClientQuotasRequest(entries=[entry], validate_only=validate_only), 1,
                                AlterClientQuotasResponse)
    (answer,) = response.entries
    return answer.error_code, answer.error_message


def describe_client_quotas(address: tuple[str, int], components: list[tuple[str, int, str | None]],
                           strict: bool = False) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    """{((entity type, name)...): {key: value}} of the entities a DescribeClientQuotas filter
    ((entity type, match type, match)...) matches."""
    request = DescribeClientQuotasRequest(components=[
        DescribeClientQuotasRequest.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components],
        strict=strict)
    with KafkaWire(address) as wire:
        response = wire.request(request, 1, DescribeClientQuotasResponse)
    assert response.error_code == 0, response.error_message
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {v.key: v.value for v in entry.values}
            for entry in response.entries}
