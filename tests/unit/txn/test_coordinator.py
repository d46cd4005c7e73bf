"""The transaction coordinator's rules with its store, marker writer and clock in memory: no
broker, no sleeping (markers are written by a fake that answers at once, or fails on demand)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Sequence

from minikafka.coordinator.topic import LoggedRecord
from minikafka.replica.waits import CURRENT_SCOPE, WaitScope, client_gone
from minikafka.txn.coordinator import TransactionCoordinator, TxnCoordinatorConfig
from minikafka.txn.state import TxnState, decode_txn_key, decode_txn_value, encode_txn_value
from protocol.errors import ErrorCode as E

TXN = "orders-pipeline"
T0, T1 = ("out", 0), ("out", 1)


class MemoryStore:
    """__transaction_state in memory: every record of every partition, in order."""

    partition_count = 4

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = {p: [] for p in range(self.partition_count)}
        self.epoch = 3
        self.fail_with: E | None = None
        self.refused = 0  # appends answered with fail_with

    def status(self, partition: int) -> E:
        return E.NONE

    def coordinator_epoch(self, partition: int) -> int:
        return self.epoch

    def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]]) -> E:
        if self.fail_with is not None:
            self.refused += 1
            return self.fail_with
        self.records[partition].extend(records)
        return E.NONE

    async def replicated(self, partition: int, timeout_ms: int) -> E:
        # As the broker's acks=all wait: it gives up once the client whose request waits is gone.
        return E.REQUEST_TIMED_OUT if client_gone() else E.NONE

    def read(self, partition: int) -> Iterator[LoggedRecord]:
        yield from [LoggedRecord(key, value) for key, value in self.records[partition]]

    def states(self) -> list[str]:
        return [decode_txn_value(decode_txn_key(k), v).state.name for rs in self.records.values() for k, v in rs if v]


class Markers:
    def __init__(self) -> None:
        self.written: list[tuple[int, int, bool, int, frozenset]] = []
        self.failures: dict[tuple[str, int], int] = {}  # partition -> times it fails first

    async def write_markers(self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                            partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], E]:
        wanted = frozenset(partitions)
        answers = {}
        for tp in wanted:
            if self.failures.get(tp, 0) > 0:
                self.failures[tp] -= 1
                answers[tp] = E.NOT_LEADER_OR_FOLLOWER
            else:
                answers[tp] = E.NONE
        self.written.append((producer_id, producer_epoch, committed, coordinator_epoch,
                             frozenset(tp for tp, e in answers.items() if e == E.NONE)))
        return answers


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def coordinator(store: MemoryStore | None = None, markers: Markers | None = None,
                clock: Clock | None = None) -> tuple[TransactionCoordinator, MemoryStore, Markers, Clock]:
    ids = iter(range(1000, 2000))

    async def next_id() -> int:
        return next(ids)
    store, markers, clock = store or MemoryStore(), markers or Markers(), clock or Clock()
    return TransactionCoordinator(TxnCoordinatorConfig(max_timeout_ms=60_000), store, markers, next_id, clock), \
        store, markers, clock


async def settle(coord: TransactionCoordinator) -> None:
    """Until the transactions being finished are (markers, then Complete*)."""
    for _ in range(100):
        if not coord._completions:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("transactions still finishing")


async def test_a_new_instance_gets_a_bumped_epoch_and_fences_the_older_one() -> None:
    coord, store, _, _ = coordinator()
    first = await coord.init_producer_id(TXN, 10_000)
    assert (first.error, first.producer_id, first.producer_epoch) == (E.NONE, 1000, 0)
    second = await coord.init_producer_id(TXN, 10_000)
    assert (second.error, second.producer_id, second.producer_epoch) == (E.NONE, 1000, 1)
    assert await coord.add_partitions(TXN, 1000, 0, [T0]) == E.PRODUCER_FENCED
    assert await coord.add_partitions(TXN, 999, 1, [T0]) == E.INVALID_PRODUCER_ID_MAPPING
    assert (await coord.init_producer_id(TXN, 120_000)).error == E.INVALID_TRANSACTION_TIMEOUT
    assert store.states() == ["EMPTY", "EMPTY"]


async def test_a_committed_transaction_is_prepared_marked_then_complete() -> None:
    coord, store, markers, _ = coordinator()
    pid = (await coord.init_producer_id(TXN, 10_000)).producer_id
    assert await coord.add_partitions(TXN, pid, 0, [T0]) == E.NONE
    assert await coord.add_partitions(TXN, pid, 0, [T0, T1]) == E.NONE
    assert coord.verify(TXN, pid, 0, [T1, ("other", 0)]) == {T1: E.NONE, ("other", 0): E.INVALID_TXN_STATE}
    assert await coord.end_txn(TXN, pid, 0, commit=True) == E.NONE
    assert coord.txns[TXN].state == TxnState.PREPARE_COMMIT
    assert await coord.end_txn(TXN, pid, 0, commit=True) == E.CONCURRENT_TRANSACTIONS, "still writing markers"
    await settle(coord)
    assert markers.written == [(pid, 0, True, 3, frozenset({T0, T1}))]
    assert coord.txns[TXN].state == TxnState.COMPLETE_COMMIT and not coord.txns[TXN].partitions
    assert await coord.end_txn(TXN, pid, 0, commit=True) == E.NONE, "a retry of a done commit"
    assert await coord.end_txn(TXN, pid, 0, commit=False) == E.INVALID_TXN_STATE
    assert store.states() == ["EMPTY", "ONGOING", "ONGOING", "PREPARE_COMMIT", "COMPLETE_COMMIT"]


async def test_markers_are_retried_until_every_partition_has_one() -> None:
    coord, _, markers, _ = coordinator()
    markers.failures[T1] = 3
    pid = (await coord.init_producer_id(TXN, 10_000)).producer_id
    await coord.add_partitions(TXN, pid, 0, [T0, T1])
    assert await coord.end_txn(TXN, pid, 0, commit=False) == E.NONE
    await settle(coord)
    assert [w[4] for w in markers.written] == [frozenset({T0}), frozenset(), frozenset(), frozenset({T1})]
    assert coord.txns[TXN].state == TxnState.COMPLETE_ABORT


async def test_a_commit_completes_when_its_producer_closes_its_connection_at_the_answer() -> None:
    coord, store, markers, _ = coordinator()
    pid = (await coord.init_producer_id(TXN, 10_000)).producer_id
    await coord.add_partitions(TXN, pid, 0, [T0])
    connection = WaitScope()  # EndTxn comes on a connection, which closes once it is answered
    token = CURRENT_SCOPE.set(connection)
    try:
        assert await coord.end_txn(TXN, pid, 0, commit=True) == E.NONE
        connection.release_all()
    finally:
        CURRENT_SCOPE.reset(token)
    await settle(coord)
    assert coord.txns[TXN].state == TxnState.COMPLETE_COMMIT
    assert store.states()[-2:] == ["PREPARE_COMMIT", "COMPLETE_COMMIT"]


async def test_recording_a_transaction_complete_is_retried_until_it_is_written() -> None:
    coord, store, markers, _ = coordinator()
    pid = (await coord.init_producer_id(TXN, 10_000)).producer_id
    await coord.add_partitions(TXN, pid, 0, [T0])
    assert await coord.end_txn(TXN, pid, 0, commit=True) == E.NONE
    store.fail_with = E.NOT_ENOUGH_REPLICAS  # the ISR short when the markers are written
    for _ in range(100):
        if store.refused >= 2:  # Complete refused, and tried again
            break
        await asyncio.sleep(0.01)
    assert store.refused >= 2, "recording Complete was not tried again"
    assert coord.txns[TXN].state == TxnState.PREPARE_COMMIT
    assert (await coord.init_producer_id(TXN, 10_000)).error == E.CONCURRENT_TRANSACTIONS
    store.fail_with = None
    await settle(coord)
    assert coord.txns[TXN].state == TxnState.COMPLETE_COMMIT
    assert (await coord.init_producer_id(TXN, 10_000)).error == E.NONE


async def test_a_new_instance_aborts_the_open_transaction_with_the_next_epoch() -> None:
    coord, _, markers, _ = coordinator()
    pid = (await coord.init_producer_id(TXN, 10_000)).producer_id
    await coord.add_partitions(TXN, pid, 0, [T0])
    assert (await coord.init_producer_id(TXN, 10_000)).error == E.CONCURRENT_TRANSACTIONS
    await asyncio.sleep(0)
    await settle(coord)
    assert markers.written == [(pid, 1, False, 3, frozenset({T0}))], "the abort fences epoch 0"
    assert await coord.end_txn(TXN, pid, 0, commit=True) == E.PRODUCER_FENCED, "the zombie's commit"
    retried = await coord.init_producer_id(TXN, 10_000)
    assert (retried.error, retried.producer_epoch) == (E.NONE, 2)


async def test_a_transaction_open_past_its_timeout_is_aborted() -> None:
    coord, _, markers, clock = coordinator()
    pid = (await coord.init_producer_id(TXN, 5_000)).producer_id
    await coord.add_partitions(TXN, pid, 0, [T0])
    assert await coord.abort_timed_out() == []
    clock.now += 5_001
    assert await coord.abort_timed_out() == [TXN]
    await settle(coord)
    assert coord.txns[TXN].state == TxnState.COMPLETE_ABORT and coord.txns[TXN].producer_epoch == 1
    assert markers.written[-1][:3] == (pid, 1, False)


async def test_a_coordinator_that_takes_over_finishes_what_was_prepared() -> None:
    coord, store, markers, _ = coordinator()
    pid = (await coord.init_producer_id(TXN, 10_000)).producer_id
    await coord.add_partitions(TXN, pid, 0, [T0])
    prepared = coord.txns[TXN].transition(TxnState.PREPARE_COMMIT, 1)
    store.records[coord.partition_for(TXN)].append((store.records[coord.partition_for(TXN)][0][0],
                                                    encode_txn_value(prepared)))
    store.epoch = 4  # the new leader's epoch of the __transaction_state partition
    successor, _, successor_markers, _ = coordinator(store)
    successor.leadership_changed(successor.partition_for(TXN), leads=True)
    await settle(successor)
    assert successor_markers.written == [(pid, 0, True, 4, frozenset({T0}))]
    assert successor.txns[TXN].state == TxnState.COMPLETE_COMMIT


async def test_kip_360_a_producer_bumps_its_own_epoch_and_a_retry_gets_the_same_answer() -> None:
    coord, _, _, _ = coordinator()
    pid = (await coord.init_producer_id(TXN, 10_000)).producer_id
    bumped = await coord.init_producer_id(TXN, 10_000, expected_producer_id=pid, expected_epoch=0)
    assert (bumped.error, bumped.producer_epoch) == (E.NONE, 1)
    again = await coord.init_producer_id(TXN, 10_000, expected_producer_id=pid, expected_epoch=0)
    assert (again.error, again.producer_epoch) == (E.NONE, 1), "the retry is answered as the first try"
    stale = await coord.init_producer_id(TXN, 10_000, expected_producer_id=pid, expected_epoch=7)
    assert stale.error == E.PRODUCER_FENCED


async def test_a_failed_write_changes_nothing() -> None:
    coord, store, _, _ = coordinator()
    pid = (await coord.init_producer_id(TXN, 10_000)).producer_id
    store.fail_with = E.NOT_LEADER_OR_FOLLOWER
    assert await coord.add_partitions(TXN, pid, 0, [T0]) == E.NOT_COORDINATOR
    assert coord.txns[TXN].state == TxnState.EMPTY
