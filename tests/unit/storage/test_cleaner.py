"""The log cleaner on real logs in a temporary dir (its threads included, no sockets), with the
clock passed in: what a clean keeps, when a log is due, tombstones and their horizon, producers'
sequences, crash leftovers, and what makes a clean stand down."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from typing import Any

import pytest
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.storage import cleaner as cleaner_module
from minikafka.storage.checkpoints import CLEANER_CHECKPOINT, read_offset_checkpoint
from minikafka.storage.cleaner import (
    CleanerConfig,
    CleanResult,
    LogCleaner,
    clean_log,
    cleanable,
    remove_cleaned_files,
)
from minikafka.storage.dir_io import DirGuard
from minikafka.storage.errors import InvalidRecordError
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import Log, LogConfig
from minikafka.storage.log_manager import LogManager
from minikafka.storage.offset_map import OffsetMap
from minikafka.storage.segment import segment_name
from protocol.record_codec import ControlMarker
from tests.unit.storage.helpers import decode_batches, read_all

TOPIC_ID = uuid.UUID(int=0xC0FFEE)
NOW = 1_700_000_000_000
COMPACT = LogConfig(cleanup_policy=("compact",), segment_bytes=250, min_cleanable_dirty_ratio=0.1,
                    file_delete_delay_ms=0, delete_retention_ms=60_000)


def keyed(records: list[tuple[bytes | None, bytes | None]], *, timestamp: int = NOW, compression: int = 0,
          producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False) -> bytes:
    builder = MemoryRecordsBuilder(2, compression, 1 << 20, producer_id=producer_id, producer_epoch=producer_epoch,
                                   base_sequence=base_sequence, transactional=transactional)
    for i, (key, value) in enumerate(records):
        builder.append(timestamp + i, key, value)
    builder.close()
    return bytes(builder.buffer())


def contents(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for batch in decode_batches(read_all(log)) for r in batch]


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def channel() -> LogDirFailureChannel:
    return LogDirFailureChannel()


@pytest.fixture
def manager(tmp_path, channel):
    made = LogManager([str(tmp_path / "d1"), str(tmp_path / "d2")], 1, "cluster", LogConfig(), channel)
    made.startup()
    yield made
    made.shutdown()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def cleaner(manager, channel, clock):
    made = LogCleaner(manager, channel, CleanerConfig(backoff_ms=10), now_ms=clock)
    yield made
    await made.stop()


def compacted_log(manager: LogManager, config: LogConfig = COMPACT, name: str = "table") -> Log:
    return manager.get_or_create_log(name, 0, TOPIC_ID, config)


def append(log: Log, records: list[tuple[bytes | None, bytes | None]], **kwargs) -> None:
    log.append_as_leader(keyed(records, **kwargs), 0, NOW)
    log.high_watermark = log.log_end_offset


def fill(log: Log, rounds: int, value: bytes = b"v") -> None:
    """``rounds`` batches, each updating keys k0-k3."""
    for _ in range(rounds):
        append(log, [(b"k%d" % k, value) for k in range(4)])


async def clean(cleaner: LogCleaner) -> list[tuple[str, int]]:
    started = cleaner.clean_what_is_due()
    await cleaner.wait_for_cleans()
    return started


async def test_a_clean_keeps_the_latest_record_of_each_key_at_its_offset(manager, cleaner) -> None:
    log = compacted_log(manager)
    for round_ in range(6):
        append(log, [(b"k%d" % k, b"v%d-%d" % (k, round_)) for k in range(4)])
    assert len(log.segments) > 2
    before = log.log_end_offset
    active_base = log.segments[-1].base_offset
    assert await clean(cleaner) == [("table", 0)]
    records = contents(log)
    cleaned = [r for r in records if r[0] < active_base]
    latest = {key: (offset, value) for offset, key, value in records}
    assert len({key for _, key, _ in cleaned}) == len(cleaned), "one record per key below the active segment"
    assert latest == {b"k%d" % k: (20 + k, b"v%d-5" % k) for k in range(4)}
    assert [r for r in records if r[0] >= active_base] == [
        (o, b"k%d" % (o % 4), b"v%d-%d" % (o % 4, o // 4)) for o in range(active_base, before)], "active: untouched"
    assert log.log_end_offset == before and log.clean_until == active_base
    assert read_offset_checkpoint(os.path.join(log.log_dir, CLEANER_CHECKPOINT),
                                  DirGuard(log.log_dir, LogDirFailureChannel())) == {("table", 0): active_base}
    assert not [n for n in os.listdir(log.dir_path) if n.endswith((".cleaned", ".swap", ".deleted"))]


async def test_nothing_at_or_above_the_high_watermark_is_cleaned(manager, cleaner) -> None:
    log = compacted_log(manager)
    for round_ in range(6):
        append(log, [(b"k", b"v%d" % round_)] * 4)
    log.high_watermark = 6  # followers have only this much
    await clean(cleaner)
    assert log.clean_until == 6
    assert [o for o, _, _ in contents(log) if o >= 6] == list(range(6, 24))


async def test_a_log_under_its_dirty_ratio_waits_and_one_past_max_compaction_lag_does_not(
        manager, cleaner, clock) -> None:
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=250, min_cleanable_dirty_ratio=0.9,
                       max_compaction_lag_ms=10_000, file_delete_delay_ms=0)
    log = compacted_log(manager, config)
    for round_ in range(6):
        append(log, [(b"k%d" % k, b"v%d" % round_) for k in range(4)])
    assert await clean(cleaner) == [("table", 0)], "all of it is dirty"
    for round_ in range(2):
        append(log, [(b"k%d" % k, b"w%d" % round_) for k in range(4)])
    state = cleanable(log, clock.now, None)
    assert state is not None and 0 < state.dirty_ratio < 0.9
    assert await clean(cleaner) == [], "under min.cleanable.dirty.ratio"
    clock.now += 20_000
    assert await clean(cleaner) == [("table", 0)], "dirty records older than max.compaction.lag.ms"


async def test_records_younger_than_min_compaction_lag_are_not_cleaned(manager, cleaner, clock) -> None:
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=250, min_cleanable_dirty_ratio=0.1,
                       min_compaction_lag_ms=5_000, file_delete_delay_ms=0)
    log = compacted_log(manager, config)
    for round_ in range(6):
        append(log, [(b"k", b"v%d" % round_)] * 4, timestamp=NOW + 1000 * round_)
    assert await clean(cleaner) == []
    clock.now = NOW + 1000 * 6 + 5_000
    await clean(cleaner)
    assert log.clean_until == log.segments[-1].base_offset


async def test_a_tombstone_outlives_the_clean_that_first_sees_it_by_delete_retention(manager, cleaner,
                                                                                      clock) -> None:
    log = compacted_log(manager)
    append(log, [(b"gone", b"v1"), (b"kept", b"v1")] * 4)
    append(log, [(b"gone", None)])
    for round_ in range(5):
        append(log, [(b"kept", b"v%d" % round_)] * 4)
    await clean(cleaner)
    records = contents(log)
    assert (b"gone", None) in [(k, v) for _, k, v in records], "the tombstone stays for now"
    assert b"v1" not in [v for _, k, v in records if k == b"gone"]
    marked = [b for b in decode_batches(read_all(log)) if any(r.key == b"gone" for r in b)]
    assert marked and all(b.first_timestamp == NOW + 60_000 for b in marked), "its batch holds the horizon"
    clock.now = NOW + 59_999
    assert await clean(cleaner) == [], "nothing dirty, and the horizon is not reached"
    clock.now = NOW + 60_000
    assert await clean(cleaner) == [("table", 0)], "the horizon alone makes the log due"
    assert b"gone" not in [k for _, k, _ in contents(log)]


async def test_an_idempotent_producers_last_batch_stays_empty_and_its_sequence_survives_a_restart(
        manager, cleaner, tmp_path) -> None:
    log = compacted_log(manager)
    append(log, [(b"k", b"old")] * 3, producer_id=9, producer_epoch=0, base_sequence=0)
    for round_ in range(6):
        append(log, [(b"k", b"new-%d" % round_)] * 4)
    await clean(cleaner)
    producers = [b for b in decode_batches(read_all(log)) if b.producer_id == 9]
    assert len(producers) == 1 and list(producers[0]) == [], "emptied, not dropped"
    assert (producers[0].base_offset, producers[0].last_offset_delta, producers[0].base_sequence) == (0, 2, 0)
    log.roll()  # the producer's snapshot is newer: drop it to make the restart replay the cleaned log
    for name in os.listdir(log.dir_path):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(log.dir_path, name))
    reloaded = Log.load(log.log_dir, log.dir_path, COMPACT, DirGuard(log.log_dir, LogDirFailureChannel()),
                        clean=True)
    try:
        retry = reloaded.append_as_leader(keyed([(b"k", b"old")] * 3, producer_id=9, producer_epoch=0,
                                                base_sequence=0), 0, NOW)
        assert retry.duplicate and retry.base_offset == 0, "a retry of the emptied batch is still a duplicate"
        nxt = reloaded.append_as_leader(keyed([(b"k", b"next")], producer_id=9, producer_epoch=0,
                                              base_sequence=3), 0, NOW)
        assert not nxt.duplicate
    finally:
        reloaded.close()


async def test_small_cleaned_segments_are_grouped_up_to_segment_bytes(manager, cleaner) -> None:
    log = compacted_log(manager)
    fill(log, 12)
    await clean(cleaner)  # groups are made of the segments as they were: one each here
    fill(log, 4, b"w")
    before = len(log.segments)
    await clean(cleaner)  # now the small cleaned segments go together
    assert len(log.segments) <= before - 3
    assert all(s.size <= COMPACT.segment_bytes for s in log.segments)


async def test_a_log_truncated_while_it_is_cleaned_keeps_its_segments(manager, cleaner) -> None:
    log = compacted_log(manager)
    fill(log, 6)
    assert cleaner.clean_what_is_due() == [("table", 0)]
    log.truncate_to(20)  # a follower told by a new leader, while the clean's thread maps the log
    await cleaner.wait_for_cleans()
    assert log.clean_until == 0 and len(contents(log)) == 20
    assert not [n for n in os.listdir(log.dir_path) if ".cleaned" in n]


async def test_an_io_error_of_a_clean_takes_its_log_dir_offline(manager, cleaner, channel) -> None:
    log = compacted_log(manager)
    fill(log, 6)
    os.mkdir(os.path.join(log.dir_path, f"{0:020d}.log.cleaned"))  # the clean cannot create its file
    await clean(cleaner)
    assert channel.offline_dirs == {log.log_dir}


async def test_cleaning_waits_while_the_log_is_moved_to_another_dir(manager, cleaner) -> None:
    log = compacted_log(manager)
    fill(log, 6)
    other = next(d for d in manager.log_dirs if d != log.log_dir)
    manager.create_future_log("table", 0, other)
    assert await clean(cleaner) == []
    manager.abandon_future_log("table", 0)
    assert await clean(cleaner) == [("table", 0)]


def test_a_compacted_topic_refuses_a_record_without_a_key(manager) -> None:
    log = compacted_log(manager)
    with pytest.raises(InvalidRecordError) as refused:
        log.append_as_leader(keyed([(b"k", b"v"), (None, b"no key"), (b"k2", b"v")], compression=1), 0, NOW)
    assert [index for index, _ in refused.value.record_errors] == [1]
    assert "without key" in str(refused.value) and log.log_end_offset == 0
    plain = manager.get_or_create_log("plain", 0, TOPIC_ID)
    plain.append_as_leader(keyed([(None, b"fine")]), 0, NOW)


def test_retention_deletes_only_under_the_delete_policy(manager) -> None:
    for policy, survives in ((("compact",), True), (("compact", "delete"), False), (("delete",), False)):
        config = LogConfig(cleanup_policy=policy, segment_bytes=250, retention_ms=1000, file_delete_delay_ms=0)
        log = manager.get_or_create_log("-".join(policy), 0, TOPIC_ID, config)
        for _ in range(6):
            log.append_as_leader(keyed([(b"k", b"v")] * 4, timestamp=NOW - 10_000), 0, NOW)
        log.enforce_retention(NOW)
        assert (log.log_start_offset == 0) is survives, policy


def test_a_decided_swap_is_finished_at_startup_and_an_undecided_one_dropped(tmp_path) -> None:
    # As a crash leaves them: the first two segments still there, their cleaned copy renamed .swap
    # (decided); the third segment's copy only written (.cleaned).
    channel = LogDirFailureChannel()
    log_dir = str(tmp_path)
    log = Log.create(log_dir, "t", 0, TOPIC_ID, COMPACT, DirGuard(log_dir, channel))
    for _ in range(8):
        log.append_as_leader(keyed([(b"k", b"v")] * 5), 0, NOW)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 3
    log.close()
    stem = os.path.join(log.dir_path, f"{0:020d}")
    with open(stem + ".log.swap", "wb") as out:  # the first two segments cleaned to their last record
        out.write(_only_last_record_of(os.path.join(log.dir_path, f"{bases[1]:020d}.log")))
    for suffix in (".index.swap", ".timeindex.swap"):
        open(stem + suffix, "wb").close()
    open(os.path.join(log.dir_path, f"{bases[2]:020d}.log.cleaned"), "wb").close()
    reloaded = Log.load(log_dir, log.dir_path, COMPACT, DirGuard(log_dir, channel), clean=False)
    try:
        assert [s.base_offset for s in reloaded.segments] == [0, *bases[2:]]
        assert [r.offset for b in decode_batches(read_all(reloaded)) for r in b][:2] == [bases[2] - 1, bases[2]]
        assert not [n for n in os.listdir(log.dir_path) if n.endswith((".swap", ".cleaned"))]
    finally:
        reloaded.close()


def _only_last_record_of(path: str) -> bytes:
    from protocol.record_codec import batch_with_records, decompress
    from protocol.record_scan import record_spans
    from protocol.records import BATCH_HEADER_SIZE, parse_batch_header
    with open(path, "rb") as source:
        data = source.read()
    while True:  # the segment's last batch
        header = parse_batch_header(data)
        if header.size == len(data):
            break
        data = data[header.size:]
    section = decompress(data[BATCH_HEADER_SIZE:header.size], header.compression)
    return batch_with_records(header, section, record_spans(section, header)[-1:])


def test_a_dirty_share_is_the_dirty_bytes_over_the_cleanable_bytes(manager) -> None:
    log = compacted_log(manager)
    fill(log, 6)
    state = cleanable(log, NOW, None)
    assert state is not None and state.dirty_ratio == 1.0
    log.clean_until = log.segments[1].base_offset
    state = cleanable(log, NOW, None)
    assert state is not None and 0 < state.dirty_ratio < 1
    assert (state.first_dirty, state.first_uncleanable) == (log.segments[1].base_offset, log.segments[-1].base_offset)


async def test_the_cleaner_runs_on_its_own_every_backoff(manager, cleaner) -> None:
    log = compacted_log(manager)
    fill(log, 6)
    cleaner.start()
    # The clean runs on a thread: a loaded machine can hold it up for seconds, so the bound is
    # generous; the loop ends as soon as the clean is seen.
    for _ in range(3000):
        if log.clean_until:
            break
        await asyncio.sleep(0.01)
    assert log.clean_until == log.segments[-1].base_offset


async def test_the_next_clean_runs_in_the_process_started_when_the_last_ended(manager, cleaner) -> None:
    # A clean's process starts a new interpreter (about 0.3 s): the spare is started when a clean
    # ends, and taken by the next; one killed while it waited is replaced; stop ends the spare.
    logs = [compacted_log(manager, name=name) for name in ("first", "second", "third")]
    fill(logs[0], 6)
    assert await clean(cleaner) == [("first", 0)]
    spare = cleaner._spare
    assert spare is not None and spare.process.is_alive()
    fill(logs[1], 6)
    assert await clean(cleaner) == [("second", 0)]
    assert spare.process.exitcode == 0, "the spare did not run the second clean"
    assert logs[1].clean_until == logs[1].segments[-1].base_offset
    killed = cleaner._spare
    assert killed is not None and killed.process.pid != spare.process.pid
    os.kill(killed.process.pid, signal.SIGKILL)
    killed.process.join(10)
    fill(logs[2], 6)
    assert await clean(cleaner) == [("third", 0)]
    assert logs[2].clean_until == logs[2].segments[-1].base_offset
    last = cleaner._spare
    assert last is not None and last.process.is_alive()
    await cleaner.stop()
    assert not last.process.is_alive() and cleaner._spare is None


async def test_an_aborted_transaction_never_hides_a_committed_value_and_is_not_kept(manager, cleaner) -> None:
    log = compacted_log(manager)
    append(log, [(b"k", b"committed")])
    log.append_as_leader(keyed([(b"k", b"aborted"), (b"j", b"aborted")], producer_id=5, producer_epoch=0,
                               base_sequence=0, transactional=True), 0, NOW)
    log.append_marker(5, 0, ControlMarker(aborted=True, coordinator_epoch=0), 0, NOW)
    fill(log, 5)
    log.high_watermark = log.log_end_offset
    await clean(cleaner)
    values = {(k, v) for _, k, v in contents(log)}
    assert (b"k", b"committed") in values and not {v for _, _, v in contents(log)} & {b"aborted"}
    assert log.aborted_transactions(0, log.log_end_offset), "the cleaned segment still indexes the abort"


async def test_cleaned_segments_too_small_for_an_index_entry_swap_in_without_index_files(
        manager, cleaner) -> None:
    # An index with no entries has no file (issue 34): the swap renames the files a clean wrote.
    log = compacted_log(manager)
    fill(log, 6)
    await clean(cleaner)
    expected = contents(log)
    sealed = log.segments[:-1]
    assert sealed and all(len(s.offset_index) == 0 for s in sealed)
    assert not [n for n in os.listdir(log.dir_path) if n.endswith(".index")]
    reloaded = Log.load(log.log_dir, log.dir_path, COMPACT, DirGuard(log.log_dir, LogDirFailureChannel()),
                        clean=False, recovery_point=0)
    try:
        assert contents(reloaded) == expected
    finally:
        reloaded.close()


def test_batches_told_dropped_by_their_offsets_alone_give_the_same_clean_as_reading_their_records(
        manager, cleaner, monkeypatch) -> None:
    # Most batches of a log of updates hold only records with later updates: a clean drops them
    # by their offsets without reading their records. The result must be byte for byte the one
    # of reading every record, with short keys (kept as they are) and long ones (as digests),
    # tombstones and a producer's last batch (kept empty) among them.
    log = compacted_log(manager, LogConfig(cleanup_policy=("compact",), segment_bytes=600,
                                           min_cleanable_dirty_ratio=0.1, file_delete_delay_ms=0,
                                           delete_retention_ms=60_000))
    long_key = b"a-key-of-more-than-sixteen-bytes-%d"
    for round_ in range(8):
        append(log, [(b"k%d" % k, b"v%d" % round_) for k in range(3)])
        append(log, [(long_key % k, None if round_ == 6 and k == 0 else b"w%d" % round_) for k in range(2)])
    append(log, [(b"k0", b"last")], producer_id=7, producer_epoch=0, base_sequence=0)
    append(log, [(b"k0", b"after")])
    append(log, [(b"k9", b"active")])
    found = cleanable(log, NOW, None)
    assert found is not None
    request = cleaner._job(found).request

    def cleaned_files(result: CleanResult) -> dict[str, bytes]:
        files = {}
        for bases in result.groups:
            for name in os.listdir(log.dir_path):
                if name.startswith(segment_name(bases[0])) and name.endswith(".cleaned"):
                    with open(os.path.join(log.dir_path, name), "rb") as handle:
                        files[name] = handle.read()
            remove_cleaned_files(log.dir_path, bases[0])
        return files

    sections_read: list[int] = []  # of each batch whose records a clean reads
    real_section = cleaner_module._section

    def section(header, data):  # type: ignore[no-untyped-def]
        sections_read.append(header.base_offset)
        return real_section(header, data)
    monkeypatch.setattr(cleaner_module, "_section", section)
    by_offsets = clean_log(request, cleaner.throttle)
    files_by_offsets, read_by_offsets = cleaned_files(by_offsets), len(sections_read)
    class EveryBatchRead:
        """The offset map, but no batch is ever dropped by its offsets alone (a compiled OffsetMap
        cannot be patched)."""

        def __init__(self, capacity: int) -> None:
            self.offset_map = OffsetMap(capacity)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.offset_map, name)

        def holds_latest(self, _first: int, _last: int) -> bool:
            return True
    monkeypatch.setattr(cleaner_module, "OffsetMap", EveryBatchRead)
    by_records = clean_log(request, cleaner.throttle)
    assert read_by_offsets < len(sections_read) - read_by_offsets, "no batch was dropped by its offsets alone"
    assert by_offsets.stats.records_kept == by_records.stats.records_kept < by_records.stats.records_read
    assert by_offsets.stats.records_read == by_records.stats.records_read
    assert files_by_offsets == cleaned_files(by_records) != {}


def test_short_keys_are_their_own_map_keys_and_never_meet_a_digest() -> None:
    short, exact = b"k1", b"sixteen-byte-key"
    assert OffsetMap.digest(short) == short
    assert OffsetMap.digest(exact) != exact and len(OffsetMap.digest(exact)) == 16
    offsets = OffsetMap(10)
    assert offsets.put_batch(0, [(0, short), (1, exact), (2, short), (3, None)], 0, 10) is None
    offsets.mapped()
    assert offsets.get(OffsetMap.digest(short)) == 2 and offsets.get(OffsetMap.digest(exact)) == 1
    assert offsets.holds_latest(1, 1) and offsets.holds_latest(0, 5) and not offsets.holds_latest(3, 9)
    assert not offsets.holds_latest(0, 0)
    # Full: a new key stops the mapping where it is, a known one is still updated.
    small = OffsetMap(1)
    assert small.put_batch(100, [(0, short), (1, short), (2, exact)], 0, 200) == 102
    assert small.get(OffsetMap.digest(short)) == 101
