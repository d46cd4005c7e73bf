"""The one gate every OS call touching a log dir passes through.

Usage: ``with guard(log_dir, channel, partition): os.pwrite(...)``.  An OSError inside the
block reports the dir to the LogDirFailureChannel and surfaces as KafkaStorageError naming
the dir and partition, so no caller ever sees a bare OSError from a log dir.  A dir already
reported offline is not touched again: entering its guard raises at once.
"""

from __future__ import annotations

from types import TracebackType

from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.failure_channel import LogDirFailureChannel


class DirGuard:
    """Reusable context manager bound to one log dir (and optionally one partition).

    Stateless apart from its binding, so one instance may be entered any number of times,
    including nested; Segment and Log keep one each to avoid an allocation per I/O call.
    """

    __slots__ = ("log_dir", "channel", "partition")

    def __init__(self, log_dir: str, channel: LogDirFailureChannel, partition: str | None = None) -> None:
        self.log_dir = log_dir
        self.channel = channel
        self.partition = partition

    def for_partition(self, partition: str) -> DirGuard:
        return DirGuard(self.log_dir, self.channel, partition)

    def __enter__(self) -> DirGuard:
        if self.log_dir in self.channel.offline_dirs:
            raise KafkaStorageError(self.log_dir, self.partition, None)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, OSError):
            self.channel.report(self.log_dir, exc)
            raise KafkaStorageError(self.log_dir, self.partition, exc) from exc


def guard(log_dir: str, channel: LogDirFailureChannel, partition: str | None = None) -> DirGuard:
    return DirGuard(log_dir, channel, partition)
