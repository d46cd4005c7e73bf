"""A manual clock and an in-memory GroupStore, so the coordinator runs without sockets or disks."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator, Sequence

from minikafka.coordinator.topic import LoggedRecord, TxnProducer
from minikafka.group.coordinator import CoordinatorConfig, GroupCoordinator, JoinRequest
from minikafka.group.schemas import CONSUMER_SUBSCRIPTION
from protocol.errors import ErrorCode
from protocol.record_codec import ControlMarker

KeyValue = tuple[bytes, bytes | None]
START_MS = 1_700_000_000_000


class ManualTimer:
    def __init__(self, due: int, seq: int, callback: Callable[[], None]) -> None:
        self.due, self.seq, self.callback = due, seq, callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: ManualTimer) -> bool:
        return (self.due, self.seq) < (other.due, other.seq)


class ManualScheduler:
    """Time moves only when a test calls `advance`; due timers then run in order."""

    def __init__(self, now: int = START_MS) -> None:
        self.now = now
        self._heap: list[ManualTimer] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self.now

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> ManualTimer:
        timer = ManualTimer(self.now + max(delay_ms, 0), next(self._seq), callback)
        heapq.heappush(self._heap, timer)
        return timer

    def call_soon_threadsafe(self, callback: Callable[[], None]) -> None:
        self.call_later(0, callback)

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while self._heap and self._heap[0].due <= target:
            timer = heapq.heappop(self._heap)
            if timer.cancelled:
                continue
            self.now = max(self.now, timer.due)
            timer.callback()
        self.now = target


class MemoryStore:
    """The GroupStore contract in memory: per-partition record lists; `fail_with` makes writes fail."""

    def __init__(self, partition_count: int = 4) -> None:
        self.partition_count = partition_count
        self.exists = True
        self.records: dict[int, list[LoggedRecord]] = {p: [] for p in range(partition_count)}
        self.fail_with: ErrorCode | None = None
        self.offline: set[int] = set()

    async def replicated(self, partition: int, timeout_ms: int) -> ErrorCode:
        return ErrorCode.NONE

    def status(self, partition: int) -> ErrorCode:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE if partition in self.offline else ErrorCode.NONE

    def append(self, partition: int, records: Sequence[KeyValue], txn: TxnProducer | None = None) -> ErrorCode:
        if self.fail_with is not None:
            return self.fail_with
        self.records[partition].extend(
            LoggedRecord(key, value) if txn is None else LoggedRecord(key, value, txn.producer_id, True)
            for key, value in records)
        return ErrorCode.NONE

    def write_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        """A transaction marker, as WriteTxnMarkers appends it."""
        self.records[partition].append(LoggedRecord(None, None, producer_id, True, ControlMarker(not committed, 0)))

    def read(self, partition: int) -> Iterator[LoggedRecord]:
        yield from list(self.records[partition])


def subscription(*topics: str) -> bytes:
    return CONSUMER_SUBSCRIPTION.encode(1, {"topics": list(topics), "user_data": None, "owned_partitions": []})


def make_coordinator(store: MemoryStore | None = None, scheduler: ManualScheduler | None = None,
                     **config: int) -> tuple[GroupCoordinator, MemoryStore, ManualScheduler]:
    store = store if store is not None else MemoryStore()
    scheduler = scheduler if scheduler is not None else ManualScheduler()
    settings = {"initial_rebalance_delay_ms": 0, **config}
    coordinator = GroupCoordinator(CoordinatorConfig(**settings), store, scheduler)
    coordinator.load()
    return coordinator, store, scheduler


def join_request(group: str = "g", member_id: str = "", *, instance: str | None = None,
                 protocols: list[tuple[str, bytes]] | None = None, session_ms: int = 10_000,
                 rebalance_ms: int = 30_000, client_id: str = "client", v4: bool = True) -> JoinRequest:
    return JoinRequest(group, member_id, instance, client_id, "/127.0.0.1", session_ms, rebalance_ms, "consumer",
                       protocols if protocols is not None else [("range", subscription("t"))], v4)
