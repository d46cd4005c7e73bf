"""The transaction coordinator (KIP-98) of the transactional ids whose __transaction_state
partition this broker leads.

``TransactionCoordinator`` owns, per transactional id, its state (``TxnMetadata``): producer id
and epoch, timeout, the partitions of its ongoing transaction, and where that transaction is in
its state machine (``TRANSITIONS``). Every change is written to the id's __transaction_state
partition (replicated as acks=all) before it is taken, so a coordinator that takes over after a
failure reloads exactly what was decided. Ending a transaction is two writes around the markers:
PrepareCommit (or PrepareAbort) is the decision, the client is answered, the markers go to every
partition of the transaction (retried until written), then CompleteCommit. A coordinator that
loads a partition finishes the transactions it finds prepared.

A producer is fenced by bumping its epoch: InitProducerId from a new instance of a
transactional id, or a transaction open longer than its timeout, aborts the open transaction with
the next epoch, so the old instance's writes and markers are refused everywhere.

Loading and unloading a partition, and the write-then-apply of every change, are the coordinator
runtime's (minikafka.coordinator.runtime, shared with the group coordinator); a partition loaded
in an older leader epoch is loaded again, since that epoch is what its markers carry.

Event-loop thread only; one operation at a time per transactional id (a lock each). Its
dependencies are passed in: the store (__transaction_state), the marker writer, the producer id
source and the clock, so its rules are unit-tested without a broker. Its callers: the transaction
handlers, the broker on leadership changes, and the verifier of KIP-890.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from minikafka.coordinator.records import RecordFormatError
from minikafka.coordinator.runtime import CoordinatorRuntime, CoordinatorStore
from minikafka.coordinator.topic import LoggedRecord
from minikafka.metadata.topics import TRANSACTION_STATE_TOPIC
from minikafka.replica.waits import spawn_detached
from minikafka.storage.crash_points import hook_point
from minikafka.txn.state import (
    COMPLETED,
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TxnMetadata,
    TxnState,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
    state_partition_for,
)
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

MARKER_RETRY_BACKOFF_S = 0.1
COMPLETE_RETRY_MAX_BACKOFF_S = 5.0


class TxnStore(CoordinatorStore, Protocol):
    """Where transaction state lives: __transaction_state (CoordinatorTopic in the broker)."""

    def coordinator_epoch(self, partition: int) -> int:
        """This broker's leader epoch of the partition: the epoch its markers carry."""


