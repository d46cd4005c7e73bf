"""Partitions hosted by this broker: produce into them, fetch from them, wait for new data.

The ReplicaManager owns the ``Partition`` objects; the handlers of the server call it, and the
controller tells it which partitions to lead. Everything runs on the broker's event loop thread,
so no lock is needed; a Log is only touched through its Partition.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from minikafka.storage.errors import (
    InvalidProducerEpochError,
    KafkaStorageError,
    NoLiveLogDirError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
)
from minikafka.storage.log import AppendResult, FileSlice, Log, LogConfig
from minikafka.storage.log_manager import LogManager
from minikafka.waits import client_gone, wait_released
from protocol.errors import ErrorCode
from protocol.records import CorruptRecordError, UnsupportedMagic

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


def now_ms() -> int:
    return int(time.time() * 1000)


class Partition:
    """One partition replica on this broker: its log, leader epoch and high watermark.

    With one replica (the embedded mode) the leader is the whole ISR, so the high watermark
    follows the log end offset after every append.
    """

    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, leader_epoch: int, log_: Log) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.leader_epoch = leader_epoch
        self.log = log_
        self.log.high_watermark = self.log.log_end_offset

    def append(self, records: bytes, now: int) -> AppendResult:
        """Append as leader and move the high watermark to the new log end."""
        result = self.log.append_as_leader(records, self.leader_epoch, now)
        self.log.high_watermark = self.log.log_end_offset
        return result

    def check_epoch(self, current_leader_epoch: int) -> ErrorCode:
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch > self.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.FENCED_LEADER_EPOCH


@dataclass
class ProduceResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@dataclass
class FetchRequestPartition:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1


@dataclass
class FetchResultPartition:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    records: FileSlice | None = None

    @property
    def size(self) -> int:
        return self.records.size if self.records is not None else 0


@dataclass
class ListOffsetResult:
    error: ErrorCode = ErrorCode.NONE
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


@dataclass
class _Waiters:
    futures: set[asyncio.Future[None]] = field(default_factory=set)


class ReplicaManager:
    """Owns the partitions this broker hosts, the long-poll waits on them, and the offline
    replicas: partitions this broker should host whose data is on a failed (or replaced) log
    dir.  Those answer KAFKA_STORAGE_ERROR until a restart finds their data again."""

    def __init__(self, broker_id: int, log_manager: LogManager) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.partitions: dict[TopicPartition, Partition] = {}
        self.offline_partitions: dict[TopicPartition, str] = {}  # -> why, for operators
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        # Topics only the broker itself writes (the group coordinator's __consumer_offsets).
        self.internal_topics: frozenset[str] = frozenset()

    # --- leadership -------------------------------------------------------------------------
    def become_leader(self, topic: str, index: int, topic_id: uuid.UUID, leader_epoch: int,
                      config: LogConfig, *, is_new_replica: bool = True) -> Partition | None:
        """Lead the partition; None when its replica is offline.

        A replica that is not new (it was created before) and is not in any live log dir lost
        its data with a failed or replaced dir: it goes offline instead of being re-created
        empty, which would hide the loss (KIP-112's isNewReplica).
        """
        key = (topic, index)
        partition = self.partitions.get(key)
        if partition is None:
            if key in self.offline_partitions:
                return None
            if self.log_manager.get_log(topic, index) is None and not is_new_replica:
                self._set_offline(key, "its data is in no live log dir")
                return None
            log_ = self._get_or_create_log(topic, index, topic_id, config)
            if log_ is None:
                return None
            partition = Partition(topic, index, topic_id, leader_epoch, log_)
            self.partitions[key] = partition
        # A log loaded at startup was opened with the broker's defaults; the topic's configs count.
        partition.log.update_config(config)
        partition.leader_epoch = max(partition.leader_epoch, leader_epoch)
        # A no-op when the log already knows this epoch (a restart), news otherwise.
        partition.log.assign_epoch(partition.leader_epoch, partition.log.log_end_offset)
        return partition

    def _get_or_create_log(self, topic: str, index: int, topic_id: uuid.UUID, config: LogConfig) -> Log | None:
        # A dir failing under the creation is offline at once, so the retry picks another one.
        for _ in self.log_manager.log_dirs:
            try:
                return self.log_manager.get_or_create_log(topic, index, topic_id, config)
            except KafkaStorageError as exc:
                log.warning("creating %s-%d in %s failed: %s", topic, index, exc.log_dir, exc)
            except NoLiveLogDirError:
                break
        self._set_offline((topic, index), "no live log dir could create it")
        return None

    def _set_offline(self, key: TopicPartition, why: str) -> None:
        self.offline_partitions[key] = why
        self._wake(key)

    def take_offline(self, keys: Iterable[TopicPartition], why: str) -> list[TopicPartition]:
        """Stop serving these partitions (their dir failed): they answer KAFKA_STORAGE_ERROR
        from now on and every request waiting on them is answered now.  Returns those that
        were online."""
        stopped = []
        for key in keys:
            if self.partitions.pop(key, None) is not None:
                stopped.append(key)
            self._set_offline(key, why)
        return stopped

    def is_offline(self, topic: str, index: int) -> bool:
        return (topic, index) in self.offline_partitions

    def _absent(self, key: TopicPartition) -> ErrorCode:
        """The error for a partition this broker does not serve."""
        if key in self.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def update_config(self, topic: str, config: LogConfig) -> None:
        for (name, _), partition in self.partitions.items():
            if name == topic:
                partition.log.update_config(config)

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def remove_partition(self, topic: str, index: int) -> None:
        """Stop hosting the partition (its topic was deleted): requests waiting on it are answered
        now, and its log is renamed for deletion at once; its files go after file.delete.delay.ms."""
        key = (topic, index)
        self.partitions.pop(key, None)
        self.offline_partitions.pop(key, None)
        self._wake(key)
        try:
            self.log_manager.delete_log(topic, index)
        except KafkaStorageError as exc:
            log.error("could not delete the log of %s-%d: %s", topic, index, exc)

    def delete_records(self, topic: str, index: int, offset: int, *, internal: bool = False) -> tuple[ErrorCode, int]:
        """DeleteRecords: move the log start offset up to ``offset`` (-1: the high watermark).
        Returns (error, low watermark). Internal topics are only trimmed by the broker itself."""
        if topic in self.internal_topics and not internal:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, -1
        partition = self.partitions.get((topic, index))
        if partition is None:
            return self._absent((topic, index)), -1
        log_ = partition.log
        target = log_.high_watermark if offset == -1 else offset
        if not 0 <= target <= log_.high_watermark:
            return ErrorCode.OFFSET_OUT_OF_RANGE, -1
        try:
            return ErrorCode.NONE, log_.delete_records_before(target)
        except KafkaStorageError:
            return ErrorCode.KAFKA_STORAGE_ERROR, -1

    def replace_log(self, topic: str, index: int, new_log: Log) -> None:
        """Serve the partition from ``new_log`` from now on: the LogDirMover swapped a moved
        copy in (on the event loop, between two appends, so nothing is lost or reordered)."""
        partition = self.partitions.get((topic, index))
        if partition is not None:
            partition.log = new_log

    # --- produce ----------------------------------------------------------------------------
    def append(self, topic: str, index: int, records: bytes | None, now: int, *,
               internal: bool = False) -> ProduceResult:
        """Append as leader; only the broker's own (``internal``) writes may go to internal topics."""
        if topic in self.internal_topics and not internal:
            return ProduceResult(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 error_message=f"cannot append to internal topic {topic}")
        partition = self.partitions.get((topic, index))
        if partition is None:
            return ProduceResult(self._absent((topic, index)), error_message=self.offline_partitions.get((topic, index)))
        if not records:
            return ProduceResult(ErrorCode.CORRUPT_MESSAGE, error_message="empty record set")
        try:
            self.log_manager.verify_dir(partition.log.log_dir)
            result = partition.append(records, now)
        except CorruptRecordError as exc:
            return ProduceResult(ErrorCode.CORRUPT_MESSAGE, error_message=str(exc))
        except UnsupportedMagic as exc:
            return ProduceResult(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, error_message=str(exc))
        except OutOfOrderSequenceError as exc:
            return ProduceResult(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, error_message=str(exc))
        except InvalidProducerEpochError as exc:
            return ProduceResult(ErrorCode.INVALID_PRODUCER_EPOCH, error_message=str(exc))
        except RecordTooLargeError as exc:
            return ProduceResult(ErrorCode.MESSAGE_TOO_LARGE, error_message=str(exc))
        except KafkaStorageError as exc:
            return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR, error_message=str(exc))
        self._wake((topic, index))
        return ProduceResult(ErrorCode.NONE, result.base_offset, result.log_append_time_ms, result.log_start_offset)

    # --- fetch ------------------------------------------------------------------------------
    async def fetch(self, requests: list[FetchRequestPartition], max_wait_ms: int, min_bytes: int,
                    max_bytes: int) -> list[FetchResultPartition]:
        """Read every requested partition; wait (up to max_wait_ms) until min_bytes are available.

        The caller owns the FileSlices of the result and must close them.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(max_wait_ms, 0) / 1000
        while True:
            results = self._read(requests, max_bytes)
            total = sum(r.size for r in results)
            remaining = deadline - loop.time()
            if (total >= min_bytes or remaining <= 0 or not requests or client_gone()
                    or any(r.error != ErrorCode.NONE for r in results)):
                return results
            for r in results:
                if r.records is not None:
                    r.records.close()
            await self._wait_for_data([(r.topic, r.partition) for r in requests], remaining)

    def _read(self, requests: list[FetchRequestPartition], max_bytes: int) -> list[FetchResultPartition]:
        results: list[FetchResultPartition] = []
        budget = max_bytes
        verified: set[str] = set()  # one stat per log dir per pass, not one per partition
        for request in requests:
            result = FetchResultPartition()
            results.append(result)
            partition = self.partitions.get((request.topic, request.partition))
            if partition is None:
                result.error = self._absent((request.topic, request.partition))
                continue
            result.error = partition.check_epoch(request.current_leader_epoch)
            if result.error != ErrorCode.NONE:
                continue
            log_ = partition.log
            result.high_watermark = log_.high_watermark
            result.log_start_offset = log_.log_start_offset
            if budget <= 0:
                continue
            try:
                if log_.log_dir not in verified:
                    self.log_manager.verify_dir(log_.log_dir)
                    verified.add(log_.log_dir)
                read = log_.read(request.fetch_offset, min(request.max_bytes, budget),
                                 max_offset=log_.high_watermark, min_one_batch=budget == max_bytes)
            except OffsetOutOfRangeError:
                result.error = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            except KafkaStorageError:
                result.error = ErrorCode.KAFKA_STORAGE_ERROR
                result.high_watermark = result.log_start_offset = -1
                continue
            result.records = read.records
            budget -= result.size
        return results

    async def _wait_for_data(self, tps: Iterable[TopicPartition], timeout: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(tps)
        for tp in keys:
            self._waiters.setdefault(tp, set()).add(future)
        try:
            await wait_released(future, timeout)
        finally:
            for tp in keys:
                waiters = self._waiters.get(tp)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiters[tp]

    def _wake(self, tp: TopicPartition) -> None:
        waiters = self._waiters.pop(tp, None)
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    # --- offsets ----------------------------------------------------------------------------
    def list_offset(self, topic: str, index: int, timestamp: int, current_leader_epoch: int = -1) -> ListOffsetResult:
        partition = self.partitions.get((topic, index))
        if partition is None:
            return ListOffsetResult(self._absent((topic, index)))
        error = partition.check_epoch(current_leader_epoch)
        if error != ErrorCode.NONE:
            return ListOffsetResult(error)
        log_ = partition.log
        try:
            if timestamp == LATEST_TIMESTAMP:
                return ListOffsetResult(offset=log_.high_watermark, leader_epoch=partition.leader_epoch)
            if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                return ListOffsetResult(offset=log_.log_start_offset, leader_epoch=log_.epoch_for_offset(log_.log_start_offset))
            if timestamp == LATEST_TIERED_TIMESTAMP:
                return ListOffsetResult(offset=-1)
            if timestamp == MAX_TIMESTAMP:
                found = log_.max_timestamp_offset()
            elif timestamp < 0:
                return ListOffsetResult(ErrorCode.INVALID_REQUEST)
            else:
                found = log_.offset_for_timestamp(timestamp)
        except KafkaStorageError:
            return ListOffsetResult(ErrorCode.KAFKA_STORAGE_ERROR)
        if found is None or found[0] >= log_.high_watermark:
            return ListOffsetResult(timestamp=-1, offset=-1)
        offset, found_ts = found
        return ListOffsetResult(timestamp=found_ts, offset=offset, leader_epoch=log_.epoch_for_offset(offset))

    def end_offset_for_epoch(self, topic: str, index: int, epoch: int,
                             current_leader_epoch: int = -1) -> tuple[ErrorCode, int, int]:
        partition = self.partitions.get((topic, index))
        if partition is None:
            return self._absent((topic, index)), -1, -1
        error = partition.check_epoch(current_leader_epoch)
        if error != ErrorCode.NONE:
            return error, -1, -1
        try:
            found_epoch, end_offset = partition.log.end_offset_for_epoch(epoch)
        except KafkaStorageError:
            return ErrorCode.KAFKA_STORAGE_ERROR, -1, -1
        return ErrorCode.NONE, found_epoch, end_offset
