"""Per-topic configuration: which keys a topic accepts, their types, and the broker key that
gives each one its default (as Apache Kafka's LogConfig does)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from minikafka.config.broker import (
    DEFINITIONS,
    BrokerConfig,
    ConfigSource,
    ConfigType,
    format_value,
    parse_cleanup_policy,
)
from minikafka.metadata.topics import OFFSETS_TOPIC
from minikafka.replica.replication_quota import parse_throttled_replicas
from minikafka.storage.log import LogConfig


class InvalidTopicConfig(ValueError):
    """A topic configuration key or value that cannot be used; the message names the key."""


class _RefusedValue(ValueError):
    """A value that does not parse, with the reason in words a client can be shown."""


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    broker_key: str | None
    parse: Callable[[str], Any]
    check: Callable[[Any], bool]
    check_doc: str
    default: Any = None  # only for keys without a broker key
    kind: int = ConfigType.LONG  # the type DescribeConfigs reports


LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def _long(text: str) -> int:
    return int(text.strip())


def _double(text: str) -> float:
    return float(text.strip())


def _text(text: str) -> str:
    return text.strip()


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false")
    return lowered == "true"


def _list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _throttled_replicas(text: str) -> list[str]:
    """Kafka's form, ``*`` or ``partition:broker,...``; kept as its items, as a LIST config is."""
    try:
        parse_throttled_replicas(text)
    except ValueError as exc:
        raise _RefusedValue(str(exc)) from None
    return _list(text)


def _cleanup_policy(text: str) -> list[str]:
    """compact and/or delete, or empty (see config.parse_cleanup_policy)."""
    try:
        return parse_cleanup_policy(text)
    except ValueError as exc:
        raise _RefusedValue(str(exc)) from None


def _at_least(low: int | float) -> Callable[[Any], bool]:
    return lambda v: v >= low


def _between(low: int | float, high: int | float) -> Callable[[Any], bool]:
    return lambda v: low <= v <= high


