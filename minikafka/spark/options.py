"""The options of the "minikafka" Spark data source: Spark's Kafka source and sink options.

Parsed once on the driver into frozen values (`SourceOptions`, `SinkOptions`) that are pickled
to the executors with the reader or writer. Nothing here does I/O or imports pyspark, so every
rule is checkable without a JVM. Every error is an `OptionError` whose message names the option.

Option names are case-insensitive, as in Spark. `kafka.`-prefixed options go to the client
library (librdkafka) without the prefix, except for the few Spark's Kafka source rejects or that
the source consumes itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

TopicPartition = tuple[str, int]

EARLIEST = -2
LATEST = -1

BOOTSTRAP = "kafka.bootstrap.servers"
# As in Spark's Kafka source: read_uncommitted unless asked; under read_committed a query reads
# no aborted record and its offset ranges end at the last stable offset.
ISOLATION_LEVEL = "kafka.isolation.level"
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
# librdkafka has no such property; like the Java consumer's, it bounds the driver's blocking
# metadata and offset look-ups, and the failure message names it.
API_TIMEOUT = "kafka.default.api.timeout.ms"
DEFAULT_API_TIMEOUT_MS = 60_000


class OptionError(ValueError):
    """An option that is unknown, missing, malformed or not valid for this kind of query."""


# Spark's Kafka source options that this source accepts (matched without regard to case).
_SOURCE_OPTIONS = (
    "assign", "subscribe", "subscribePattern", "startingOffsets", "endingOffsets", "failOnDataLoss",
    "maxOffsetsPerTrigger", "includeHeaders", "minPartitions", "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "groupIdPrefix", "startingTimestamp",
    "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
)
# Spark's Kafka source options that this source does not implement (yet): named in the error so
# the user knows the option is real but unsupported here, not misspelled.
_UNSUPPORTED_SOURCE_OPTIONS = (
    "minOffsetsPerTrigger", "maxTriggerDelay", "maxRecordsPerPartition",
)
_SINK_OPTIONS = ("topic", "includeHeaders")
# Options Spark itself may hand to any data source; they carry no meaning for Kafka.
_SPARK_GENERIC_OPTIONS = {"path", "checkpointlocation", "queryname"}
# The client settings Spark's Kafka source and sink own, rejected as Spark rejects them.
_REJECTED_SOURCE_CLIENT_OPTIONS = {
    "kafka.auto.offset.reset": "set startingOffsets instead",
    "kafka.enable.auto.commit": "the source never commits offsets; Spark keeps them in its checkpoint",
    "kafka.key.deserializer": "keys are always read as binary; cast them in a query",
    "kafka.value.deserializer": "values are always read as binary; cast them in a query",
    "kafka.interceptor.classes": "interceptors are not supported",
}
_REJECTED_SINK_CLIENT_OPTIONS = {
    "kafka.key.serializer": "keys are written from a string or binary column",
    "kafka.value.serializer": "values are written from a string or binary column",
    "kafka.interceptor.classes": "interceptors are not supported",
}


def _lowered(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _parse_bool(options: dict[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, got {text!r}")
    return lowered == "true"


def _parse_int(options: dict[str, str], name: str, default: int | None, minimum: int) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {text!r}") from None
    if value < minimum:
        raise OptionError(f"option {name} must be >= {minimum}, got {value}")
    return value


def _client_config(options: dict[str, str], rejected: dict[str, str]) -> dict[str, str]:
    config: dict[str, str] = {}
    for name, value in options.items():
        if not name.startswith("kafka."):
            continue
        if name in rejected:
            raise OptionError(f"option {name} is not supported: {rejected[name]}")
        if name == API_TIMEOUT:
            continue
        config[name.removeprefix("kafka.")] = value
    if not config.get("bootstrap.servers", "").strip():
        raise OptionError(f"option {BOOTSTRAP} is required (the broker addresses, host:port,...)")
    return config


def _check_known(options: dict[str, str], known: tuple[str, ...], unsupported: tuple[str, ...], what: str) -> None:
    known_lower = {k.lower() for k in known}
    unsupported_by_lower = {u.lower(): u for u in unsupported}
    for name in sorted(options):
        if name in unsupported_by_lower:
            raise OptionError(f"option {unsupported_by_lower[name]} of Spark's Kafka {what} is not supported by "
                              f"minikafka")
        if name.startswith("kafka.") or name in known_lower or name in _SPARK_GENERIC_OPTIONS:
            continue
        raise OptionError(f"unknown option {name!r} for the minikafka {what}; known options: "
                          f"{', '.join(known)} and kafka.<Kafka client setting>")


# ------------------------------------------------------------------ subscriptions

@dataclass(frozen=True)
class Assign:
    """`assign`: exactly these partitions."""

    partitions: tuple[TopicPartition, ...]

    option = "assign"


@dataclass(frozen=True)
class Subscribe:
    """`subscribe`: every partition of these topics, as the topics grow."""

    topics: tuple[str, ...]

    option = "subscribe"


@dataclass(frozen=True)
class SubscribePattern:
    """`subscribePattern`: every partition of every topic whose whole name matches."""

    pattern: str

    option = "subscribePattern"

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


Subscription = Assign | Subscribe | SubscribePattern


def _parse_subscription(options: dict[str, str]) -> Subscription:
    given = [name for name in ("assign", "subscribe", "subscribepattern") if name in options]
    if len(given) != 1:
        named = ", ".join(given) if given else "none"
        raise OptionError(f"exactly one of the options assign, subscribe, subscribePattern is required "
                          f"(given: {named})")
    name = given[0]
    text = options[name].strip()
    if name == "subscribe":
        topics = tuple(t.strip() for t in text.split(",") if t.strip())
        if not topics:
            raise OptionError("option subscribe needs a comma-separated list of topics")
        return Subscribe(topics)
    if name == "subscribepattern":
        if not text:
            raise OptionError("option subscribePattern needs a regular expression")
        try:
            re.compile(text)
        except re.error as exc:
            raise OptionError(f"option subscribePattern is not a valid regular expression: {exc}") from None
        return SubscribePattern(text)
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f'option assign must be JSON like {{"topicA":[0,1]}}: {exc}') from None
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError('option assign must be a non-empty JSON object like {"topicA":[0,1]}')
    partitions: list[TopicPartition] = []
    for topic, numbers in parsed.items():
        if not isinstance(numbers, list) or not all(type(p) is int and p >= 0 for p in numbers):
            raise OptionError(f"option assign: topic {topic!r} needs a list of partition numbers")
        partitions.extend((topic, p) for p in numbers)
    return Assign(tuple(sorted(set(partitions))))


# ------------------------------------------------------------------ offsets

@dataclass(frozen=True)
class OffsetBound:
    """Where a read starts or ends, from the option named `option`.

    kind "earliest" / "latest": the partitions' current ends. "specific": `offsets`, one per
    partition, where EARLIEST (-2) and LATEST (-1) stand for the current ends. "timestamp": the
    first offset whose record timestamp is at or after `timestamp` (every partition) or
    `timestamps` (one per partition); where no record is that late, the latest offset when
    `no_match` is "latest", an error when it is "error".
    """

    option: str
    kind: Literal["earliest", "latest", "specific", "timestamp"]
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)
    no_match: Literal["error", "latest"] = "latest"


def _parse_timestamp_bound(options: dict[str, str], prefix: str, no_match: Literal["error", "latest"]
                           ) -> OffsetBound | None:
    """{prefix}Timestamp (all partitions) or else {prefix}OffsetsByTimestamp (JSON), if given."""
    global_name, by_partition_name = f"{prefix}Timestamp", f"{prefix}OffsetsByTimestamp"
    text = options.get(global_name.lower())
    if text is not None:
        try:
            timestamp = int(text.strip())
        except ValueError:
            raise OptionError(f"option {global_name} must be a timestamp in milliseconds, got {text!r}") from None
        if timestamp < 0:
            raise OptionError(f"option {global_name} must be >= 0, got {timestamp}")
        return OffsetBound(global_name, "timestamp", timestamp=timestamp, no_match=no_match)
    text = options.get(by_partition_name.lower())
    if text is None:
        return None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        raise OptionError(f'option {by_partition_name} must be JSON like {{"topic":{{"0":1700000000000}}}}, '
                          f"got {text!r}") from None
    timestamps = parse_offsets_json(parsed, f"option {by_partition_name}")
    if any(ts < 0 for ts in timestamps.values()):
        raise OptionError(f"option {by_partition_name}: timestamps must be >= 0")
    return OffsetBound(by_partition_name, "timestamp", timestamps=timestamps, no_match=no_match)


def _parse_bound(options: dict[str, str], name: str, default: str) -> OffsetBound:
    text = options.get(name.lower(), default).strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetBound(name, text.lower())  # type: ignore[arg-type]
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        raise OptionError(f'option {name} must be earliest, latest or JSON like {{"topic":{{"0":23}}}}, '
                          f"got {text!r}") from None
    if not isinstance(parsed, dict):
        raise OptionError(f'option {name} must be a JSON object like {{"topic":{{"0":23}}}}')
    return OffsetBound(name, "specific", parse_offsets_json(parsed, name))


def parse_offsets_json(parsed: object, what: str) -> dict[TopicPartition, int]:
    """{topic: {"partition": offset}} (Spark's offset JSON) to {(topic, partition): offset}."""
    if not isinstance(parsed, dict):
        raise OptionError(f"{what}: expected a JSON object of topics, got {parsed!r}")
    offsets: dict[TopicPartition, int] = {}
    for topic, by_partition in parsed.items():
        if not isinstance(by_partition, dict):
            raise OptionError(f"{what}: topic {topic!r} needs an object of partition offsets")
        for partition, offset in by_partition.items():
            try:
                number = int(partition)
            except ValueError:
                raise OptionError(f"{what}: {partition!r} of topic {topic!r} is not a partition number") from None
            if number < 0 or type(offset) is not int or offset < EARLIEST:
                raise OptionError(f"{what}: bad offset {offset!r} for partition {topic}-{partition} "
                                  f"(-2 earliest, -1 latest, or an offset >= 0)")
            offsets[(topic, number)] = offset
    return offsets


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{(topic, partition): offset} to Spark's offset JSON, in a stable order.

    The order matters: Spark compares serialised offsets, so the same offsets must always
    serialise to the same text.
    """
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = offsets[(topic, partition)]
    return result


# ------------------------------------------------------------------ parsed option sets

@dataclass(frozen=True)
class SourceOptions:
    """Everything a reader needs from its options, checked; safe to pickle to executors."""

    client_config: Mapping[str, str]
    subscription: Subscription
    starting: OffsetBound
    ending: OffsetBound | None
    fail_on_data_loss: bool
    include_headers: bool
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    poll_timeout_ms: int
    api_timeout_ms: int
    fetch_offset_retries: int
    fetch_offset_retry_interval_ms: int

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        opts = _lowered(options)
        _check_known(opts, _SOURCE_OPTIONS, _UNSUPPORTED_SOURCE_OPTIONS, "source")
        client_config = _client_config(opts, _REJECTED_SOURCE_CLIENT_OPTIONS)
        isolation = client_config.setdefault("isolation.level", ISOLATION_LEVELS[0]).strip().lower()
        if isolation not in ISOLATION_LEVELS:
            raise OptionError(f"option {ISOLATION_LEVEL} must be read_uncommitted or read_committed, "
                              f"got {client_config['isolation.level']!r}")
        client_config["isolation.level"] = isolation
        subscription = _parse_subscription(opts)
        strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
        if strategy not in ("error", "latest"):
            raise OptionError(f"option startingOffsetsByTimestampStrategy must be error or latest, got {strategy!r}")
        # As in Spark: a timestamp option outranks the offsets option of the same end.
        starting = (_parse_timestamp_bound(opts, "starting", strategy)  # type: ignore[arg-type]
                    or _parse_bound(opts, "startingOffsets", "latest" if streaming else "earliest"))
        ending: OffsetBound | None = None
        if streaming:
            for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
                if name.lower() in opts:
                    raise OptionError(f"option {name} is not valid for streaming queries")
        else:
            ending = _parse_timestamp_bound(opts, "ending", "latest") or _parse_bound(opts, "endingOffsets", "latest")
            if starting.kind == "latest" or LATEST in starting.offsets.values():
                raise OptionError("option startingOffsets cannot be latest (-1) in a batch query")
            if ending.kind == "earliest" or EARLIEST in ending.offsets.values():
                raise OptionError("option endingOffsets cannot be earliest (-2) in a batch query")
        return cls(
            client_config=client_config,
            subscription=subscription,
            starting=starting,
            ending=ending,
            fail_on_data_loss=_parse_bool(opts, "failOnDataLoss", True),
            include_headers=_parse_bool(opts, "includeHeaders", False),
            max_offsets_per_trigger=_parse_int(opts, "maxOffsetsPerTrigger", None, 1),
            min_partitions=_parse_int(opts, "minPartitions", None, 1),
            poll_timeout_ms=_parse_int(opts, "kafkaConsumer.pollTimeoutMs", 120_000, 1),  # type: ignore[arg-type]
            api_timeout_ms=_parse_int(opts, API_TIMEOUT, DEFAULT_API_TIMEOUT_MS, 1),  # type: ignore[arg-type]
            fetch_offset_retries=_parse_int(opts, "fetchOffset.numRetries", 3, 1),  # type: ignore[arg-type]
            fetch_offset_retry_interval_ms=_parse_int(opts, "fetchOffset.retryIntervalMs", 10, 0),  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class SinkOptions:
    """Everything a writer needs from its options, checked; safe to pickle to executors."""

    client_config: Mapping[str, str]
    topic: str | None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        opts = _lowered(options)
        _check_known(opts, _SINK_OPTIONS, (), "sink")
        client_config = _client_config(opts, _REJECTED_SINK_CLIENT_OPTIONS)
        topic = opts.get("topic")
        if topic is not None and not topic.strip():
            raise OptionError("option topic must not be empty")
        return cls(client_config=client_config, topic=topic.strip() if topic else None)
