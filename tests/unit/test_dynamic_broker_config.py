"""Dynamic broker configs: keys declared dynamic in config.py, per-broker values over cluster
defaults over static ones, listeners told of effective changes, storage in the metadata store
and the controller applying them (logs included) at startup and on change."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from minikafka.config import DEFINITIONS, BrokerConfig, ConfigError, ConfigSource, dynamic_keys
from minikafka.controller.embedded import EmbeddedController
from minikafka.controller.metadata_store import LocalMetadataStore
from minikafka.replica.replica_manager import ReplicaManager
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log_manager import LogManager
from minikafka.topic_config import log_config_for
from protocol.errors import ErrorCode


def test_only_declared_keys_are_dynamic() -> None:
    assert {"log.retention.ms", "log.retention.bytes", "log.segment.bytes", "log.roll.ms"} <= set(dynamic_keys())
    assert not DEFINITIONS["broker.id"].dynamic
    config = BrokerConfig({})
    with pytest.raises(ConfigError, match="no.such.key"):
        config.parse_dynamic({"no.such.key": "1"})
    with pytest.raises(ConfigError, match="num.partitions"):
        config.parse_dynamic({"num.partitions": "3"})
    with pytest.raises(ConfigError, match="log.retention.ms"):
        config.parse_dynamic({"log.retention.ms": "soon"})
    with pytest.raises(ConfigError, match="log.segment.bytes"):
        config.parse_dynamic({"log.segment.bytes": "5"})
    with pytest.raises(ValueError):
        config.on_change("broker.id", lambda key, value: None)


def test_precedence_sources_and_listeners() -> None:
    config = BrokerConfig({"log.retention.ms": "1000"})
    seen: list[tuple[str, Any]] = []
    config.on_change("log.retention.ms", lambda key, value: seen.append((key, value)))
    assert (config["log.retention.ms"], config.source_of("log.retention.ms")) == (1000, ConfigSource.STATIC_BROKER_CONFIG)
    config.apply_dynamic({}, {"log.retention.ms": "2000"})
    assert (config["log.retention.ms"], config.source_of("log.retention.ms")) == (
        2000, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    config.apply_dynamic({"log.retention.ms": "3000"}, {"log.retention.ms": "2000"})
    assert (config["log.retention.ms"], config.source_of("log.retention.ms")) == (3000, ConfigSource.DYNAMIC_BROKER_CONFIG)
    config.apply_dynamic({"log.retention.ms": "3000"}, {})  # effective value unchanged: nobody is told
    config.apply_dynamic({}, {})
    assert config["log.retention.ms"] == 1000
    assert seen == [("log.retention.ms", 2000), ("log.retention.ms", 3000), ("log.retention.ms", 1000)]
    with pytest.raises(ConfigError):
        config.apply_dynamic({"log.retention.ms": "5"}, {"log.roll.ms": "0"})
    assert config.dynamic_broker == {} and config.dynamic_default == {}, "a refused change changed something"
    assert BrokerConfig({}).source_of("log.roll.ms") == ConfigSource.DEFAULT_CONFIG


class Node:
    def __init__(self, root: Path) -> None:
        dirs = [str(root / "d1"), str(root / "d2")]
        for d in dirs:
            os.makedirs(d, exist_ok=True)
        self.config = BrokerConfig({"log.dirs": ",".join(dirs)})
        channel = LogDirFailureChannel()
        self.store = LocalMetadataStore(dirs, channel)
        self.store.load()
        self.log_manager = LogManager(dirs, 1, self.store.cluster_id, log_config_for({}, self.config), channel)
        self.log_manager.startup()
        self.replica_manager = ReplicaManager(1, self.log_manager)
        self.controller = EmbeddedController(self.config, self.store, self.replica_manager)
        self.controller.startup()

    def retention_ms(self, topic: str) -> int:
        return self.replica_manager.get_partition(topic, 0).log.config.retention_ms


async def test_controller_stores_applies_and_reloads_broker_configs(tmp_path: Path) -> None:
    node = Node(tmp_path)
    try:
        assert (await node.controller.create_topic("plain", 1, 1, {})).error == ErrorCode.NONE
        assert (await node.controller.create_topic("own", 1, 1, {"retention.ms": "5"})).error == ErrorCode.NONE
        assert (await node.controller.alter_broker_configs("1", {"log.retention.ms": "soon"}, False))[0] == ErrorCode.INVALID_CONFIG
        assert (await node.controller.alter_broker_configs("1", {"log.retention.ms": "777"}, True)) == (ErrorCode.NONE, None)
        assert node.retention_ms("plain") != 777, "validate_only changed something"
        assert (await node.controller.alter_broker_configs("", {"log.retention.ms": "888"}, False)) == (ErrorCode.NONE, None)
        assert node.retention_ms("plain") == 888, "logs without an override did not follow the broker default"
        assert node.retention_ms("own") == 5
        assert (await node.controller.alter_broker_configs("1", {"log.retention.ms": "999"}, False)) == (ErrorCode.NONE, None)
        assert node.retention_ms("plain") == 999
    finally:
        node.log_manager.shutdown()
    node = Node(tmp_path)
    try:
        assert (await node.controller.broker_configs()) == {"1": {"log.retention.ms": "999"}, "": {"log.retention.ms": "888"}}
        assert node.config["log.retention.ms"] == 999 and node.retention_ms("plain") == 999
        assert node.retention_ms("own") == 5, "a topic's own config was lost by a restart"
        assert (await node.controller.alter_topic_configs("own", {"retention.ms": "x"}, False))[0] == ErrorCode.INVALID_CONFIG
        assert (await node.controller.alter_topic_configs("own", {}, False)) == (ErrorCode.NONE, None)
        assert node.retention_ms("own") == 999
    finally:
        node.log_manager.shutdown()