# Every topic config Apache Kafka defines, validated as Kafka validates it. Those that change
# nothing here yet (flushing, tiered storage, index sizing) are accepted, stored and described, so
# Kafka's tools and clients can set them; remote.storage.enable=true is refused as Kafka refuses it
# on a broker without the feature.
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    d.name: d
    for d in [
        TopicConfigDef("cleanup.policy", "log.cleanup.policy", _cleanup_policy, lambda v: True, "",
                       kind=ConfigType.LIST),
        TopicConfigDef("compression.type", None, _text, lambda v: v in COMPRESSION_TYPES,
                       f"must be one of {', '.join(COMPRESSION_TYPES)}", default="producer", kind=ConfigType.STRING),
        TopicConfigDef("compression.gzip.level", None, _long, lambda v: v == -1 or 1 <= v <= 9,
                       "must be -1 or between 1 and 9", default=-1, kind=ConfigType.INT),
        TopicConfigDef("compression.lz4.level", None, _long, _between(1, 17), "must be between 1 and 17",
                       default=9, kind=ConfigType.INT),
        TopicConfigDef("compression.zstd.level", None, _long, _between(-131072, 22),
                       "must be between -131072 and 22", default=3, kind=ConfigType.INT),
        TopicConfigDef("delete.retention.ms", "log.cleaner.delete.retention.ms", _long, _at_least(0), "must be >= 0"),
        TopicConfigDef("file.delete.delay.ms", "log.segment.delete.delay.ms", _long, _at_least(0), "must be >= 0"),
        TopicConfigDef("flush.messages", None, _long, _at_least(1), "must be >= 1", default=LONG_MAX),
        TopicConfigDef("flush.ms", None, _long, _at_least(0), "must be >= 0", default=LONG_MAX),
        TopicConfigDef("follower.replication.throttled.replicas", None, _throttled_replicas, lambda v: True,
                       "", default=[], kind=ConfigType.LIST),
        TopicConfigDef("index.interval.bytes", "log.index.interval.bytes", _long, _at_least(0), "must be >= 0",
                       kind=ConfigType.INT),
        TopicConfigDef("leader.replication.throttled.replicas", None, _throttled_replicas, lambda v: True,
                       "", default=[], kind=ConfigType.LIST),
        TopicConfigDef("local.retention.bytes", None, _long, _at_least(-2), "must be >= -2", default=-2),
        TopicConfigDef("local.retention.ms", None, _long, _at_least(-2), "must be >= -2", default=-2),
        TopicConfigDef("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", _long, _at_least(1),
                       "must be >= 1"),
        TopicConfigDef("max.message.bytes", "message.max.bytes", _long, _between(0, INT_MAX),
                       f"must be between 0 and {INT_MAX}", kind=ConfigType.INT),
        TopicConfigDef("message.downconversion.enable", None, _bool, lambda v: True, "", default=True,
                       kind=ConfigType.BOOLEAN),
        TopicConfigDef("message.format.version", None, _text, lambda v: bool(v), "must name a version",
                       default="3.0-IV1", kind=ConfigType.STRING),
        TopicConfigDef("message.timestamp.after.max.ms", None, _long, _at_least(0), "must be >= 0",
                       default=LONG_MAX),
        TopicConfigDef("message.timestamp.before.max.ms", None, _long, _at_least(0), "must be >= 0",
                       default=LONG_MAX),
        TopicConfigDef("message.timestamp.difference.max.ms", None, _long, _at_least(0), "must be >= 0",
                       default=LONG_MAX),
        TopicConfigDef("message.timestamp.type", "log.message.timestamp.type", _text,
                       lambda v: v in ("CreateTime", "LogAppendTime"), "must be CreateTime or LogAppendTime",
                       kind=ConfigType.STRING),
        TopicConfigDef("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", _double,
                       _between(0.0, 1.0), "must be between 0 and 1", kind=ConfigType.DOUBLE),
        TopicConfigDef("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", _long, _at_least(0),
                       "must be >= 0"),
        TopicConfigDef("min.insync.replicas", "min.insync.replicas", _long, _at_least(1), "must be >= 1",
                       kind=ConfigType.INT),
        TopicConfigDef("preallocate", None, _bool, lambda v: True, "", default=False, kind=ConfigType.BOOLEAN),
        TopicConfigDef("remote.log.copy.disable", None, _bool, lambda v: True, "", default=False,
                       kind=ConfigType.BOOLEAN),
        TopicConfigDef("remote.log.delete.on.disable", None, _bool, lambda v: True, "", default=False,
                       kind=ConfigType.BOOLEAN),
        TopicConfigDef("remote.storage.enable", None, _bool, lambda v: not v,
                       "tiered storage is not available on this broker", default=False, kind=ConfigType.BOOLEAN),
        TopicConfigDef("retention.bytes", "log.retention.bytes", _long, _at_least(-1), "must be >= -1"),
        TopicConfigDef("retention.ms", "log.retention.ms", _long, _at_least(-1), "must be >= -1"),
        TopicConfigDef("segment.bytes", "log.segment.bytes", _long, _between(14, INT_MAX),
                       f"must be between 14 and {INT_MAX}", kind=ConfigType.INT),
        TopicConfigDef("segment.index.bytes", None, _long, _between(4, INT_MAX), f"must be between 4 and {INT_MAX}",
                       default=10_485_760, kind=ConfigType.INT),
        TopicConfigDef("segment.jitter.ms", None, _long, _at_least(0), "must be >= 0", default=0),
        TopicConfigDef("segment.ms", "log.roll.ms", _long, _at_least(1), "must be >= 1"),
        TopicConfigDef("unclean.leader.election.enable", "unclean.leader.election.enable", _bool, lambda v: True,
                       "", kind=ConfigType.BOOLEAN),
    ]
}


def dynamic_topic_defaults() -> list[str]:
    """The dynamic broker keys that give topic configs their defaults: when one changes, every log
    that does not override it must follow."""
    return sorted({d.broker_key for d in TOPIC_CONFIGS.values()
                   if d.broker_key is not None and DEFINITIONS[d.broker_key].dynamic})


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
        except _RefusedValue as exc:
            raise InvalidTopicConfig(f"Invalid value {value} for configuration {key}: {exc}") from None
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


# __consumer_offsets is created compacted, as Kafka creates it; one created by an earlier minikafka
# (which bounded it by rewriting it) has no cleanup.policy of its own and is compacted all the same.
_INTERNAL_TOPIC_DEFAULTS: dict[str, dict[str, str]] = {OFFSETS_TOPIC: {"cleanup.policy": "compact"}}


def log_config_for(topic_configs: Mapping[str, str], broker: BrokerConfig, topic: str | None = None) -> LogConfig:
    """The storage settings of ``topic`` (its own configs, else the broker's defaults)."""
    configs = {**_INTERNAL_TOPIC_DEFAULTS.get(topic or "", {}), **topic_configs}

    def value(key: str) -> Any:
        return topic_config_value(key, configs, broker)[0]

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
        compression_type=value("compression.type"),
        timestamp_before_max_ms=value("message.timestamp.before.max.ms"),
        timestamp_after_max_ms=value("message.timestamp.after.max.ms"),
        cleanup_policy=tuple(value("cleanup.policy")),
        min_cleanable_dirty_ratio=value("min.cleanable.dirty.ratio"),
        min_compaction_lag_ms=value("min.compaction.lag.ms"),
        max_compaction_lag_ms=value("max.compaction.lag.ms"),
        delete_retention_ms=value("delete.retention.ms"),
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
