"""Partitions hosted by this broker: produce into them, fetch from them, wait for new data.

The ReplicaManager owns the ``Partition`` objects (partition.py); the handlers of the server call it, and the
controller tells it which partitions to lead. Everything runs on the broker's event loop thread,
so no lock is needed; a Log is only touched through its Partition.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

from minikafka.metadata.cache import MetadataCache, PartitionMetadata
from minikafka.replica.partition import IsrProposal, IsrProposer, Partition
from minikafka.replica.replica_selector import ClientMetadata, ReplicaSelector, ReplicaView
from minikafka.replica.replication_quota import REPLICATION_BYTES_OUT, ReplicationThrottles
from minikafka.replica.waits import client_gone, wait_released
from minikafka.storage.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    NoLiveLogDirError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    TransactionCoordinatorFencedError,
)
from minikafka.storage.log import AppendResult, FileSlice, Log, LogConfig
from minikafka.storage.log_manager import LogManager
from minikafka.storage.producer_state import ProducerEntry
from minikafka.storage.txn_index import AbortedTxn
from protocol.errors import ErrorCode
from protocol.record_codec import ControlMarker
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


# Why an append is refused, as Kafka's error codes.
_APPEND_ERRORS: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
    (UnsupportedMagic, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
    (OutOfOrderSequenceError, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH),
    (TransactionCoordinatorFencedError, ErrorCode.TRANSACTION_COORDINATOR_FENCED),
    (RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    (InvalidTimestampError, ErrorCode.INVALID_TIMESTAMP),
    (InvalidRecordError, ErrorCode.INVALID_RECORD),
    (KafkaStorageError, ErrorCode.KAFKA_STORAGE_ERROR),
)
_REFUSALS = tuple(kind for kind, _ in _APPEND_ERRORS)


@dataclass
class ProduceResult:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    last_offset: int = -1
    # (index of a record in its batch, why it was refused): Produce v8+'s record_errors.
    record_errors: list[tuple[int, str]] = field(default_factory=list)
    # The leadership the batches were appended under (Partition.leadership); None: not an append.
    appended_under: tuple[Partition, int] | None = None


@dataclass
class FetchRequestPartition:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    # A follower's fetch (replica id >= 0) reads up to the log end and tells the leader where
    # the follower is; a consumer's reads up to the high watermark, or with read_committed up
    # to the last stable offset (no transaction still open or undecided there).
    replica_id: int = -1
    read_committed: bool = False
    # Fetch v12+ (KIP-595's truncation on fetch): the epoch of the last batch the follower holds,
    # -1 when it sends none.
    last_fetched_epoch: int = -1


@dataclass
class FetchResultPartition:
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    log_start_offset: int = -1
    records: FileSlice | None = None
    # A follower's fetch of a throttled replica left out because the leader's throttle was spent.
    held_back: bool = False
    last_stable_offset: int = -1
    # read_committed: the aborted transactions with records from the fetch offset on, which the
    # consumer drops (None for other fetches).
    aborted_transactions: list[AbortedTxn] | None = None
    # KIP-392: the replica the consumer is to read from instead of this leader (no records then).
    preferred_read_replica: int = -1
    # A follower whose log diverged from this leader's: the (epoch, end offset) to truncate to,
    # from the leader's epochs (no records then).
    diverging_epoch: tuple[int, int] | None = None

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

    def __init__(self, broker_id: int, log_manager: LogManager, *, internal_topics: frozenset[str] = frozenset(),
                 metadata: MetadataCache | None = None, replica_selector: ReplicaSelector | None = None,
                 rebuild_missing_replicas: bool = False, propose_isr: IsrProposer | None = None,
                 on_replica_placed: Callable[[Partition], None] | None = None) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.partitions: dict[TopicPartition, Partition] = {}
        self.offline_partitions: dict[TopicPartition, str] = {}  # -> why, for operators
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        # Topics only the broker itself writes (the group coordinator's __consumer_offsets).
        self.internal_topics = internal_topics
        # How a leader's ISR change is recorded (cluster mode: through the controller, or a
        # conditional ZooKeeper write below inter.broker.protocol.version 2.7-IV2);
        # None accepts it at once (the embedded mode, where the ISR is the leader alone).
        self.propose_isr = propose_isr
        # What the cluster knows, to tell "not hosted here" (NOT_LEADER_OR_FOLLOWER) from "no such partition".
        self.metadata = metadata
        # Cluster mode: a replica that existed before but is in no log dir is re-created empty when
        # every dir is online (its disk was replaced; it is rebuilt from the leader, KIP-112). The
        # embedded broker has no other copy to rebuild from, so it never does that on its own.
        self.rebuild_missing_replicas = rebuild_missing_replicas
        # Told where each hosted replica's log is (created, opened or moved), to report it to the
        # controller (KIP-858).
        self.on_replica_placed = on_replica_placed
        # KIP-73: which replicas' replication is throttled, and at what rate (both directions).
        self.replication_throttles = ReplicationThrottles(broker_id)
        # KIP-392 (replica.selector.class): which replica a consumer naming its rack reads from;
        # None keeps every consumer on the leader.
        self.replica_selector = replica_selector

    # --- leadership ---------------------------------------------------------------------------
    def creating_many(self) -> AbstractAsyncContextManager[None]:
        """Replicas created inside are fsynced together when it closes (LogManager.creating_many)."""
        return self.log_manager.creating_many()

    async def prepare_new_logs(self, wanted: Sequence[tuple[str, int, uuid.UUID, int | None]]) -> None:
        """Inside ``creating_many``: the files of these new replicas' logs, given as (topic,
        partition, topic id, the leader epoch it leads in from the start or None), made side by
        side before they are created (LogManager.prepare_new_logs); those hosted or offline here
        are left alone."""
        await self.log_manager.prepare_new_logs([
            new for new in wanted if (new[0], new[1]) not in self.partitions
            and (new[0], new[1]) not in self.offline_partitions])

    def become_leader(self, topic: str, index: int, topic_id: uuid.UUID, leader_epoch: int,
                      config: LogConfig, *, is_new_replica: bool = True, isr: tuple[int, ...] = (),
                      replicas: tuple[int, ...] = (), partition_epoch: int = 0) -> Partition | None:
        """Lead the partition; None when its replica is offline. Without ``replicas`` this
        broker is the only replica (the embedded mode)."""
        partition = self._hosted(topic, index, topic_id, leader_epoch, config, is_new_replica)
        if partition is not None:
            partition.make_leader(leader_epoch, isr or (self.broker_id,), replicas or (self.broker_id,),
                                  partition_epoch, now_ms())
            partition.propose_isr = self.propose_isr
            self._wake((topic, index))
        return partition

    def metadata_follows(self, partitions: Iterable[Partition]) -> None:
        """The metadata cache takes the leaderships just given where they are newer than the
        cache's, one update a topic: the controller's UpdateMetadata saying the same comes a
        moment after its LeaderAndIsr, and meanwhile this broker's Metadata answers and KIP-951
        hints named the leader before (in a rolling restart, the stopping broker itself)."""
        if self.metadata is None:
            return
        by_topic: dict[tuple[str, uuid.UUID], dict[int, PartitionMetadata]] = {}
        for p in partitions:
            by_topic.setdefault((p.topic, p.topic_id), {})[p.index] = PartitionMetadata(
                p.leader_id, p.leader_epoch, p.replicas, p.isr)
        for (topic, topic_id), states in by_topic.items():
            self.metadata.advance_partitions(topic, topic_id, states)

    def become_follower(self, topic: str, index: int, topic_id: uuid.UUID, leader_epoch: int,
                        config: LogConfig, *, leader_id: int, is_new_replica: bool, isr: tuple[int, ...],
                        replicas: tuple[int, ...], partition_epoch: int) -> Partition | None:
        """Follow ``leader_id``; None when the replica is offline. The fetchers truncate the log
        to what the leader has before they fetch."""
        partition = self._hosted(topic, index, topic_id, leader_epoch, config, is_new_replica)
        if partition is not None:
            partition.make_follower(leader_id, leader_epoch, isr, replicas, partition_epoch)
            # Producers and consumers waiting on the old leader get NOT_LEADER_OR_FOLLOWER now.
            self._wake((topic, index))
        return partition

    def _hosted(self, topic: str, index: int, topic_id: uuid.UUID, leader_epoch: int, config: LogConfig,
                is_new_replica: bool) -> Partition | None:
        """The partition's replica on this broker, opened or created as needed.

        A replica that is not new (it was created before) and is not in any live log dir lost
        its data with a failed or replaced dir: it goes offline instead of being re-created
        empty, which would hide the loss (KIP-112's isNewReplica).
        """
        key = (topic, index)
        partition = self.partitions.get(key)
        if partition is None:
            if key in self.offline_partitions:
                return None
            if self.log_manager.get_log(topic, index) is None and not is_new_replica and not (
                    self.rebuild_missing_replicas and not self.log_manager.failure_channel.offline_dirs):
                self._set_offline(key, "its data is in no live log dir")
                return None
            log_ = self._get_or_create_log(topic, index, topic_id, config)
            if log_ is None:
                return None
            partition = Partition(topic, index, topic_id, leader_epoch, log_, self.broker_id)
            self.partitions[key] = partition
        # A log loaded at startup was opened with the broker's defaults; the topic's configs count.
        partition.log.update_config(config)
        if self.on_replica_placed is not None:
            self.on_replica_placed(partition)
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

    def resign_leaderships(self) -> list[TopicPartition]:
        """Stop leading every partition (this broker can no longer confirm it leads them: its
        ZooKeeper session expired); they answer NOT_LEADER_OR_FOLLOWER until the controller says
        otherwise. Returns those that were led."""
        resigned = []
        for key, partition in self.partitions.items():
            if partition.is_leader:
                partition.resign()
                self._wake(key)
                resigned.append(key)
        return resigned

    def is_offline(self, topic: str, index: int) -> bool:
        return (topic, index) in self.offline_partitions

    def _absent(self, key: TopicPartition) -> ErrorCode:
        """The error for a partition this broker does not serve."""
        if key in self.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self.metadata is not None and self.metadata.partition(*key) is not None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def _leader(self, key: TopicPartition) -> tuple[Partition | None, ErrorCode]:
        """The partition if this broker leads it, else why not."""
        partition = self.partitions.get(key)
        if partition is None:
            return None, self._absent(key)
        if not partition.is_leader:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition, ErrorCode.NONE

    def _replica(self, key: TopicPartition) -> tuple[Partition | None, ErrorCode]:
        """The partition if this broker leads or follows it, else why not."""
        partition = self.partitions.get(key)
        if partition is None:
            return None, self._absent(key)
        if partition.role is None:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition, ErrorCode.NONE

    def _preferred_read_replica(self, partition: Partition, fetch_offset: int, client: ClientMetadata,
                                now: int) -> int:
        """The follower the replica selector sends this consumer to, or -1 (the leader itself).
        Only in-sync followers that hold the fetch offset are offered (one out of the ISR may lag
        for ever), and only those the consumer can reach on its listener, as Kafka does."""
        if self.replica_selector is None or self.metadata is None:
            return -1
        views = []
        for broker_id, state in partition.followers.items():
            endpoint = self.metadata.broker(broker_id, client.listener)
            if endpoint is None or broker_id not in partition.isr or state.log_end_offset < fetch_offset:
                continue
            views.append(ReplicaView(broker_id, endpoint.rack, state.log_end_offset, now - state.last_caught_up_ms))
        own = self.metadata.broker(self.broker_id, client.listener)
        leader = ReplicaView(self.broker_id, own.rack if own is not None else None, partition.log.log_end_offset, 0)
        chosen = self.replica_selector.select(client, leader, [leader, *views])
        return -1 if chosen == leader else chosen.broker_id

    def follower_high_watermark_moved(self, partition: Partition) -> None:
        """Consumers waiting on a follower (KIP-392) may read up to its new high watermark."""
        self._wake((partition.topic, partition.index))

    def stop_replica(self, topic: str, index: int, delete: bool) -> None:
        """Stop serving the replica (StopReplica); with ``delete``, its log goes too."""
        if delete:
            self.remove_partition(topic, index)
            return
        key = (topic, index)
        self.partitions.pop(key, None)
        self._wake(key)

    def update_config(self, topic: str, config: LogConfig) -> None:
        for (name, _), partition in self.partitions.items():
            if name == topic:
                partition.log.update_config(config)

    def active_producers(self, topic: str, index: int) -> tuple[list[ProducerEntry], ErrorCode]:
        """The producers with state in a partition this broker leads (KIP-664), or why not."""
        partition, error = self._leader((topic, index))
        return (partition.active_producers(), error) if partition is not None else ([], error)

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def replica_topic_ids(self) -> dict[TopicPartition, uuid.UUID]:
        """The topic id of every replica here: hosted, or a log found at startup not hosted yet."""
        found = {key: log_.topic_id for key, log_ in self.log_manager.logs.items()}
        found.update({key: partition.topic_id for key, partition in self.partitions.items()})
        return found

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
        partition, error = self._leader((topic, index))
        if partition is None:
            return error, -1
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
            if self.on_replica_placed is not None:
                self.on_replica_placed(partition)

    # --- produce ----------------------------------------------------------------------------
    def append(self, topic: str, index: int, records: bytes | memoryview | None, now: int, *,
               internal: bool = False, acks: int = 1, verified: tuple[int, object] | None = None) -> ProduceResult:
        """Append as leader; only the broker's own (``internal``) writes may go to internal topics.
        With ``acks`` -1 the ISR must hold min.insync.replicas first (the caller then waits
        for the high watermark with ``wait_for_replication``). ``verified``: (producer id, token
        of ``begin_verification``) of a transaction's first batch here, refused if a marker of
        that producer came meanwhile."""
        if topic in self.internal_topics and not internal:
            return ProduceResult(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 error_message=f"cannot append to internal topic {topic}")
        partition, error = self._leader((topic, index))
        if partition is None:
            return ProduceResult(error, error_message=self.offline_partitions.get((topic, index)))
        if verified is not None:
            producer_id, token = verified
            if partition.verification_guards.get(producer_id) is not token:
                return ProduceResult(ErrorCode.INVALID_TXN_STATE, error_message=(
                    f"the transaction of producer {producer_id} ended while {topic}-{index} was verified"))
        if not records:
            return ProduceResult(ErrorCode.CORRUPT_MESSAGE, error_message="empty record set")
        return self._append_to(partition, lambda: partition.append(records, now, internal), acks)

    def append_marker(self, topic: str, index: int, producer_id: int, producer_epoch: int, marker: ControlMarker,
                      now: int) -> ProduceResult:
        """Append as leader a transaction marker (WriteTxnMarkers), internal topics included, as
        acks=all (the caller waits for it with ``wait_for_replication``)."""
        partition, error = self._leader((topic, index))
        if partition is None:
            return ProduceResult(error, error_message=self.offline_partitions.get((topic, index)))
        return self._append_to(partition, lambda: partition.append_marker(producer_id, producer_epoch, marker, now),
                               acks=-1)

    def _append_to(self, partition: Partition, append: Callable[[], AppendResult], acks: int) -> ProduceResult:
        """Run an append as leader on ``partition``, its refusals as Kafka's error codes. With
        ``acks`` -1 the ISR must hold min.insync.replicas first."""
        min_isr = partition.log.config.min_insync_replicas
        if acks == -1 and len(partition.isr) < min_isr:
            return ProduceResult(ErrorCode.NOT_ENOUGH_REPLICAS, error_message=(
                f"the in-sync replicas {list(partition.isr)} of {partition.topic}-{partition.index} are fewer than "
                f"min.insync.replicas={min_isr}"))
        try:
            self.log_manager.verify_dir(partition.log.log_dir)
            result = append()
        except _REFUSALS as exc:
            error = next(code for kind, code in _APPEND_ERRORS if isinstance(exc, kind))
            return ProduceResult(error, error_message=str(exc),
                                 record_errors=exc.record_errors if isinstance(exc, InvalidRecordError) else [])
        self._wake((partition.topic, partition.index))
        return ProduceResult(ErrorCode.NONE, result.base_offset, result.log_append_time_ms, result.log_start_offset,
                             last_offset=result.last_offset, appended_under=partition.leadership)

    def begin_verification(self, topic: str, index: int, producer_id: int) -> object | None:
        """A token for a transactional batch's verification (None: not the leader here).

        Produce requests of one producer pipelined to this partition share the token of the
        verification under way, as Kafka's verification state entry is shared: a new token per
        request would make each later request void the earlier ones still being verified. Only a
        marker of the producer (its transaction ended) retires the token."""
        partition, _ = self._leader((topic, index))
        if partition is None:
            return None
        return partition.verification_guards.setdefault(producer_id, object())

    async def leadership_confirmed(self, keys: Iterable[TopicPartition], timeout_ms: int) -> None:
        """Wait, at most ``timeout_ms``, while any of these partitions is resigned and waits for
        the controller's news (``Partition.resign``). A produce refused meanwhile, with the next
        one taken once the same leadership is given back, leaves a gap in the producer's
        sequence numbers: the broker refuses the next batch OUT_OF_ORDER_SEQUENCE_NUMBER, and
        librdkafka answers that by bumping its producer epoch and sending again every batch not
        yet acknowledged, stored ones included (which are then stored twice)."""
        keys = list(keys)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        while True:
            waiting = [key for key in keys
                       if (partition := self.partitions.get(key)) is not None and partition.leadership_unconfirmed]
            remaining = deadline - loop.time()
            if not waiting or remaining <= 0 or client_gone():
                return
            await self._wait_for_data(waiting, remaining)

    async def wait_for_replication(self, topic: str, index: int, result: ProduceResult, timeout_ms: int) -> None:
        """acks=all: wait until the high watermark passes the appended batches (every ISR member
        has them), then check that the ISR still holds min.insync.replicas. Sets the error of
        ``result`` when that does not happen within ``timeout_ms`` or leadership moves away.

        A leader that resigned (its ZooKeeper session ended) keeps the batches it appended, and
        the controller may give it back the same leadership: until then the answer waits rather
        than telling the producer they were refused. An idempotent producer takes
        NOT_LEADER_OR_FOLLOWER as "not written" and may send them again under a new producer
        epoch, which would store them twice. Once the replica follows another broker (whose log
        it may take) the batches are no longer this leadership's to confirm."""
        key = (topic, index)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        while True:
            partition, error = self._leader(key)
            hosted = self.partitions.get(key)
            if result.appended_under is not None and (hosted is None or hosted.leadership != result.appended_under):
                result.error = error if partition is None else ErrorCode.NOT_LEADER_OR_FOLLOWER
                return
            if partition is None:
                if result.appended_under is None or hosted is None or not hosted.resigned:
                    result.error = error
                    return
            elif partition.log.high_watermark > result.last_offset:
                if len(partition.isr) < partition.log.config.min_insync_replicas:
                    result.error = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                return
            remaining = deadline - loop.time()
            if remaining <= 0 or client_gone():
                result.error = ErrorCode.REQUEST_TIMED_OUT
                result.error_message = (
                    f"the leadership of {topic}-{index} was not confirmed again within {timeout_ms} ms"
                    if partition is None else
                    f"the in-sync replicas {list(partition.isr)} of {topic}-{index} did not all replicate offset "
                    f"{result.last_offset} within {timeout_ms} ms")
                return
            await self._wait_for_data([key], remaining)

    # --- the leader's view of its followers --------------------------------------------------
    def shrink_isrs(self, now: int, max_lag_ms: int) -> None:
        """Propose to drop from each ISR the followers that stopped keeping up."""
        for partition in list(self.partitions.values()):
            if partition.is_leader:
                partition.maybe_shrink_isr(now, max_lag_ms)

    def catching_up(self) -> dict[tuple[str, int, int], tuple[int, int]]:
        """{(topic, partition, follower): (bytes it holds, bytes of this leader's log)} for every
        replica out of the ISR of a partition led here (a reassignment's new replicas among
        them): byte progress, which offset lag does not show while a large segment copies."""
        progress: dict[tuple[str, int, int], tuple[int, int]] = {}
        for partition in list(self.partitions.values()):
            if not partition.is_leader:
                continue
            for replica in partition.replicas:
                if replica == self.broker_id or replica in partition.isr:
                    continue
                follower = partition.followers.get(replica)
                held = partition.log.bytes_below(follower.log_end_offset) if follower is not None else 0
                progress[(partition.topic, partition.index, replica)] = (held, partition.log.size_bytes)
        return progress

    def isr_committed(self, partition: Partition, proposal: IsrProposal, partition_epoch: int) -> None:
        if partition.isr_committed(proposal, partition_epoch):
            self._wake((partition.topic, partition.index))

    def isr_refused(self, partition: Partition, proposal: IsrProposal,
                    recorded: tuple[tuple[int, ...], int] | None = None) -> None:
        if partition.isr_refused(proposal, recorded):
            self._wake((partition.topic, partition.index))

    # --- fetch ------------------------------------------------------------------------------
    async def fetch(self, requests: list[FetchRequestPartition], max_wait_ms: int, min_bytes: int,
                    max_bytes: int, client: ClientMetadata | None = None) -> list[FetchResultPartition]:
        """Read every requested partition; wait (up to max_wait_ms) until min_bytes are available.

        ``client`` is a consumer's Fetch v11+ (KIP-392): a follower serves it up to its high
        watermark, and a leader with a replica selector may send it to a follower instead.
        The caller owns the FileSlices of the result and must close them.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(max_wait_ms, 0) / 1000
        while True:
            results = self._read(requests, max_bytes, client)
            total = sum(r.size for r in results)
            remaining = deadline - loop.time()
            if (total >= min_bytes or remaining <= 0 or not requests or client_gone()
                    or any(r.error != ErrorCode.NONE or r.preferred_read_replica >= 0 for r in results)):
                self._count_replication(requests, results)
                return results
            for r in results:
                if r.records is not None:
                    r.records.close()
            if any(r.held_back for r in results):
                # Look again once the throttle has room, not only when new data comes.
                remaining = min(remaining, self.replication_throttles.leader.wait_seconds())
            await self._wait_for_data([(r.topic, r.partition) for r in requests], remaining)

    def _count_replication(self, requests: list[FetchRequestPartition], results: list[FetchResultPartition]) -> None:
        """Bytes returned to followers count against the leader's throttle (in-sync ones too, as
        in Kafka); consumers' bytes never do."""
        throttle = self.replication_throttles.leader
        for request, result in zip(requests, results, strict=True):
            if request.replica_id >= 0 and result.size:
                REPLICATION_BYTES_OUT.inc(result.size)
                throttle.record(request.topic, request.partition, result.size)

    def _read(self, requests: list[FetchRequestPartition], max_bytes: int,
              client: ClientMetadata | None = None) -> list[FetchResultPartition]:
        results: list[FetchResultPartition] = []
        budget = max_bytes
        verified: set[str] = set()  # one stat per log dir per pass, not one per partition
        now = now_ms()
        for request in requests:
            result = FetchResultPartition()
            results.append(result)
            key = (request.topic, request.partition)
            partition, result.error = (self._replica(key) if client is not None and request.replica_id < 0
                                       else self._leader(key))
            if partition is None:
                continue
            result.error = partition.check_epoch(request.current_leader_epoch)
            if result.error != ErrorCode.NONE:
                continue
            log_ = partition.log
            # Only an assigned replica reads past the high watermark.
            follower = request.replica_id >= 0 and request.replica_id in partition.followers
            if request.last_fetched_epoch >= 0:
                # A Kafka follower at inter.broker.protocol.version 2.7 or later asks no
                # OffsetsForLeaderEpoch: it names the epoch of its last batch, and truncates only
                # when the leader says where its log diverged, as Kafka's leader does here. Its
                # fetch offset then tells nothing of what it holds.
                try:
                    result.diverging_epoch = self._divergence(log_, request)
                except KafkaStorageError:
                    result.error = ErrorCode.KAFKA_STORAGE_ERROR
                    continue
                if result.diverging_epoch is not None:
                    result.high_watermark = log_.high_watermark
                    result.log_start_offset = log_.log_start_offset
                    result.last_stable_offset = log_.last_stable_offset
                    continue
            # Only a fetch offset within the log tells what a follower holds (Kafka updates a
            # follower's state after a read that succeeded): one past the end comes from a log
            # that diverged and has not truncated yet, and must not count as caught up.
            if (follower and log_.log_start_offset <= request.fetch_offset <= log_.log_end_offset
                    and partition.update_follower(request.replica_id, request.fetch_offset, now)):
                self._wake(key)
            result.high_watermark = log_.high_watermark
            result.log_start_offset = log_.log_start_offset
            result.last_stable_offset = log_.last_stable_offset
            if client is not None and partition.is_leader and request.replica_id < 0:
                result.preferred_read_replica = self._preferred_read_replica(partition, request.fetch_offset,
                                                                             client, now)
                if result.preferred_read_replica >= 0:
                    continue  # as Kafka: no records, the consumer goes to the replica named
            if budget <= 0:
                continue
            if follower and self.replication_throttles.leader.holds_back(
                    request.topic, request.partition, in_sync=request.replica_id in partition.isr):
                result.held_back = True
                continue
            try:
                if log_.log_dir not in verified:
                    self.log_manager.verify_dir(log_.log_dir)
                    verified.add(log_.log_dir)
                cap = None if follower else (result.last_stable_offset if request.read_committed
                                             else log_.high_watermark)
                read = log_.read(request.fetch_offset, min(request.max_bytes, budget), max_offset=cap,
                                 min_one_batch=budget == max_bytes)
                if request.read_committed and read.records is not None:
                    result.aborted_transactions = log_.aborted_transactions(request.fetch_offset, cap or 0)
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

    @staticmethod
    def _divergence(log_: Log, request: FetchRequestPartition) -> tuple[int, int] | None:
        """Where a follower's log diverged from this one's, as (epoch, end offset): its last
        epoch is unknown here (the largest epoch below it is named), or ends before its fetch
        offset; None when its log is a prefix of this one's."""
        epoch, end_offset = log_.end_offset_for_epoch(request.last_fetched_epoch)
        if epoch < request.last_fetched_epoch or end_offset < request.fetch_offset:
            return epoch, end_offset
        return None

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
    def list_offset(self, topic: str, index: int, timestamp: int, current_leader_epoch: int = -1,
                    read_committed: bool = False) -> ListOffsetResult:
        """ListOffsets: what a consumer can read ends at the high watermark, or with
        ``read_committed`` at the last stable offset."""
        partition, error = self._leader((topic, index))
        if partition is None:
            return ListOffsetResult(error)
        error = partition.check_epoch(current_leader_epoch)
        if error != ErrorCode.NONE:
            return ListOffsetResult(error)
        log_ = partition.log
        end = log_.last_stable_offset if read_committed else log_.high_watermark
        try:
            if timestamp == LATEST_TIMESTAMP:
                return ListOffsetResult(offset=end, leader_epoch=partition.leader_epoch)
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
        if found is None or found[0] >= end:
            return ListOffsetResult(timestamp=-1, offset=-1)
        offset, found_ts = found
        return ListOffsetResult(timestamp=found_ts, offset=offset, leader_epoch=log_.epoch_for_offset(offset))

    def replica_log_end(self, topic: str, index: int) -> ListOffsetResult:
        """Where this broker's replica's log ends, whether it leads, follows or waits for a leader:
        its log end offset and the latest leader epoch of its log (-1 for none). What a controller
        weighing an unclean election asks every live replica (ListOffsets as the debugging replica)."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            return ListOffsetResult(self._absent((topic, index)))
        latest = partition.log.latest_epoch
        return ListOffsetResult(offset=partition.log.log_end_offset, leader_epoch=-1 if latest is None else latest)

    def end_offset_for_epoch(self, topic: str, index: int, epoch: int,
                             current_leader_epoch: int = -1) -> tuple[ErrorCode, int, int]:
        partition, error = self._leader((topic, index))
        if partition is None:
            return error, -1, -1
        error = partition.check_epoch(current_leader_epoch)
        if error != ErrorCode.NONE:
            return error, -1, -1
        try:
            found_epoch, end_offset = partition.log.end_offset_for_epoch(epoch)
        except KafkaStorageError:
            return ErrorCode.KAFKA_STORAGE_ERROR, -1, -1
        return ErrorCode.NONE, found_epoch, end_offset