class MarkerWriter(Protocol):
    async def write_markers(self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                            partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Write the transaction's marker in each partition (at its leader); the error of each."""


@dataclass(frozen=True)
class TxnCoordinatorConfig:
    max_timeout_ms: int = 900_000
    abort_check_interval_ms: int = 10_000
    id_expiration_ms: int = 604_800_000
    write_timeout_ms: int = 30_000  # for a state change to reach the ISR, as Kafka's request.timeout.ms

    @classmethod
    def from_broker(cls, config: Any) -> TxnCoordinatorConfig:
        return cls(max_timeout_ms=config["transaction.max.timeout.ms"],
                   abort_check_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                   id_expiration_ms=config["transactional.id.expiration.ms"])


@dataclass(frozen=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


# Errors of a write to __transaction_state, as its clients understand them.
_STORE_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}
# Marker errors after which the partition needs no marker any more: its topic is gone.
_MARKER_DONE = {ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID}


class TransactionCoordinator:
    def __init__(self, config: TxnCoordinatorConfig, store: TxnStore, markers: MarkerWriter,
                 next_producer_id: Callable[[], Awaitable[int]],
                 now_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.config = config
        self.store = store
        self.markers = markers
        self.next_producer_id = next_producer_id
        self.now_ms = now_ms
        self.txns: dict[str, TxnMetadata] = {}
        # A partition loaded in an older leader epoch loads again: the epoch is what its markers carry.
        self.runtime = CoordinatorRuntime(TRANSACTION_STATE_TOPIC, store, self._replay, self._drop,
                                          "transactional id(s)", epoch_of=store.coordinator_epoch)
        self._locks: dict[str, asyncio.Lock] = {}
        self._completions: dict[str, asyncio.Task[None]] = {}
        self._expiry: asyncio.Task[None] | None = None

    # ---- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self._expiry = asyncio.get_running_loop().create_task(self._abort_timed_out_periodically(),
                                                              name="abort-timed-out-transactions")

    async def shutdown(self) -> None:
        tasks = [t for t in (self._expiry, *self._completions.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._completions.clear()

    def partition_for(self, transactional_id: str) -> int:
        return state_partition_for(transactional_id, self.store.partition_count)

    def coordinator_error(self, transactional_id: str) -> ErrorCode:
        """NONE if this broker coordinates the id now (loading its partition if need be)."""
        return self.runtime.partition_error(self.partition_for(transactional_id))

    def leadership_changed(self, partition: int, leads: bool) -> None:
        """This broker now leads (loads the partition's transactions and finishes the prepared
        ones) or no longer leads (forgets them) a __transaction_state partition."""
        self.runtime.leadership_changed(partition, leads, reload=True)

    def _replay(self, partition: int, records: Iterator[LoggedRecord]) -> None:
        """The runtime loads the partition: its transactional ids' last states, and the
        transactions they left prepared are finished."""
        found: dict[str, TxnMetadata] = {}
        for record in records:
            try:
                transactional_id = decode_txn_key(record.key or b"")
                if record.value is None:
                    found.pop(transactional_id, None)
                else:
                    found[transactional_id] = decode_txn_value(transactional_id, record.value)
            except RecordFormatError as exc:
                log.warning("__transaction_state-%d: skipping a record this coordinator cannot read: %s", partition,
                            exc)
        epoch = self.store.coordinator_epoch(partition)
        self.txns.update(found)
        prepared = [m for m in found.values() if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)]
        log.info("loaded __transaction_state-%d (coordinator epoch %d): %d transactional id(s), %d transaction(s) "
                 "to finish", partition, epoch, len(found), len(prepared))
        for metadata in prepared:
            self._finish_later(metadata)
        for metadata in found.values():
            if metadata.state == TxnState.PREPARE_EPOCH_FENCE:  # the fence was decided, its abort not yet
                self._spawn_abort(metadata.transactional_id)

    def _drop(self, partition: int) -> int:
        """The runtime unloads the partition: its ids are forgotten and their markers' writers
        stop (the next coordinator finishes what they did not)."""
        gone = [t for t in self.txns if self.partition_for(t) == partition]
        for transactional_id in gone:
            del self.txns[transactional_id]
            task = self._completions.pop(transactional_id, None)
            if task is not None:
                task.cancel()
        return len(gone)

    def _lock(self, transactional_id: str) -> asyncio.Lock:
        lock = self._locks.get(transactional_id)
        if lock is None:
            lock = self._locks[transactional_id] = asyncio.Lock()
        return lock

    async def _write(self, metadata: TxnMetadata) -> ErrorCode:
        """Write the new state; take it only once it is replicated."""
        def take() -> None:
            self.txns[metadata.transactional_id] = metadata
        error = await self.runtime.write_replicated(
            self.partition_for(metadata.transactional_id),
            [(encode_txn_key(metadata.transactional_id), encode_txn_value(metadata))], take,
            self.config.write_timeout_ms)
        if error != ErrorCode.NONE:
            log.warning("could not record transaction %s as %s: %s", metadata.transactional_id, metadata.state.name,
                        error.name)
            return _STORE_ERRORS.get(error, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return ErrorCode.NONE

    # ---- InitProducerId ---------------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_producer_id: int = -1,
                               expected_epoch: int = -1) -> InitProducerIdResult:
        """A producer id and epoch for a (new instance of a) transactional producer: a bumped
        epoch fences every older instance; an open transaction is aborted first (the caller
        retries on CONCURRENT_TRANSACTIONS). KIP-360: a producer that gives its id and epoch
        bumps its own epoch after a recoverable error."""
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.NONE:
            return InitProducerIdResult(error)
        async with self._lock(transactional_id):
            now = self.now_ms()
            current = self.txns.get(transactional_id)
            if current is None:
                fresh = TxnMetadata(transactional_id, await self.next_producer_id(), 0, timeout_ms, TxnState.EMPTY,
                                    last_update_ms=now)
                error = await self._write(fresh)
                return InitProducerIdResult(error, fresh.producer_id, fresh.producer_epoch) if error == ErrorCode.NONE \
                    else InitProducerIdResult(error)
            if expected_producer_id >= 0:
                if (expected_producer_id, expected_epoch) == (current.last_producer_id, current.last_producer_epoch) \
                        and current.state in COMPLETED:
                    return InitProducerIdResult(ErrorCode.NONE, current.producer_id, current.producer_epoch)  # a retry
                if (expected_producer_id, expected_epoch) != (current.producer_id, current.producer_epoch):
                    return InitProducerIdResult(ErrorCode.PRODUCER_FENCED)
            if current.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
                return InitProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS)
            if current.state == TxnState.ONGOING:
                self._spawn_abort(transactional_id, fence=True)
                return InitProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS)
            producer_id, epoch = current.producer_id, current.producer_epoch + 1
            if epoch > MAX_PRODUCER_EPOCH:  # exhausted: a new producer id starts again at epoch 0
                producer_id, epoch = await self.next_producer_id(), 0
            bumped = current.transition(TxnState.EMPTY, now, producer_id=producer_id, producer_epoch=epoch,
                                        timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1,
                                        last_producer_id=current.producer_id,
                                        last_producer_epoch=current.producer_epoch)
            error = await self._write(bumped)
            if error != ErrorCode.NONE:
                return InitProducerIdResult(error)
            log.info("transactional id %s: producer %d epoch %d (older instances fenced)", transactional_id,
                     producer_id, epoch)
            return InitProducerIdResult(ErrorCode.NONE, producer_id, epoch)

    # ---- a transaction's partitions ---------------------------------------------------------
    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int,
                        fenced: ErrorCode = ErrorCode.PRODUCER_FENCED) -> tuple[ErrorCode, TxnMetadata | None]:
        current = self.txns.get(transactional_id)
        if current is None or current.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if current.producer_epoch != epoch:
            return fenced, None
        return ErrorCode.NONE, current

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: Iterable[TopicPartition],
                             fenced: ErrorCode = ErrorCode.PRODUCER_FENCED) -> ErrorCode:
        """AddPartitionsToTxn (and AddOffsetsToTxn's __consumer_offsets partition): the
        partitions join the producer's ongoing transaction (which this starts)."""
        wanted = frozenset(partitions)
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.NONE:
            return error
        async with self._lock(transactional_id):
            error, current = self._check_producer(transactional_id, producer_id, epoch, fenced)
            if current is None:
                return error
            if current.state not in (TxnState.EMPTY, TxnState.ONGOING, TxnState.COMPLETE_COMMIT,
                                     TxnState.COMPLETE_ABORT):
                return ErrorCode.CONCURRENT_TRANSACTIONS
            if current.state == TxnState.ONGOING and wanted <= current.partitions:
                return ErrorCode.NONE
            return await self._write(current.with_partitions(wanted, self.now_ms()))

    def verify(self, transactional_id: str, producer_id: int, epoch: int,
               partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890: whether each partition is in the producer's ongoing transaction (a leader
        asks before it takes a transaction's first batch)."""
        wanted = list(partitions)
        error = self.coordinator_error(transactional_id)
        if error == ErrorCode.NONE:
            error, current = self._check_producer(transactional_id, producer_id, epoch)
            if current is not None:
                ongoing = current.state == TxnState.ONGOING
                return {tp: ErrorCode.NONE if ongoing and tp in current.partitions else ErrorCode.INVALID_TXN_STATE
                        for tp in wanted}
        return dict.fromkeys(wanted, error)

    # ---- EndTxn -----------------------------------------------------------------------------
    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                      fenced: ErrorCode = ErrorCode.PRODUCER_FENCED) -> ErrorCode:
        """Decide the transaction (PrepareCommit or PrepareAbort, written), answer, and let the
        markers go out; a retry of a decision already made is answered as it was."""
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.NONE:
            return error
        async with self._lock(transactional_id):
            error, current = self._check_producer(transactional_id, producer_id, epoch, fenced)
            if current is None:
                return error
            done, preparing = ((TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT) if commit
                               else (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT))
            if current.state == done:
                return ErrorCode.NONE
            if current.state == preparing:
                return ErrorCode.CONCURRENT_TRANSACTIONS
            if current.state != TxnState.ONGOING:
                return ErrorCode.INVALID_TXN_STATE
            return await self._prepare(current.transition(preparing, self.now_ms()))

    async def _prepare(self, prepared: TxnMetadata) -> ErrorCode:
        error = await self._write(prepared)
        if error == ErrorCode.NONE:
            hook_point("txn.decided")
            self._finish_later(prepared)
        return error

    def _finish_later(self, prepared: TxnMetadata) -> None:
        transactional_id = prepared.transactional_id
        if transactional_id not in self._completions:
            # Detached from the EndTxn (or InitProducerId) that decided it: the producer may close
            # its connection as soon as it has its answer, and the markers must still be written.
            task = spawn_detached(self._finish(prepared), name=f"txn-{transactional_id}")
            self._completions[transactional_id] = task
            task.add_done_callback(lambda _t: self._completions.pop(transactional_id, None))

    async def _finish(self, prepared: TxnMetadata) -> None:
        """Write the markers of a prepared transaction (retried until every partition has its
        marker), then record it complete."""
        transactional_id = prepared.transactional_id
        partition = self.partition_for(transactional_id)
        loaded_epoch = self.runtime.loaded_epoch(partition)
        coordinator_epoch = -1 if loaded_epoch is None else loaded_epoch
        committed = prepared.state == TxnState.PREPARE_COMMIT
        pending = set(prepared.partitions)
        attempts = 0
        while pending:
            if self.runtime.loaded_epoch(partition) != coordinator_epoch:
                return  # no longer the coordinator: the next one finishes it
            errors = await self.markers.write_markers(prepared.producer_id, prepared.producer_epoch, committed,
                                                      coordinator_epoch, pending)
            pending -= {tp for tp, error in errors.items() if error in _MARKER_DONE}
            if pending:
                attempts += 1
                if attempts == 1 or attempts % 50 == 0:
                    log.warning("transaction %s: markers not written yet to %s (%s); retrying", transactional_id,
                                sorted(pending), ", ".join(sorted({e.name for e in errors.values()})))
                await asyncio.sleep(MARKER_RETRY_BACKOFF_S)
        hook_point("txn.markers_written")
        done = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        failures = 0
        # Until Complete* is recorded the producer's next InitProducerId or transaction is answered
        # CONCURRENT_TRANSACTIONS, so a write that failed (the ISR short for a while) is retried.
        while self.runtime.loaded_epoch(partition) == coordinator_epoch:
            async with self._lock(transactional_id):
                current = self.txns.get(transactional_id)
                if current is None or current.state != prepared.state \
                        or current.producer_epoch != prepared.producer_epoch:
                    return
                error = await self._write(current.transition(done, self.now_ms(), partitions=frozenset()))
            if error == ErrorCode.NONE:
                log.debug("transaction %s of producer %d epoch %d %s in %d partition(s)", transactional_id,
                         prepared.producer_id, prepared.producer_epoch, "committed" if committed else "aborted",
                         len(prepared.partitions))
                return
            await asyncio.sleep(min(MARKER_RETRY_BACKOFF_S * 2 ** failures, COMPLETE_RETRY_MAX_BACKOFF_S))
            failures += 1

    # ---- aborts the coordinator decides -----------------------------------------------------
    def _spawn_abort(self, transactional_id: str, fence: bool = False) -> None:
        spawn_detached(self._abort(transactional_id, fence), name=f"abort-{transactional_id}")

    async def _abort(self, transactional_id: str, fence: bool) -> None:
        """Abort the open transaction with the producer's next epoch (the producer that opened it
        is fenced: its late writes and its own EndTxn are refused)."""
        async with self._lock(transactional_id):
            current = self.txns.get(transactional_id)
            if current is None or current.state not in (TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE):
                return
            epoch = min(current.producer_epoch + 1, MAX_PRODUCER_EPOCH) if current.state == TxnState.ONGOING \
                else current.producer_epoch
            now = self.now_ms()
            if current.state == TxnState.ONGOING:
                current = current.transition(TxnState.PREPARE_EPOCH_FENCE, now, producer_epoch=epoch,
                                             last_producer_id=current.producer_id,
                                             last_producer_epoch=current.producer_epoch)
            error = await self._prepare(current.transition(TxnState.PREPARE_ABORT, now))
            if error == ErrorCode.NONE:
                log.warning("transaction %s of producer %d aborted by its coordinator (%s); epoch now %d",
                            transactional_id, current.producer_id,
                            "a new instance took the transactional id" if fence else "it ran past its timeout", epoch)

    async def abort_timed_out(self) -> list[str]:
        """Abort every transaction open longer than its timeout; the ids aborted."""
        now = self.now_ms()
        late = [t for t, m in self.txns.items() if m.state == TxnState.ONGOING and m.start_ms + m.timeout_ms < now]
        for transactional_id in late:
            await self._abort(transactional_id, fence=False)
        return late

    async def expire_ids(self) -> list[str]:
        """Forget (tombstone) the transactional ids with no transaction open that were not used
        for transactional.id.expiration.ms; the ids forgotten."""
        expired: list[str] = []
        for transactional_id in list(self.txns):
            async with self._lock(transactional_id):
                current = self.txns.get(transactional_id)
                if current is None or current.state not in COMPLETED \
                        or self.now_ms() - current.last_update_ms <= self.config.id_expiration_ms:
                    continue
                def forget(transactional_id: str = transactional_id) -> None:
                    del self.txns[transactional_id]
                    self._locks.pop(transactional_id, None)
                    expired.append(transactional_id)
                await self.runtime.write_replicated(self.partition_for(transactional_id),
                                                    [(encode_txn_key(transactional_id), None)], forget,
                                                    self.config.write_timeout_ms)
        if expired:
            log.info("forgot %d transactional id(s) unused for %d ms: %s", len(expired), self.config.id_expiration_ms,
                     ", ".join(expired[:10]) + (" ..." if len(expired) > 10 else ""))
        return expired

    async def _abort_timed_out_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.config.abort_check_interval_ms / 1000)
            try:
                await self.abort_timed_out()
                await self.expire_ids()
            except Exception:  # the next round tries again; a crash here would end the checks for good
                log.exception("checking for timed-out transactions and expired transactional ids failed")

    # ---- what operators see -----------------------------------------------------------------
    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.NONE:
            return error, None
        current = self.txns.get(transactional_id)
        return (ErrorCode.NONE, current) if current is not None else (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None)

    def list(self, states: set[TxnState] | None = None, producer_ids: set[int] | None = None,
             longer_than_ms: int = -1) -> list[TxnMetadata]:
        now = self.now_ms()
        return [m for m in self.txns.values()
                if (not states or m.state in states) and (not producer_ids or m.producer_id in producer_ids)
                and (longer_than_ms < 0 or (m.state == TxnState.ONGOING and now - m.start_ms > longer_than_ms))]
