"""The runtime both coordinators run on (Kafka 4's coordinator-common CoordinatorRuntime): which
partitions of its internal topic a coordinator serves, and how a change reaches its state.

- Load and unload. A coordinator serves the keys (group ids, transactional ids) of the
  partitions of its topic that this broker leads. A partition is loaded (its records replayed
  into the coordinator's state) when this broker becomes its leader, or on the first request
  for one of its keys; it is unloaded (its state dropped, waiting requests answered) when the
  broker stops leading it or its log dir fails. A request for a key of a partition this broker
  cannot serve is answered with the partition's status: NOT_COORDINATOR (another broker
  leads it) or COORDINATOR_NOT_AVAILABLE (loading is not possible yet: no topic, no log).
- Write-then-apply. A change is appended to the partition as the broker's own write and only
  then applied to memory; a write that fails changes nothing and its error is the answer. A
  coordinator that needs the write on every in-sync replica before it applies (the
  transaction coordinator; acks=all) waits for that too; the group coordinator's handlers wait
  for it before they answer.

Event-loop thread only. Each ``CoordinatorRuntime`` belongs to one coordinator (the group or the
transaction coordinator), its only caller; the state it loads and unloads is that coordinator's,
reached through the two callbacks the coordinator gives it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, KeysView, Sequence
from typing import Protocol

from minikafka.coordinator.topic import KeyValue, LoggedRecord, TxnProducer
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class CoordinatorStore(Protocol):
    """A coordinator's internal topic: CoordinatorTopic in the broker, a fake in unit tests."""

    @property
    def partition_count(self) -> int: ...

    def status(self, partition: int) -> ErrorCode:
        """NONE when this broker leads the partition and can write it."""

    def append(self, partition: int, records: Sequence[KeyValue], txn: TxnProducer | None = None) -> ErrorCode: ...

    async def replicated(self, partition: int, timeout_ms: int) -> ErrorCode:
        """Wait until every in-sync replica has what was appended so far."""

    def read(self, partition: int) -> Iterator[LoggedRecord]: ...


class CoordinatorRuntime:
    """The partitions of ``topic`` one coordinator has loaded, and its writes to them.

    ``replay(partition, records)`` builds the coordinator's state of a partition from its
    records; ``drop(partition)`` forgets it and answers whoever waits on it, returning how many
    keys went. ``epoch_of`` (the transaction coordinator: the partition's leader epoch, which its
    markers carry) makes a partition loaded in an older epoch load again; without it a loaded
    partition stays loaded until it is unloaded.
    """

    def __init__(self, topic: str, store: CoordinatorStore, replay: Callable[[int, Iterator[LoggedRecord]], None],
                 drop: Callable[[int], int], keys_noun: str, epoch_of: Callable[[int], int] | None = None) -> None:
        self.topic = topic
        self.store = store
        self._replay = replay
        self._drop = drop
        self._keys_noun = keys_noun
        self._epoch_of = epoch_of
        self._loaded: dict[int, int] = {}  # partition -> the epoch it was loaded in

    # ---- load and unload --------------------------------------------------------------------
    @property
    def loaded_partitions(self) -> KeysView[int]:
        return self._loaded.keys()

    def loaded_epoch(self, partition: int) -> int | None:
        """The epoch the partition was loaded in; None when it is not loaded."""
        return self._loaded.get(partition)

    def _current_epoch(self, partition: int) -> int:
        return self._epoch_of(partition) if self._epoch_of is not None else 0

    def partition_error(self, partition: int) -> ErrorCode:
        """NONE if the coordinator serves the partition now (loading it if need be), else why not."""
        status = self.store.status(partition)
        if status != ErrorCode.NONE:
            return status
        if self._loaded.get(partition) != self._current_epoch(partition):
            self.load(partition)
        return ErrorCode.NONE

    def load_all(self) -> None:
        """Load every partition this broker can serve now (broker startup)."""
        for partition in range(self.store.partition_count):
            if self.store.status(partition) != ErrorCode.NONE:
                log.error("%s of %s partition %d are unavailable: its log is offline", self._keys_noun, self.topic,
                          partition)
                continue
            self.load(partition)

    def load(self, partition: int) -> None:
        """Replay the partition into the coordinator's state (what it held of it before goes)."""
        if partition in self._loaded:
            self.unload(partition)
        epoch = self._current_epoch(partition)
        self._replay(partition, self.store.read(partition))
        self._loaded[partition] = epoch

    def unload(self, partition: int) -> int:
        """Forget the partition's state; how many keys went (0 when it was not loaded)."""
        if self._loaded.pop(partition, None) is None:
            return 0
        return self._drop(partition)

    def leadership_changed(self, partition: int, leads: bool, reload: bool = False) -> None:
        """This broker now leads the partition (load it; with ``reload``, again even if loaded) or
        no longer leads it (unload it: clients find the new coordinator)."""
        if leads:
            if (reload or partition not in self._loaded) and self.store.status(partition) == ErrorCode.NONE:
                self.load(partition)
        elif partition in self._loaded:
            gone = self.unload(partition)
            log.info("no longer coordinating the %d %s of %s-%d", gone, self._keys_noun, self.topic, partition)

    def unload_unavailable(self) -> None:
        """Unload every loaded partition the broker can no longer write (its log dir failed)."""
        for partition in sorted(self._loaded):
            if self.store.status(partition) == ErrorCode.NONE:
                continue
            gone = self.unload(partition)
            log.error("%s-%d is offline: %d %s unloaded until it is back", self.topic, partition, gone,
                      self._keys_noun)

    def unload_all(self) -> None:
        """Forget every partition (shutdown)."""
        self._loaded.clear()

    # ---- write-then-apply -------------------------------------------------------------------
    def write(self, partition: int, records: Sequence[KeyValue], apply: Callable[[], None] | None = None,
              txn: TxnProducer | None = None) -> ErrorCode:
        """Append the records as the broker's own write; ``apply`` the change only if it was
        written. ``txn``: the records belong to that producer's transaction."""
        error = self.store.append(partition, records) if txn is None else self.store.append(partition, records, txn)
        if error == ErrorCode.NONE and apply is not None:
            apply()
        return error

    async def write_replicated(self, partition: int, records: Sequence[KeyValue], apply: Callable[[], None],
                               timeout_ms: int) -> ErrorCode:
        """As ``write``, but ``apply`` only once every in-sync replica has the records (acks=all)."""
        error = self.store.append(partition, records)
        if error == ErrorCode.NONE:
            error = await self.store.replicated(partition, timeout_ms)
        if error == ErrorCode.NONE:
            apply()
        return error
