"""Transactions in a partition's log (KIP-98), on real logs in a temporary dir: open transactions
hold the last stable offset back, markers end them, aborted ones are indexed in the marker's
segment (.txnindex, Kafka's layout) for read_committed fetches, and all of it survives a restart,
a truncation and replication; the cleaner never keeps an aborted record."""

from __future__ import annotations

import uuid

import pytest
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.storage.dir_io import DirGuard
from minikafka.storage.errors import InvalidProducerEpochError, TransactionCoordinatorFencedError
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import Log, LogConfig
from minikafka.storage.txn_index import AbortedTxn
from protocol.record_codec import ControlMarker
from tests.unit.storage.helpers import decode_batches, read_all

TOPIC_ID = uuid.UUID(int=0x7A)
NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=400, file_delete_delay_ms=0)
COMMIT, ABORT = ControlMarker(False, 1), ControlMarker(True, 1)


def txn_batch(pid: int, seq: int, count: int = 2, *, epoch: int = 0, transactional: bool = True) -> bytes:
    builder = MemoryRecordsBuilder(2, 0, 1 << 20, transactional=transactional, producer_id=pid,
                                   producer_epoch=epoch, base_sequence=seq)
    for i in range(count):
        builder.append(NOW + i, b"k%d" % (seq + i), b"v" * 40)
    builder.close()
    return bytes(builder.buffer())


def new_log(tmp_path, config: LogConfig = CONFIG) -> Log:
    log_dir = str(tmp_path)
    return Log.create(log_dir, "t", 0, TOPIC_ID, config, DirGuard(log_dir, LogDirFailureChannel()))


def reload(log: Log, config: LogConfig = CONFIG) -> Log:
    log.close()
    return Log.load(log.log_dir, log.dir_path, config, DirGuard(log.log_dir, LogDirFailureChannel()), clean=False,
                    high_watermark=log.high_watermark)


def test_open_transactions_hold_the_last_stable_offset_until_their_marker_is_replicated(tmp_path) -> None:
    log = new_log(tmp_path)
    log.append_as_leader(txn_batch(-1, -1, transactional=False), 0, NOW)  # offsets 0-1
    log.append_as_leader(txn_batch(7, 0), 0, NOW)  # 2-3, producer 7's transaction opens at 2
    log.append_as_leader(txn_batch(8, 0), 0, NOW)  # 4-5, producer 8's at 4
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 2
    log.append_marker(7, 0, COMMIT, 0, NOW)  # 6
    assert log.last_stable_offset == 2, "the commit is not replicated yet"
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 4, "producer 8's transaction is still open"
    log.append_marker(8, 0, ABORT, 0, NOW)  # 7
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 8
    assert log.aborted_transactions(0, 8) == [AbortedTxn(8, 4, 7, 8)]
    assert log.aborted_transactions(6, 8) == [AbortedTxn(8, 4, 7, 8)], "its marker is in the range"
    assert log.aborted_transactions(0, 4) == [], "before its first offset"
    markers = [b for b in decode_batches(read_all(log)) if b.is_control_batch]
    assert [(b.producer_id, b.base_offset) for b in markers] == [(7, 6), (8, 7)]
    log.close()


def test_transactions_open_and_aborted_survive_a_restart(tmp_path) -> None:
    log = new_log(tmp_path)
    for seq in range(0, 12, 2):
        log.append_as_leader(txn_batch(7, seq), 0, NOW)  # producer 7's transaction, over several segments
    log.append_marker(7, 0, ABORT, 0, NOW)
    log.append_as_leader(txn_batch(9, 0), 0, NOW)  # producer 9's, open at a crash
    log.high_watermark = log.log_end_offset
    open_at = log.log_end_offset - 2
    assert len(log.segments) > 2
    log = reload(log)
    try:
        assert log.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(7, 0, 12, 13)]
        assert log.last_stable_offset == open_at
        log.append_marker(9, 0, COMMIT, 0, NOW)
        log.high_watermark = log.log_end_offset
        assert log.last_stable_offset == log.log_end_offset
    finally:
        log.close()


def test_truncation_forgets_the_transactions_its_cut_removes_and_reopens_the_others(tmp_path) -> None:
    log = new_log(tmp_path, LogConfig(segment_bytes=1 << 20))
    log.append_as_leader(txn_batch(7, 0), 0, NOW)  # 0-1
    log.append_marker(7, 0, ABORT, 0, NOW)  # 2
    log.append_as_leader(txn_batch(8, 0), 0, NOW)  # 3-4
    log.append_marker(8, 0, COMMIT, 0, NOW)  # 5
    log.high_watermark = 3
    log.truncate_to(3)
    assert log.aborted_transactions(0, 3) == [AbortedTxn(7, 0, 2, 3)]
    log.append_as_leader(txn_batch(8, 0), 0, NOW)  # 3-4 again, from a new leader
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 3, "producer 8's transaction is open again"
    log.close()


def test_a_follower_indexes_the_aborted_transactions_it_replicates(tmp_path) -> None:
    leader = new_log(tmp_path / "leader")
    leader.append_as_leader(txn_batch(7, 0), 0, NOW)
    leader.append_marker(7, 0, ABORT, 0, NOW)
    follower = new_log(tmp_path / "follower")
    follower.append_as_follower(read_all(leader))
    follower.high_watermark = follower.log_end_offset
    assert follower.aborted_transactions(0, 3) == [AbortedTxn(7, 0, 2, 3)]
    assert follower.last_stable_offset == 3
    leader.close()
    follower.close()


def test_a_marker_from_an_older_producer_or_coordinator_epoch_is_refused(tmp_path) -> None:
    log = new_log(tmp_path)
    log.append_as_leader(txn_batch(7, 0, epoch=3), 0, NOW)
    log.append_marker(7, 3, ControlMarker(False, 5), 0, NOW)
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(7, 2, ABORT, 0, NOW)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_marker(7, 3, ControlMarker(True, 4), 0, NOW)
    log.close()
