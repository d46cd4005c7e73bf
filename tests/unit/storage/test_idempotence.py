"""Idempotent producers: duplicates, sequence gaps, epoch fencing, and state across restarts."""

from __future__ import annotations

import os
import struct

import pytest
from crc32c import crc32c

from minikafka.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from minikafka.storage.log import LogConfig
from minikafka.storage.producer_state import BatchMetadata, ProducerEntry, ProducerStateManager
from tests.unit.storage.helpers import decode_batches, make_batch, open_log, read_all

PID = 4_000


def produce(log, seq: int, count: int = 2, epoch: int = 0, pid: int = PID, now: int = 0):
    data = make_batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq, value_size=80)
    return log.append_as_leader(data, 0, now)


def test_retry_of_a_recent_batch_returns_its_original_offsets(make_log):
    log = make_log()
    first = produce(log, 0)
    produce(log, 2)
    log.append_as_leader(make_batch(3), 0, 0)  # a non-idempotent producer in between
    produce(log, 4)
    size = log.size_bytes
    retry = produce(log, 0)
    assert retry.duplicate
    assert (retry.base_offset, retry.last_offset) == (first.base_offset, first.last_offset) == (0, 1)
    assert log.size_bytes == size and log.log_end_offset == 9
    assert produce(log, 4).base_offset == 7
    assert produce(log, 6).base_offset == 9


def test_only_the_last_five_batches_are_remembered(make_log):
    log = make_log()
    for seq in range(0, 12, 2):
        produce(log, seq)
    assert produce(log, 2).duplicate  # the 5th most recent
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 0)  # the 6th: too old to recognise


def test_sequence_gap_is_rejected_without_appending(make_log):
    log = make_log()
    produce(log, 0)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 3)
    with pytest.raises(OutOfOrderSequenceError):
        # One bad batch spoils the whole request, even after a good one.
        log.append_as_leader(
            make_batch(2, producer_id=PID, producer_epoch=0, base_sequence=2)
            + make_batch(2, producer_id=PID, producer_epoch=0, base_sequence=5),
            0, 0,
        )
    assert log.log_end_offset == 2
    assert produce(log, 2).base_offset == 2


def test_epochs_fence_old_producers_and_new_epochs_start_at_zero(make_log):
    log = make_log()
    produce(log, 0, epoch=3)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 2, epoch=2)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 5, epoch=4)
    assert produce(log, 0, epoch=4).base_offset == 2
    # The cached batches belong to the old epoch: the same sequence is new data now.
    assert not produce(log, 2, epoch=4).duplicate


def test_unknown_producer_is_accepted_at_any_sequence_and_sequences_wrap(make_log):
    log = make_log()
    assert produce(log, 2**31 - 2, count=1).base_offset == 0
    assert produce(log, 2**31 - 1, count=1).base_offset == 1
    assert produce(log, 0, count=3).base_offset == 2  # wraps to 0
    assert produce(log, 3, count=1, pid=PID + 1, epoch=9).base_offset == 5


def test_duplicate_is_recognised_after_an_unclean_reopen(make_log):
    config = LogConfig(segment_bytes=700)
    log = make_log(config)
    results = [produce(log, seq) for seq in range(0, 24, 2)]
    assert len(log.segments) > 3  # rolls wrote snapshots
    assert any(n.endswith(".snapshot") for n in os.listdir(log.dir_path))
    log.close()  # crash: no snapshot at the log end
    reopened = open_log(log.dir_path, config, recovery_point=log.segments[-2].base_offset)
    for seq, original in [(22, results[-1]), (18, results[-3]), (14, results[-5])]:
        retry = produce(reopened, seq)
        assert retry.duplicate, seq
        assert (retry.base_offset, retry.last_offset) == (original.base_offset, original.last_offset)
    with pytest.raises(OutOfOrderSequenceError):
        produce(reopened, 30)
    assert produce(reopened, 24).base_offset == 24
    reopened.close()


def test_producer_state_without_any_snapshot_is_replayed_from_the_log(make_log):
    log = make_log()
    produce(log, 0, epoch=5)
    produce(log, 2, epoch=5)
    log.close()
    assert not any(n.endswith(".snapshot") for n in os.listdir(log.dir_path))
    reopened = open_log(log.dir_path)
    assert produce(reopened, 2, epoch=5).duplicate
    with pytest.raises(InvalidProducerEpochError):
        produce(reopened, 4, epoch=4)
    with pytest.raises(OutOfOrderSequenceError):
        produce(reopened, 6, epoch=5)
    reopened.close()


