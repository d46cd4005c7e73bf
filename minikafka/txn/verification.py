"""KIP-890's verification: before a partition leader takes the first batch of a transaction in a
partition, it asks the transaction's coordinator whether the partition is in that transaction.

Without it, a batch that arrives late (after its transaction was aborted, or from a producer
that never added the partition) opens a transaction nobody will end, and read_committed
consumers of the partition stop at it for good. ``TxnVerifier`` asks the coordinators of other
brokers over the broker's inter-broker connections (AddPartitionsToTxn v4, verify_only) and this
broker's own coordinator directly; the Produce handler is its only caller. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable

from minikafka.metadata.cache import MetadataCache
from minikafka.metadata.topics import TRANSACTION_STATE_TOPIC
from minikafka.net.client import BrokerConnections, BrokerUnreachable
from minikafka.replica.replica_manager import ReplicaManager
from minikafka.txn.coordinator import TransactionCoordinator
from minikafka.txn.state import by_topic
from protocol.errors import ErrorCode
from protocol.records import CorruptRecordError, iter_batches

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
ADD_PARTITIONS_TO_TXN = 24
VERIFY_VERSION = 4
# Coordinator errors a producer would not retry as they are: Kafka answers them as
# NOT_ENOUGH_REPLICAS, which every client retries without a metadata refresh.
_RETRIABLE = {ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
              ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}


def _for_producer(error: ErrorCode) -> ErrorCode:
    if error in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH  # what producers expect from a Produce
    return error


class TxnVerifier:
    def __init__(self, broker_id: int, replica_manager: ReplicaManager, metadata: MetadataCache,
                 coordinator: TransactionCoordinator, brokers: BrokerConnections, enabled: Callable[[], bool],
                 timeout_s: float = 30.0) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.metadata = metadata
        self.coordinator = coordinator
        self.brokers = brokers
        self.enabled = enabled  # transaction.partition.verification.enable, which may change at runtime
        self.timeout_s = timeout_s
        # transactional id -> the append phase of its latest Produce request, until it has appended
        self._appending: dict[str, asyncio.Future[None]] = {}

    @contextlib.asynccontextmanager
    async def appends_in_order(self, transactional_id: str) -> AsyncIterator[None]:
        """The append phase of one Produce request of a transactional producer, entered only once
        that producer's earlier requests have appended.

        A request whose first batch in a partition waits for its coordinator must not be
        overtaken by a later request of the same producer, pipelined on its connection, whose
        batch no longer needs verification (the transaction opened meanwhile): the later batch
        would reach the log first and fail on its sequence number. Kafka keeps that order by
        reading no further request from a connection until it has answered the last."""
        earlier = self._appending.get(transactional_id)
        mine = self._appending[transactional_id] = asyncio.get_running_loop().create_future()
        try:
            if earlier is not None:
                await asyncio.shield(earlier)
            yield
        finally:
            mine.set_result(None)
            if self._appending.get(transactional_id) is mine:
                del self._appending[transactional_id]

    def unverified(self, topic: str, index: int, records: bytes | memoryview | None) -> tuple[int, int] | None:
        """(producer id, epoch) of a transactional batch that would open its producer's
        transaction in this partition, led here; None when there is nothing to verify."""
        if not self.enabled() or not records:
            return None
        try:
            _, header = next(iter_batches(records))
        except (StopIteration, CorruptRecordError):
            return None  # the append refuses it
        if not header.is_transactional or header.producer_id < 0:
            return None
        partition = self.replica_manager.get_partition(topic, index)
        if partition is None or not partition.is_leader:
            return None
        entry = partition.log.producer_state.producers.get(header.producer_id)
        if entry is not None and entry.epoch == header.producer_epoch and entry.current_txn_first_offset >= 0:
            return None  # its transaction is open here already
        return header.producer_id, header.producer_epoch

    async def verify(self, transactional_id: str, producer_id: int, epoch: int,
                     partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[ErrorCode, object | None]]:
        """Per partition: NONE and the token to append with, or the error to answer the producer."""
        wanted = list(partitions)
        tokens = {tp: self.replica_manager.begin_verification(*tp, producer_id) for tp in wanted}
        state = self.metadata.partition(TRANSACTION_STATE_TOPIC, self.coordinator.partition_for(transactional_id))
        if state is None or not state.available:
            errors = dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif state.leader == self.broker_id:
            errors = self.coordinator.verify(transactional_id, producer_id, epoch, wanted)
        else:
            errors = await self._verify_at(state.leader, transactional_id, producer_id, epoch, wanted)
        return {tp: (_for_producer(errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)), tokens[tp]) for tp in wanted}

    async def _verify_at(self, coordinator: int, transactional_id: str, producer_id: int, epoch: int,
                         partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        client = self.brokers.get(coordinator)
        if client is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        body = {"transactions": [{
            "transactional_id": transactional_id, "producer_id": producer_id, "producer_epoch": epoch,
            "verify_only": True,
            "topics": [{"name": name, "partitions": indexes} for name, indexes in by_topic(partitions).items()]}]}
        try:
            response = await client.request(ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, body, self.timeout_s)
        except BrokerUnreachable as exc:
            log.warning("could not verify transaction %s with its coordinator, broker %d: %s", transactional_id,
                        coordinator, exc)
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        if response.error_code != ErrorCode.NONE:
            return dict.fromkeys(partitions, ErrorCode(response.error_code))
        errors: dict[TopicPartition, ErrorCode] = {}
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for partition in topic.results_by_partition:
                    errors[(topic.name, partition.partition_index)] = ErrorCode(partition.partition_error_code)
        return errors
