"""Early writeback: the Log starts writing back each WRITEBACK_BYTES it appends
(minikafka.storage.writeback), so that the fsync at a roll, and every other fsync of the file
system queued behind it, finds little left to write. The kernel's own count of a file's dirty
pages (cachestat, Linux 6.5 and later) tells whether the appended pages left the dirty state."""

from __future__ import annotations

import ctypes
import errno
import os

import pytest

from minikafka.storage.log import Log
from minikafka.storage.writeback import WRITEBACK_BYTES, start_writeback
from tests.unit.storage.helpers import make_batch

_CACHESTAT = 451  # the syscall's number on x86-64 and arm64 alike
PAGE = os.sysconf("SC_PAGE_SIZE")

pytestmark = pytest.mark.skipif(start_writeback is None, reason="no sync_file_range on this system")


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Stat(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in
                ("nr_cache", "nr_dirty", "nr_writeback", "nr_evicted", "nr_recently_evicted")]


def dirty_pages(path: str, length: int) -> int:
    """Pages of the first ``length`` bytes of ``path`` that are dirty and not yet being written."""
    libc = ctypes.CDLL(None, use_errno=True)
    stat = _Stat()
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.syscall(_CACHESTAT, fd, ctypes.byref(_Range(0, length)), ctypes.byref(stat), 0) != 0:
            error = ctypes.get_errno()
            if error in (errno.ENOSYS, errno.EPERM):
                pytest.skip(f"cachestat is not available here: {os.strerror(error)}")
            raise OSError(error, os.strerror(error))
    finally:
        os.close(fd)
    return stat.nr_dirty


def append_batches(log: Log, batches: int) -> None:
    """Append ``batches`` batches of just under 1 MiB each."""
    batch = make_batch(64, value_size=15 * 1024)  # just under 1 MiB, a batch's default limit
    for _ in range(batches):
        log.append_as_leader(batch, 0, 0)


def test_appends_past_the_threshold_leave_the_dirty_state(make_log):
    log = make_log()
    segment = log.segments[-1]
    append_batches(log, WRITEBACK_BYTES // (1 << 20) - 2)
    assert segment.written_back_to == 0
    before = dirty_pages(segment.log_path, segment.size)
    if before < segment.size // PAGE // 2:
        pytest.skip("the kernel wrote the pages back on its own before the threshold")
    append_batches(log, 4)
    assert WRITEBACK_BYTES <= segment.written_back_to == segment.size
    # Only pages a concurrent writer had locked may still be waiting.
    assert dirty_pages(segment.log_path, segment.written_back_to) < segment.written_back_to // PAGE // 10


def test_a_truncation_moves_the_writeback_mark_back(make_log):
    log = make_log()
    append_batches(log, WRITEBACK_BYTES // (1 << 20) + 2)
    segment = log.segments[-1]
    assert segment.written_back_to == segment.size
    log.truncate_to(log.log_end_offset // 2)
    assert segment.written_back_to == segment.size
    # The next mark counts from the new end, so the rewritten range is written back too.
    append_batches(log, WRITEBACK_BYTES // (1 << 20) + 2)
    assert segment.written_back_to == segment.size


def test_a_bad_fd_is_an_os_error():
    with pytest.raises(OSError) as raised:
        start_writeback(-1, 0, PAGE)  # type: ignore[misc]
    assert raised.value.errno == errno.EBADF
