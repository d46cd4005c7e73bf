"""The coordinators' storage: the internal topics __consumer_offsets (the group coordinator)
and __transaction_state (the transaction coordinator).

`CoordinatorTopic` turns coordinator writes (key/value pairs in Kafka's formats) into
uncompressed record batches appended to a partition of its topic, and reads a partition back
at startup or when this broker becomes its leader. Both topics are compacted, as Kafka's
(cleanup.policy=compact): the log cleaner keeps the latest record of each key, so a read
replays what is left, gaps and emptied batches included, to the same state. A transactional
offset commit (TxnOffsetCommit) goes into __consumer_offsets as a transactional batch of its
producer, and a read gives each record's producer and the transaction markers, so the group
coordinator applies it only once its transaction committed.

Event-loop thread only; the coordinators are its only callers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from minikafka.metadata.cache import MetadataCache
from minikafka.replica.replica_manager import ProduceResult, ReplicaManager, now_ms
from minikafka.storage.errors import OffsetOutOfRangeError
from protocol.errors import ErrorCode
from protocol.record_codec import ControlMarker, NewRecord, control_marker, decode_records, encode_batch
from protocol.records import BATCH_HEADER_SIZE, NO_PRODUCER_ID, NO_SEQUENCE, CorruptRecordError

log = logging.getLogger(__name__)

KeyValue = tuple[bytes, bytes | None]
READ_CHUNK_BYTES = 1 << 20
# Per-record bytes beyond key and value in a v2 batch, at most (length, attributes, deltas,
# key/value lengths, header count): used to cut large writes into batches that fit.
_RECORD_OVERHEAD = 24

# How append errors reach group clients: errors that mean "this coordinator cannot write
# now" make them look the coordinator up again; size errors are the commit's fault.
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,  # a transactional commit of a fenced producer
}


@dataclass(frozen=True, slots=True)
class LoggedRecord:
    """A record read back, with what its batch says: the producer of a transactional batch, or
    the transaction marker (then key and value are the marker's)."""

    key: bytes | None
    value: bytes | None
    producer_id: int = NO_PRODUCER_ID
    transactional: bool = False
    marker: ControlMarker | None = None


@dataclass(frozen=True, slots=True)
class TxnProducer:
    """The producer whose transaction a write belongs to."""

    producer_id: int
    producer_epoch: int


class CoordinatorTopic:
    """Reads and writes the partitions of one internal topic that this broker leads.

    The topic is created on first use (FindCoordinator asks the controller), with the
    configured partition count (``default_partitions``); after that its real count counts.
    """

    def __init__(self, replica_manager: ReplicaManager, metadata: MetadataCache, topic: str,
                 default_partitions: int) -> None:
        self.replica_manager = replica_manager
        self.metadata = metadata
        self.topic = topic
        self.default_partitions = default_partitions

    @property
    def exists(self) -> bool:
        return self.metadata.topic(self.topic) is not None

    @property
    def partition_count(self) -> int:
        topic = self.metadata.topic(self.topic)
        return self.default_partitions if topic is None else len(topic.partitions)

    def status(self, partition: int) -> ErrorCode:
        """NONE when the partition can be written; COORDINATOR_NOT_AVAILABLE otherwise."""
        if not self.exists:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        hosted = self.replica_manager.get_partition(self.topic, partition)
        if hosted is not None and not hosted.is_leader:
            return ErrorCode.NOT_COORDINATOR
        if hosted is None or hosted.log.closed:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.replica_manager.log_manager.failure_channel.is_offline(hosted.log.log_dir):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    def _max_batch_bytes(self, partition: int) -> int:
        hosted = self.replica_manager.get_partition(self.topic, partition)
        if hosted is None:
            return 1 << 20
        config = hosted.log.config
        return min(config.max_message_bytes, config.segment_bytes)

    def coordinator_epoch(self, partition: int) -> int:
        """This broker's leader epoch of the partition (-1: not hosted), the epoch of the
        coordinator that owns it."""
        hosted = self.replica_manager.get_partition(self.topic, partition)
        return -1 if hosted is None else hosted.leader_epoch

    def append(self, partition: int, records: Sequence[KeyValue], txn: TxnProducer | None = None) -> ErrorCode:
        """Append key/value records (value None: a tombstone); returns a coordinator error code.

        Records go in as few batches as the partition's max.message.bytes allows; a write that
        needs several batches is not atomic, which replay tolerates (last value wins). ``txn``:
        the records are part of that producer's transaction (transactional batches), refused
        from an epoch older than the partition has seen.
        """
        if not records:
            return ErrorCode.NONE
        status = self.status(partition)
        if status != ErrorCode.NONE:
            return status
        limit = self._max_batch_bytes(partition) - BATCH_HEADER_SIZE
        now = now_ms()
        chunk: list[NewRecord] = []
        size = 0
        for key, value in records:
            record_size = len(key) + (len(value) if value is not None else 0) + _RECORD_OVERHEAD
            if chunk and size + record_size > limit:
                error = self._append_batch(partition, chunk, now, txn)
                if error != ErrorCode.NONE:
                    return error
                chunk, size = [], 0
            chunk.append(NewRecord(key, value))
            size += record_size
        return self._append_batch(partition, chunk, now, txn)

    def _append_batch(self, partition: int, chunk: list[NewRecord], now: int, txn: TxnProducer | None) -> ErrorCode:
        batch = encode_batch(chunk, now) if txn is None else encode_batch(
            chunk, now, producer_id=txn.producer_id, producer_epoch=txn.producer_epoch, base_sequence=NO_SEQUENCE,
            transactional=True)
        result = self.replica_manager.append(self.topic, partition, batch, now, internal=True)
        if result.error != ErrorCode.NONE:
            log.warning("write to %s-%d failed: %s %s", self.topic, partition, result.error.name,
                        result.error_message or "")
            return _APPEND_ERRORS.get(result.error, ErrorCode.UNKNOWN_SERVER_ERROR)
        return ErrorCode.NONE

    async def replicated(self, partition: int, timeout_ms: int) -> ErrorCode:
        """Wait until every write so far to the partition is on all its in-sync replicas (a
        commit is acknowledged as acks=all, so a new coordinator finds it)."""
        hosted = self.replica_manager.get_partition(self.topic, partition)
        if hosted is None:
            return ErrorCode.NOT_COORDINATOR
        written = ProduceResult(last_offset=hosted.log.log_end_offset - 1)
        await self.replica_manager.wait_for_replication(self.topic, partition, written, timeout_ms)
        return _APPEND_ERRORS.get(written.error, written.error)

    def read(self, partition: int) -> Iterator[LoggedRecord]:
        """Every record of the partition from its log start to its end (a new leader's high
        watermark may still lag what the ISR holds, and every acknowledged write is there), the
        transaction markers among them."""
        hosted = self.replica_manager.get_partition(self.topic, partition)
        if hosted is None:
            return
        log_ = hosted.log
        offset = log_.log_start_offset
        while offset < log_.log_end_offset:
            try:
                result = log_.read(offset, READ_CHUNK_BYTES)
            except OffsetOutOfRangeError:
                return
            if result.records is None:
                return
            try:
                data = result.records.read_bytes()
            finally:
                result.records.close()
            advanced = offset
            try:
                for header, batch_records in decode_records(data):
                    if header.is_control:
                        marker = control_marker(header, batch_records)
                        if marker is not None and header.base_offset >= offset:
                            yield LoggedRecord(batch_records[0].key, batch_records[0].value, header.producer_id,
                                               True, marker)
                    else:
                        for record in batch_records:
                            if record.offset >= offset:
                                yield LoggedRecord(record.key, record.value, header.producer_id,
                                                   header.is_transactional)
                    advanced = header.last_offset + 1
            except CorruptRecordError as exc:
                log.error("%s-%d: unreadable data at offset %d (%s); the rest of the partition is skipped",
                          self.topic, partition, advanced, exc)
                return
            if advanced <= offset:
                return
            offset = advanced
