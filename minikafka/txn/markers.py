"""Transaction markers, from the coordinator to the partitions of a transaction.

``TxnMarkerWriter`` writes the marker that ends a transaction in each of its partitions: at the partition's leader,
here through the ReplicaManager, elsewhere with a WriteTxnMarkers request over the broker's
inter-broker connections (the same code answers that request when another broker's coordinator
sends it). A marker is appended as acks=all (it
must be on every in-sync replica before the transaction may be recorded complete), and a marker
in __consumer_offsets also tells the group coordinator that the transaction's offsets count now,
or go. The TransactionCoordinator is its only caller, with the WriteTxnMarkers handler.

Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Protocol

from minikafka.metadata.cache import MetadataCache
from minikafka.metadata.topics import OFFSETS_TOPIC
from minikafka.net.client import BrokerConnections, BrokerUnreachable
from minikafka.replica.replica_manager import ReplicaManager, now_ms
from minikafka.txn.state import by_topic
from protocol.errors import ErrorCode
from protocol.record_codec import ControlMarker

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
WRITE_TXN_MARKERS = 27
WRITE_TXN_MARKERS_VERSION = 1


class TxnOffsets(Protocol):
    """The group coordinator, as the markers see it: txn/ and group/ are siblings, neither
    imports the other; the broker hands its GroupCoordinator in."""

    def complete_txn(self, partition: int, producer_id: int, committed: bool) -> None: ...


class TxnMarkerWriter:
    def __init__(self, broker_id: int, replica_manager: ReplicaManager, metadata: MetadataCache,
                 groups: TxnOffsets, brokers: BrokerConnections, timeout_ms: int = 30_000) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.metadata = metadata
        self.groups = groups
        self.brokers = brokers
        self.timeout_ms = timeout_ms

    async def write_markers(self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                            partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Write the transaction's marker in each partition, at its leader; the error of each."""
        by_leader: dict[int, list[TopicPartition]] = {}
        errors: dict[TopicPartition, ErrorCode] = {}
        for tp in partitions:
            state = self.metadata.partition(*tp)
            if state is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if self.metadata.topic(tp[0]) is None \
                    else ErrorCode.NOT_LEADER_OR_FOLLOWER
            elif not state.available:
                errors[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                by_leader.setdefault(state.leader, []).append(tp)
        marker = ControlMarker(not committed, coordinator_epoch)
        answers = await asyncio.gather(*(
            self.write_here(producer_id, producer_epoch, marker, tps) if leader == self.broker_id
            else self._write_at(leader, producer_id, producer_epoch, marker, tps)
            for leader, tps in by_leader.items()))
        for answer in answers:
            errors.update(answer)
        return errors

    async def write_here(self, producer_id: int, producer_epoch: int, marker: ControlMarker,
                         partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Append the marker to the partitions this broker leads and wait until their in-sync
        replicas hold it (WriteTxnMarkers, from any coordinator)."""
        now = now_ms()
        appended = {tp: self.replica_manager.append_marker(*tp, producer_id, producer_epoch, marker, now)
                    for tp in partitions}
        waits = [self.replica_manager.wait_for_replication(*tp, result, self.timeout_ms)
                 for tp, result in appended.items() if result.error == ErrorCode.NONE]
        await asyncio.gather(*waits)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("producer %d (epoch %d): %s markers at %s", producer_id, producer_epoch,
                      "ABORT" if marker.aborted else "COMMIT",
                      {tp: result.base_offset if result.error == ErrorCode.NONE else result.error.name
                       for tp, result in appended.items()})
        for (topic, index), result in appended.items():
            if topic == OFFSETS_TOPIC and result.error == ErrorCode.NONE:
                self.groups.complete_txn(index, producer_id, not marker.aborted)
        return {tp: result.error for tp, result in appended.items()}

    async def _write_at(self, leader: int, producer_id: int, producer_epoch: int, marker: ControlMarker,
                        partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        client = self.brokers.get(leader)
        if client is None:
            return dict.fromkeys(partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        body = {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": not marker.aborted,
            "topics": [{"name": name, "partition_indexes": indexes} for name, indexes in by_topic(partitions).items()],
            "coordinator_epoch": marker.coordinator_epoch}]}
        try:
            response = await client.request(WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body,
                                            self.timeout_ms / 1000 + 5)
        except BrokerUnreachable as exc:
            log.debug("transaction markers to broker %d: %s", leader, exc)
            return dict.fromkeys(partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        errors = dict.fromkeys(partitions, ErrorCode.UNKNOWN_SERVER_ERROR)
        for result in response.markers:
            for topic in result.topics:
                for partition in topic.partitions:
                    errors[(topic.name, partition.partition_index)] = ErrorCode(partition.error_code)
        return errors
