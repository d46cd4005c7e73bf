"""A change asked of a cluster broker while it has no ZooKeeper session (ZooKeeper away, or its
session expired and not yet renewed) is answered NOT_CONTROLLER, which clients retry, instead of
an exception that closes the client's connection. The ZooKeeper client here stands in for
kazoo's at the moment its session is gone: every call raises what kazoo raises then."""

from __future__ import annotations

from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss, SessionExpiredError

from minikafka.config.broker import BrokerConfig
from minikafka.controller.zk_admin import ZkClusterAdmin
from minikafka.metadata.cache import MetadataCache
from protocol.errors import ErrorCode


class SessionGone:
    def __init__(self, error: type[Exception]) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Any:
        async def call(*_args: Any, **_kwargs: Any) -> Any:
            raise self.error()
        return call


@pytest.mark.parametrize("error", [SessionExpiredError, ConnectionLoss])
async def test_changes_without_a_zookeeper_session_are_answered_not_controller(error: type[Exception]) -> None:
    admin = ZkClusterAdmin(BrokerConfig({"zookeeper.connect": "127.0.0.1:1"}), SessionGone(error),  # type: ignore[arg-type]
                           MetadataCache(), lambda: None, {})
    created = await admin.create_topic("orders", 3, 1, {})
    assert created.error == ErrorCode.NOT_CONTROLLER and "ZooKeeper is unavailable" in (created.message or "")
    assert (await admin.delete_topic("orders"))[0] == ErrorCode.NOT_CONTROLLER
    assert (await admin.create_partitions("orders", 4, False))[0] == ErrorCode.NOT_CONTROLLER
    assert (await admin.alter_topic_configs("orders", {"retention.ms": "1000"}, False))[0] == ErrorCode.NOT_CONTROLLER
    assert (await admin.alter_broker_configs("", {"log.retention.ms": "1000"}, False))[0] == ErrorCode.NOT_CONTROLLER