def test_clean_shutdown_snapshot_is_kafkas_layout(make_log):
    log = make_log()
    produce(log, 0, count=3)
    produce(log, 3, count=2)
    log.flush()
    log.take_producer_snapshot()
    log.close()
    with open(os.path.join(log.dir_path, "00000000000000000005.snapshot"), "rb") as handle:
        data = handle.read()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert version == 1 and crc == crc32c(data[6:])
    entries = list(struct.iter_unpack(">qhiqiqiq", data[10:]))
    assert count == len(entries) == 2
    # Oldest first, so a Kafka reader (last entry wins) sees the newest batch.
    pid, epoch, last_seq, last_offset, offset_delta, _, coordinator_epoch, txn_first = entries[-1]
    assert (pid, epoch, last_seq, last_offset, offset_delta) == (PID, 0, 4, 4, 1)
    assert (coordinator_epoch, txn_first) == (-1, -1)
    reopened = open_log(log.dir_path, clean=True)
    assert produce(reopened, 0, count=3).duplicate
    assert produce(reopened, 5).base_offset == 5
    reopened.close()


def test_snapshot_round_trip_and_corrupt_snapshot_is_ignored(tmp_path):
    from minikafka.storage.dir_io import DirGuard
    from minikafka.storage.failure_channel import LogDirFailureChannel

    manager = ProducerStateManager(str(tmp_path), DirGuard(str(tmp_path), LogDirFailureChannel()))
    entry = ProducerEntry(7, 2)
    entry.batches.extend([BatchMetadata(2**31 - 1, 1, 10, 12, 99), BatchMetadata(2, 2, 13, 13, 100)])
    manager.producers = {7: entry, 8: ProducerEntry(8, 0)}
    manager.take_snapshot(20)
    manager.take_snapshot(30)
    with open(tmp_path / "00000000000000000030.snapshot", "r+b") as handle:
        handle.seek(12)
        handle.write(b"\xff")
    loaded = manager.load(100, [0, 20])  # 20 a segment's base, 30 the newest
    assert loaded == 20
    assert not (tmp_path / "00000000000000000030.snapshot").exists()
    assert list(manager.producers[7].batches) == list(entry.batches)
    assert manager.producers[8].epoch == 0 and not manager.producers[8].batches


def test_a_load_keeps_the_snapshots_at_segment_bases_and_the_newest_at_or_below_the_log_end(tmp_path):
    from minikafka.storage.dir_io import DirGuard
    from minikafka.storage.failure_channel import LogDirFailureChannel

    manager = ProducerStateManager(str(tmp_path), DirGuard(str(tmp_path), LogDirFailureChannel()))
    manager.producers = {7: ProducerEntry(7, 2)}
    for offset in (10, 15, 20, 25, 40):
        manager.take_snapshot(offset)
    manager.producers = {}
    # 40 was written before the log was cut back to 30; 15 is at no segment's base.
    assert manager.load(30, [0, 10, 20]) == 25
    assert manager.snapshot_offsets() == [10, 20, 25]
    assert manager.producers[7].epoch == 2
    assert manager.load(30, [0, 10, 20]) == 25, "a second load changes nothing"


def test_follower_replay_keeps_leader_offsets(make_log):
    leader = make_log(topic="leader")
    produce(leader, 0)
    produce(leader, 2)
    follower = make_log(topic="follower")
    follower.append_as_follower(read_all(leader))
    assert [b.producer_id for b in decode_batches(read_all(follower))] == [PID, PID]
    # Had the follower to take over, it recognises the producer's retry.
    assert produce(follower, 2).duplicate


def test_shutdown_snapshots_do_not_pile_up(make_log):
    log = make_log(LogConfig(segment_bytes=700))
    for restart in range(4):
        for seq in range(4 * restart, 4 * restart + 4, 2):
            produce(log, seq)
        log.flush()
        log.take_producer_snapshot()
        log.close()
        log = open_log(log.dir_path, LogConfig(segment_bytes=700), clean=True)
    snapshots = sorted(int(n[:20]) for n in os.listdir(log.dir_path) if n.endswith(".snapshot"))
    bases = [s.base_offset for s in log.segments]
    assert snapshots[-1] == log.log_end_offset
    assert all(offset in bases for offset in snapshots[:-1])
    assert produce(log, 14).duplicate
    log.close()
