"""The coordinator runtime on its own: when a partition loads and unloads, and that a change is
applied only once written (and, for write_replicated, once replicated)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from minikafka.coordinator.runtime import CoordinatorRuntime
from minikafka.coordinator.topic import LoggedRecord, TxnProducer
from protocol.errors import ErrorCode as E


class Store:
    partition_count = 2

    def __init__(self) -> None:
        self.records: dict[int, list[LoggedRecord]] = {0: [], 1: []}
        self.statuses = {0: E.NONE, 1: E.NONE}
        self.append_error = E.NONE
        self.replication_error = E.NONE

    def status(self, partition: int) -> E:
        return self.statuses[partition]

    def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]],
               txn: TxnProducer | None = None) -> E:
        if self.append_error == E.NONE:
            self.records[partition].extend(LoggedRecord(k, v) for k, v in records)
        return self.append_error

    async def replicated(self, partition: int, timeout_ms: int) -> E:
        return self.replication_error

    def read(self, partition: int) -> Iterator[LoggedRecord]:
        yield from list(self.records[partition])


class Shard:
    """What a coordinator keeps: the keys replayed from each loaded partition."""

    def __init__(self) -> None:
        self.keys: dict[int, list[bytes]] = {}
        self.loads = 0

    def replay(self, partition: int, records: Iterator[LoggedRecord]) -> None:
        self.loads += 1
        self.keys[partition] = [r.key or b"" for r in records]

    def drop(self, partition: int) -> int:
        return len(self.keys.pop(partition, []))


def _runtime(epoch: dict[int, int] | None = None) -> tuple[CoordinatorRuntime, Store, Shard]:
    store, shard = Store(), Shard()
    runtime = CoordinatorRuntime("__internal", store, shard.replay, shard.drop, "key(s)",
                                 epoch_of=epoch.__getitem__ if epoch is not None else None)
    return runtime, store, shard


def test_a_partition_loads_on_first_use_and_answers_its_status_when_it_cannot() -> None:
    runtime, store, shard = _runtime()
    store.records[0].append(LoggedRecord(b"a", b"1"))
    store.statuses[1] = E.NOT_COORDINATOR
    assert runtime.partition_error(0) == E.NONE
    assert runtime.partition_error(0) == E.NONE
    assert shard.keys == {0: [b"a"]} and shard.loads == 1
    assert runtime.partition_error(1) == E.NOT_COORDINATOR
    assert set(runtime.loaded_partitions) == {0}


def test_leadership_loads_and_unloads_and_a_failed_log_unloads() -> None:
    runtime, store, shard = _runtime()
    runtime.leadership_changed(0, True)
    runtime.leadership_changed(1, True)
    runtime.leadership_changed(0, True)  # already loaded: not again
    assert shard.loads == 2
    runtime.leadership_changed(0, False)
    assert set(runtime.loaded_partitions) == {1} and 0 not in shard.keys
    store.statuses[1] = E.COORDINATOR_NOT_AVAILABLE
    runtime.unload_unavailable()
    assert not runtime.loaded_partitions and not shard.keys


def test_a_new_epoch_loads_again() -> None:
    epochs = {0: 3, 1: 3}
    runtime, store, shard = _runtime(epochs)
    assert runtime.partition_error(0) == E.NONE and runtime.loaded_epoch(0) == 3
    store.records[0].append(LoggedRecord(b"b", b"2"))
    epochs[0] = 4
    assert runtime.partition_error(0) == E.NONE
    assert runtime.loaded_epoch(0) == 4 and shard.keys[0] == [b"b"] and shard.loads == 2
    runtime.leadership_changed(0, True, reload=True)
    assert shard.loads == 3


async def test_a_change_is_applied_only_once_written() -> None:
    runtime, store, _ = _runtime()
    applied: list[str] = []
    assert runtime.write(0, [(b"k", b"v")], lambda: applied.append("written")) == E.NONE
    store.append_error = E.NOT_COORDINATOR
    assert runtime.write(0, [(b"k", b"w")], lambda: applied.append("refused")) == E.NOT_COORDINATOR
    store.append_error = E.NONE
    store.replication_error = E.REQUEST_TIMED_OUT
    assert await runtime.write_replicated(0, [(b"k", b"x")], lambda: applied.append("unreplicated"),
                                          1000) == E.REQUEST_TIMED_OUT
    store.replication_error = E.NONE
    assert await runtime.write_replicated(0, [(b"k", b"y")], lambda: applied.append("replicated"), 1000) == E.NONE
    assert applied == ["written", "replicated"]
