"""What a transaction coordinator knows of one transactional id, its state machine, and how it
is written to __transaction_state (Kafka's TransactionLogKey and TransactionLogValue).

Plain values and pure functions; anyone may use them.
"""

from __future__ import annotations

import enum
import io
from collections.abc import Iterable
from dataclasses import dataclass, replace

from minikafka.coordinator.records import RecordFormatError, VersionedSchema, offsets_partition_for
from protocol.schema import Field

TopicPartition = tuple[str, int]


def by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """{topic: its partition indexes}, as the transaction APIs list partitions."""
    topics: dict[str, list[int]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(index)
    return topics
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767


class TxnState(enum.IntEnum):
    """Kafka's transaction states, with the ids written to __transaction_state."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """As DescribeTransactions and ListTransactions name it."""
        return "".join(part.capitalize() for part in self.name.split("_"))


# Which state may follow which (Kafka's TransactionState.validPreviousStates, read the other way).
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.DEAD}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                                 TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.COMPLETE_COMMIT}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.COMPLETE_ABORT}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.DEAD}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.DEAD}),
    TxnState.DEAD: frozenset(),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.PREPARE_ABORT}),
}
PREPARING = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE})
COMPLETED = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


class IllegalTransition(ValueError):
    """A state change the state machine does not allow (a bug in the caller)."""


@dataclass(frozen=True)
class TxnMetadata:
    """One transactional id's state, as last written to __transaction_state. Immutable: a change
    is a new value (``transition``), written before it is taken."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    last_update_ms: int = -1
    # KIP-360: the id and epoch before the last bump, so that a retried InitProducerId is answered
    # with the same result.
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def transition(self, state: TxnState, now_ms: int, **changes: object) -> TxnMetadata:
        if state not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"transaction {self.transactional_id}: {self.state.name} cannot become {state.name}")
        return replace(self, state=state, last_update_ms=now_ms, **changes)  # type: ignore[arg-type]

    def with_partitions(self, added: frozenset[TopicPartition], now_ms: int) -> TxnMetadata:
        """Ongoing, with ``added`` among its partitions (a new transaction starts its clock)."""
        start = self.start_ms if self.state == TxnState.ONGOING else now_ms
        return self.transition(TxnState.ONGOING, now_ms, partitions=self.partitions | added, start_ms=start)


# ---- the record format of __transaction_state -----------------------------------------------------

TXN_LOG_KEY = VersionedSchema("TransactionLogKey", "0", "none", [Field("transactional_id", "string", "0")])
TXN_LOG_VALUE = VersionedSchema("TransactionLogValue", "0-1", "1+", [
    Field("producer_id", "int64", "0+"),
    Field("previous_producer_id", "int64", "1+", tag=0, tagged_versions="1+", default=-1),
    Field("next_producer_id", "int64", "1+", tag=1, tagged_versions="1+", default=-1),
    Field("producer_epoch", "int16", "0+"),
    Field("transaction_timeout_ms", "int32", "0+"),
    Field("transaction_status", "int8", "0+"),
    Field("transaction_partitions", "[]PartitionsSchema", "0+", nullable="0+", fields=[
        Field("topic", "string", "0+"),
        Field("partition_ids", "[]int32", "0+"),
    ]),
    Field("transaction_last_update_timestamp_ms", "int64", "0+"),
    Field("transaction_start_timestamp_ms", "int64", "0+"),
    Field("client_transaction_version", "int16", "1+", tag=2, tagged_versions="1+", default=0),
])
# Written: version 0, which every Kafka tool reads (version 1 only adds tagged fields).
TXN_VALUE_VERSION = 0


def encode_txn_key(transactional_id: str) -> bytes:
    return TXN_LOG_KEY.encode(0, {"transactional_id": transactional_id})


def encode_txn_value(metadata: TxnMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(metadata.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return TXN_LOG_VALUE.encode(TXN_VALUE_VERSION, {
        "producer_id": metadata.producer_id, "producer_epoch": metadata.producer_epoch,
        "transaction_timeout_ms": metadata.timeout_ms, "transaction_status": int(metadata.state),
        "transaction_partitions": [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()],
        "transaction_last_update_timestamp_ms": metadata.last_update_ms,
        "transaction_start_timestamp_ms": metadata.start_ms})


def decode_txn_key(data: bytes) -> str:
    version, stream = _version(data, "transaction log key")
    return str(TXN_LOG_KEY.decode_body(version, stream).transactional_id)


def decode_txn_value(transactional_id: str, data: bytes) -> TxnMetadata:
    version, stream = _version(data, "transaction log value")
    body = TXN_LOG_VALUE.decode_body(version, stream)
    try:
        state = TxnState(body.transaction_status)
    except ValueError:
        raise RecordFormatError(f"unknown transaction state {body.transaction_status}") from None
    partitions = frozenset((p.topic, i) for p in body.transaction_partitions or [] for i in p.partition_ids)
    return TxnMetadata(transactional_id, body.producer_id, body.producer_epoch, body.transaction_timeout_ms, state,
                       partitions, body.transaction_start_timestamp_ms, body.transaction_last_update_timestamp_ms,
                       body.get("previous_producer_id", NO_PRODUCER_ID))


def _version(data: bytes, what: str) -> tuple[int, io.BytesIO]:
    if len(data) < 2:
        raise RecordFormatError(f"{what} of {len(data)} bytes has no version")
    stream = io.BytesIO(data)
    return int.from_bytes(stream.read(2), "big", signed=True), stream


def state_partition_for(transactional_id: str, partition_count: int) -> int:
    """The __transaction_state partition of a transactional id, as Kafka computes it (the same
    rule as a group's __consumer_offsets partition)."""
    return offsets_partition_for(transactional_id, partition_count)

