"""Dynamic broker configs: keys declared dynamic in config/broker.py, per-broker values over cluster
defaults over static ones, listeners told of effective changes, storage in the metadata store
and the controller applying them (logs included) at startup and on change."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

import pytest

from minikafka.config.broker import (
    DEFINITIONS,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    check_dynamic_configs,
    dynamic_keys,
    parse_cleanup_policy,
)
from minikafka.config.kafka_broker_keys import (
    KAFKA_DYNAMIC_DEFINED,
    KAFKA_DYNAMIC_UNDEFINED,
    KAFKA_STATIC_UNDEFINED,
    PER_BROKER_ONLY,
)
from minikafka.controller.embedded import EmbeddedController
from minikafka.metadata.store import LocalMetadataStore
from minikafka.replica.replica_manager import ReplicaManager
from minikafka.replica.topic_config import InvalidTopicConfig, log_config_for, validate_topic_configs
from minikafka.storage.failure_channel import LogDirFailureChannel
from minikafka.storage.log_manager import LogManager
from protocol.errors import ErrorCode


def test_only_declared_keys_are_dynamic() -> None:
    assert {"log.retention.ms", "log.retention.bytes", "log.segment.bytes", "log.roll.ms"} <= set(dynamic_keys())
    assert not DEFINITIONS["broker.id"].dynamic
    config = BrokerConfig({})
    with pytest.raises(ConfigError, match=re.escape("Cannot update these configs dynamically: Set(num.partitions)")):
        config.parse_dynamic({"num.partitions": "3"})
    with pytest.raises(ConfigError, match="log.retention.ms"):
        config.parse_dynamic({"log.retention.ms": "soon"})
    with pytest.raises(ConfigError, match="log.segment.bytes"):
        config.parse_dynamic({"log.segment.bytes": "5"})
    with pytest.raises(ValueError):
        config.on_change("broker.id", lambda key, value: None)


def _refusal(configs: dict[str, str | None], per_broker: bool = True) -> str | None:
    try:
        check_dynamic_configs(configs, per_broker)
    except ConfigError as exc:
        return str(exc)
    return None


def test_broker_keys_are_sorted_as_kafka_sorts_them() -> None:
    # Kafka updates these at run time; they were refused as unknown broker configs.
    for key, value in {"sasl.kerberos.min.time.before.relogin": "70000", "num.io.threads": "16",
                       "log.flush.interval.messages": "1000", "metric.reporters": "",
                       "log.cleaner.threads": "2", "ssl.protocol": "TLSv1.2"}.items():
        assert _refusal({key: value}) is None, key
    # A key Kafka does not know is a custom config, which Kafka stores; so is a listener-prefixed one.
    assert _refusal({"my.plugin.setting": "x", "listener.name.internal.ssl.keystore.location": "/k.pem"}) is None
    # Static keys, of minikafka's and of Kafka's, are refused in Kafka's words, all at once.
    assert _refusal({"num.partitions": "3", "zookeeper.set.acl": "true", "retention.ms": "5"}) == (
        "Cannot update these configs dynamically: Set(num.partitions, zookeeper.set.acl)")
    assert _refusal({"ssl.keystore.location": "/k.pem"}) == (
        "These security configs can be dynamically updated only per-listener using the listener prefix: "
        "Set(ssl.keystore.location)")
    # Listener and security keys need a broker id; the cluster default may not carry them.
    assert _refusal({"sasl.kerberos.min.time.before.relogin": "1", "log.retention.ms": "1"}, per_broker=False) == (
        "Cannot update these configs at default cluster level, broker id must be specified: "
        "Set(sasl.kerberos.min.time.before.relogin)")
    assert _refusal({"listener.name.internal.ssl.protocol": "TLSv1.2"}, per_broker=False) is not None
    assert _refusal({"listener.name.internal.max.connections": "5", "transaction.partition.verification.enable":
                     "false"}, per_broker=False) is None
    # Values are checked against the key's type, the message naming the key.
    for key, value in {"sasl.kerberos.min.time.before.relogin": "soon", "sasl.login.refresh.buffer.seconds": "40000",
                       "log.preallocate": "maybe", "listener.name.internal.max.connections": "many",
                       "log.retention.ms": "later"}.items():
        refusal = _refusal({key: value})
        assert refusal is not None and key in refusal, (key, refusal)
    assert _refusal({"log.retention.ms": None}) is not None


def test_the_key_tables_agree_with_the_definitions() -> None:
    assert KAFKA_DYNAMIC_DEFINED <= set(DEFINITIONS)
    assert not set(KAFKA_DYNAMIC_UNDEFINED) & set(DEFINITIONS)
    assert not KAFKA_STATIC_UNDEFINED & (set(DEFINITIONS) | set(KAFKA_DYNAMIC_UNDEFINED))
    assert PER_BROKER_ONLY <= KAFKA_DYNAMIC_DEFINED | set(KAFKA_DYNAMIC_UNDEFINED)
    # Every key minikafka applies at run time is one Kafka updates too, or minikafka's own.
    assert {key for key in dynamic_keys() if key not in KAFKA_DYNAMIC_DEFINED} == {
        "log.dirs.balancer.enable", "log.dirs.balancer.threshold.percent", "log.dirs.balancer.interval.ms"}


def test_keys_minikafka_does_not_act_on_are_stored_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    config = BrokerConfig({"log.cleaner.threads": "1"})
    with caplog.at_level(logging.INFO, logger="minikafka.config.broker"):
        config.apply_dynamic({"sasl.kerberos.min.time.before.relogin": "70000", "log.cleaner.threads": "3",
                              "transaction.partition.verification.enable": "false"}, {"my.plugin.setting": "x"})
        config.apply_dynamic({"sasl.kerberos.min.time.before.relogin": "80000", "log.cleaner.threads": "3",
                              "transaction.partition.verification.enable": "false"}, {"my.plugin.setting": "x"})
    assert config["transaction.partition.verification.enable"] is False, "an applied key was not applied"
    assert config["log.cleaner.threads"] == 1, "a key minikafka does not act on changed what it uses"
    assert config.dynamic_text("log.cleaner.threads") == ("3", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert config.dynamic_text("sasl.kerberos.min.time.before.relogin") == (
        "80000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert config.dynamic_text("my.plugin.setting") == ("x", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    told = [r.getMessage() for r in caplog.records if "has no effect in minikafka" in r.getMessage()]
    assert sorted(told) == sorted(f"dynamic broker config {key} is stored and described as Kafka does, but has no "
                                  "effect in minikafka" for key in ("sasl.kerberos.min.time.before.relogin",
                                                                    "log.cleaner.threads", "my.plugin.setting"))


def test_an_empty_cleanup_policy_is_taken_as_kafka_takes_it() -> None:
    assert parse_cleanup_policy("") == [] and parse_cleanup_policy(" ") == []
    assert parse_cleanup_policy("compact, delete") == ["compact", "delete"]
    for bad in ("compact,", ",", "shred"):
        with pytest.raises(ValueError):
            parse_cleanup_policy(bad)
    assert BrokerConfig({}).parse_dynamic({"log.cleanup.policy": ""}) == {"log.cleanup.policy": []}


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
        assert (await node.controller.alter_broker_configs("1", {"log.retention.ms": "soon"}, False))[0] == \
            ErrorCode.INVALID_REQUEST
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


def test_a_topic_without_a_cleanup_policy_keeps_its_records() -> None:
    # What a SUBTRACT of the last policy leaves: accepted (Kafka 3.9), neither compacted nor trimmed.
    assert validate_topic_configs({"cleanup.policy": ""}) == {"cleanup.policy": ""}
    kept = log_config_for({"cleanup.policy": ""}, BrokerConfig({}))
    assert (kept.compact, kept.delete) == (False, False)
    with pytest.raises(InvalidTopicConfig, match="cleanup.policy"):
        validate_topic_configs({"cleanup.policy": "compact,"})
