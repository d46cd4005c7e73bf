"""Where storage code reports a log dir that has failed."""

from __future__ import annotations

from collections.abc import Callable

FailureListener = Callable[[str, Exception], None]


class LogDirFailureChannel:
    """Owns the set of offline log dirs and the listeners told when a dir goes offline.

    Any storage object may call ``report`` (normally through dir_io.guard); the broker
    wires listeners that take the dir's replicas offline.  Event-loop thread only.
    """

    def __init__(self) -> None:
        self.offline_dirs: set[str] = set()
        # The first error of each offline dir, for operators (logs, DescribeLogDirs, startup).
        self.causes: dict[str, Exception] = {}
        self._listeners: list[FailureListener] = []

    def add_listener(self, listener: FailureListener) -> None:
        self._listeners.append(listener)

    def report(self, log_dir: str, cause: Exception) -> None:
        if log_dir in self.offline_dirs:
            return
        self.offline_dirs.add(log_dir)
        self.causes[log_dir] = cause
        for listener in list(self._listeners):
            listener(log_dir, cause)

    def is_offline(self, log_dir: str) -> bool:
        return log_dir in self.offline_dirs
