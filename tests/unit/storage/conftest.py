from __future__ import annotations

import uuid

import pytest

from minikafka.storage.dir_io import DirGuard
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log import Log, LogConfig


@pytest.fixture
def channel() -> LogDirFailureChannel:
    return LogDirFailureChannel()


@pytest.fixture
def log_dir(tmp_path) -> str:
    path = tmp_path / "logs"
    path.mkdir()
    return str(path)


@pytest.fixture
def topic_id() -> uuid.UUID:
    return uuid.UUID("7a1c6b2e-3f4d-4e5a-9b8c-0d1e2f3a4b5c")


@pytest.fixture
def make_log(log_dir, channel, topic_id):
    created: list[Log] = []

    def factory(config: LogConfig | None = None, topic: str = "events", partition: int = 0) -> Log:
        log = Log.create(log_dir, topic, partition, topic_id, config or LogConfig(), DirGuard(log_dir, channel))
        created.append(log)
        return log

    yield factory
    for log in created:
        log.close()
