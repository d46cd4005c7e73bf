"""Early writeback of appended log data: Linux's ``sync_file_range``.

An append only dirties the page cache. The kernel writes that back when it gets round to it, or
all at once when a rolled segment is fsynced. On ext4 (data=ordered) every other fsync of the file
system then waits for that writeback: ZooKeeper's transaction log where it shares the disk, and
the broker's own checkpoints, such as the leader-epoch checkpoint written when a replica becomes
leader. After a reassignment's new replica had written 1 GiB, ZooKeeper's next commit and the new
leader's checkpoint each waited about 0.15 s behind its rolled segment's fsync.

So the Log starts the writeback of every ``WRITEBACK_BYTES`` it appends, as RocksDB's
``bytes_per_sync`` and PostgreSQL's ``*_flush_after`` do, and the fsync at a roll finds little
left to write. ``SYNC_FILE_RANGE_WRITE`` starts the writes and does not wait for them; durability
stays the fsync's job. The call can still block while the device's queue is full, so the Log
makes it on its background threads. Python's ``os`` module has no binding for it, hence ctypes.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

WRITEBACK_BYTES = 16 * 1024 * 1024
_SYNC_FILE_RANGE_WRITE = 2


def _bind() -> Callable[[int, int, int], None] | None:
    libc = ctypes.CDLL(None, use_errno=True)
    call = getattr(libc, "sync_file_range", None)
    if call is None:  # not Linux: the kernel's own writeback and the fsync at a roll do it all
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    call.restype = ctypes.c_int

    def start_writeback(fd: int, offset: int, length: int) -> None:
        """Start writing back the dirty pages of ``fd`` in [offset, offset + length)."""
        if call(fd, offset, length, _SYNC_FILE_RANGE_WRITE) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))

    return start_writeback


start_writeback = _bind()
