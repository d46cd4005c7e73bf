"""Per-topic configuration: which keys a topic accepts, their types, and the broker key that
gives each one its default (as Apache Kafka's LogConfig does)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from minikafka.config import BrokerConfig, ConfigSource, format_value
from minikafka.storage.log import LogConfig


class InvalidTopicConfig(ValueError):
    """A topic configuration key or value that cannot be used; the message names the key."""


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    broker_key: str | None
    parse: Callable[[str], Any]
    check: Callable[[Any], bool]
    check_doc: str
    default: Any = None  # only for keys without a broker key


def _long(text: str) -> int:
    return int(text.strip())


def _timestamp_type(text: str) -> str:
    return text.strip()


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in [
        TopicConfigDef("retention.ms", "log.retention.ms", _long, lambda v: v >= -1, "must be >= -1"),
        TopicConfigDef("retention.bytes", "log.retention.bytes", _long, lambda v: v >= -1, "must be >= -1"),
        TopicConfigDef("segment.bytes", "log.segment.bytes", _long, lambda v: 14 <= v < 2**31,
                       "must be between 14 and 2147483647"),
        TopicConfigDef("segment.ms", "log.roll.ms", _long, lambda v: v >= 1, "must be >= 1"),
        TopicConfigDef("message.timestamp.type", "log.message.timestamp.type", _timestamp_type,
                       lambda v: v in ("CreateTime", "LogAppendTime"), "must be CreateTime or LogAppendTime"),
        TopicConfigDef("max.message.bytes", "message.max.bytes", _long, lambda v: v >= 0, "must be >= 0"),
        TopicConfigDef("index.interval.bytes", "log.index.interval.bytes", _long, lambda v: v >= 0,
                       "must be >= 0"),
        TopicConfigDef("min.insync.replicas", "min.insync.replicas", _long, lambda v: v >= 1, "must be >= 1"),
        TopicConfigDef("file.delete.delay.ms", "log.segment.delete.delay.ms", _long, lambda v: v >= 0,
                       "must be >= 0"),
        TopicConfigDef("cleanup.policy", None, lambda t: t.strip(), lambda v: v == "delete",
                       "only delete is supported", default="delete"),
    ]
}


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check every key and value; returns the configs to store. Raises InvalidTopicConfig."""
    validated: dict[str, str] = {}
    for key, value in configs.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise InvalidTopicConfig(f"Unknown topic config name: {key}")
        if value is None:
            raise InvalidTopicConfig(f"Null value not supported for topic config {key}")
        try:
            parsed = definition.parse(value)
        except ValueError:
            raise InvalidTopicConfig(f"Invalid value {value} for configuration {key}") from None
        if not definition.check(parsed):
            raise InvalidTopicConfig(f"Invalid value {value} for configuration {key}: {definition.check_doc}")
        validated[key] = value.strip()
    return validated


def topic_config_value(key: str, topic_configs: Mapping[str, str], broker: BrokerConfig) -> tuple[Any, bool]:
    """The effective value of a topic config and whether the topic overrides it."""
    definition = TOPIC_CONFIGS[key]
    if key in topic_configs:
        return definition.parse(topic_configs[key]), True
    if definition.broker_key is not None:
        return broker[definition.broker_key], False
    return definition.default, False


def log_config_for(topic_configs: Mapping[str, str], broker: BrokerConfig) -> LogConfig:
    def value(key: str) -> Any:
        return topic_config_value(key, topic_configs, broker)[0]

    return LogConfig(
        segment_bytes=value("segment.bytes"),
        segment_ms=value("segment.ms"),
        retention_ms=value("retention.ms"),
        retention_bytes=value("retention.bytes"),
        message_timestamp_type=value("message.timestamp.type"),
        index_interval_bytes=value("index.interval.bytes"),
        max_message_bytes=value("max.message.bytes"),
        file_delete_delay_ms=value("file.delete.delay.ms"),
        min_insync_replicas=value("min.insync.replicas"),
    )


def describe_topic_config(key: str, topic_configs: Mapping[str, str], broker: BrokerConfig) -> tuple[str | None, int]:
    """(value as text, ConfigSource) of one topic config, as DescribeConfigs reports it."""
    value, overridden = topic_config_value(key, topic_configs, broker)
    if overridden:
        return format_value(value), ConfigSource.DYNAMIC_TOPIC_CONFIG
    definition = TOPIC_CONFIGS[key]
    if definition.broker_key is not None:
        return format_value(value), broker.source_of(definition.broker_key)
    return format_value(value), ConfigSource.DEFAULT_CONFIG
