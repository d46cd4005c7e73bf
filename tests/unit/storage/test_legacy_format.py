"""Segments a Kafka broker wrote in the message formats before record batches (magic 0 and 1,
Kafka before 0.11, still on the disks of clusters upgraded since): minikafka does not read
them, and refuses to start on them rather than take them for a torn tail and cut them away."""

from __future__ import annotations

import os

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from minikafka.storage.errors import LegacyMessageFormatError
from tests.unit.storage.helpers import decode_records, make_batch, open_log, read_all


def legacy_messages(magic: int, first_offset: int, count: int) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for i in range(count):
        builder.append(first_offset + i, timestamp=1_000 + i if magic else None, key=b"k%d" % i, value=b"v" * 30)
    return bytes(builder.build())


def segment_of(log_dir: str, base: int = 0) -> str:
    return os.path.join(log_dir, f"{base:020d}.log")


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("clean", [True, False])
def test_a_segment_of_legacy_messages_is_refused_and_left_as_it_was(make_log, magic: int, clean: bool) -> None:
    log = make_log()
    dir_path = log.dir_path
    log.close()
    for name in os.listdir(dir_path):
        os.unlink(os.path.join(dir_path, name))
    # An old segment of legacy messages, then the segment Kafka rolled after its upgrade.
    old = legacy_messages(magic, 0, 5)
    with open(segment_of(dir_path), "wb") as handle:
        handle.write(old)
    newer = (5).to_bytes(8, "big") + make_batch(3)[8:]  # its base offset (outside the CRC)
    with open(segment_of(dir_path, 5), "wb") as handle:
        handle.write(newer)
    with pytest.raises(LegacyMessageFormatError, match=rf"{segment_of(dir_path)} holds message format v{magic}"):
        open_log(dir_path, clean=clean, recovery_point=0)
    assert open(segment_of(dir_path), "rb").read() == old
    assert open(segment_of(dir_path, 5), "rb").read() == newer


def test_legacy_messages_after_record_batches_are_not_cut_as_a_torn_tail(make_log) -> None:
    log = make_log()
    log.append_as_leader(make_batch(2), 0, 0)
    path = segment_of(log.dir_path)
    log.close()  # no clean shutdown: recovery walks every batch
    with open(path, "ab") as handle:
        handle.write(legacy_messages(1, 2, 3))  # a broker whose message format was set back
    size = os.path.getsize(path)
    with pytest.raises(LegacyMessageFormatError, match="at position"):
        open_log(log.dir_path, recovery_point=0)
    assert os.path.getsize(path) == size


def test_zeros_after_a_crash_are_still_a_torn_tail(make_log) -> None:
    """Magic 0 is also what a run of zeros reads as: without a legacy message's CRC it is cut."""
    log = make_log()
    log.append_as_leader(make_batch(2), 0, 0)
    expected = decode_records(read_all(log))
    path = segment_of(log.dir_path)
    size = os.path.getsize(path)
    log.close()
    with open(path, "ab") as handle:
        handle.write(bytes(4096))
    reopened = open_log(log.dir_path, recovery_point=0)
    assert decode_records(read_all(reopened)) == expected
    assert os.path.getsize(path) == size
    reopened.close()
