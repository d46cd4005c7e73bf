"""Broker configuration: server.properties with Apache Kafka's key names.

Every key is declared once in ``DEFINITIONS`` with its type and default. Values come from a
properties file and then from ``--override key=value`` arguments; an unknown key is a warning, a
value that does not parse is a ``ConfigError`` naming the key.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key."""


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError("expected true or false")


def _parse_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _parse_int(text: str) -> int:
    return int(text.strip())


def _parse_str(text: str) -> str:
    return text.strip()


@dataclass(frozen=True)
class ConfigDef:
    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    check: Callable[[Any], bool] | None = None
    check_doc: str = ""
    dynamic: bool = False  # may be changed at runtime (IncrementalAlterConfigs on the broker)


_WEEK_MS = 7 * 24 * 3600 * 1000

DEFINITIONS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        ConfigDef("broker.id", _parse_int, 1, "id of this broker", lambda v: v >= 0, "must be >= 0"),
        ConfigDef("listeners", _parse_list, ["PLAINTEXT://127.0.0.1:9092"], "addresses the broker listens on"),
        ConfigDef("advertised.listeners", _parse_list, [], "addresses given to clients (default: listeners)"),
        ConfigDef("log.dirs", _parse_list, ["./data/d1", "./data/d2"], "the log directories (disks)",
                  lambda v: len(v) > 0, "needs at least one directory"),
        ConfigDef("zookeeper.connect", _parse_str, "", "ZooKeeper connection string (cluster mode)"),
        ConfigDef("num.partitions", _parse_int, 1, "partitions of an auto-created topic", lambda v: v >= 1,
                  "must be >= 1"),
        ConfigDef("default.replication.factor", _parse_int, 1, "replicas of an auto-created topic",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("min.insync.replicas", _parse_int, 1, "replicas that must acknowledge acks=all",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("auto.create.topics.enable", _parse_bool, True, "create unknown topics on use"),
        ConfigDef("log.segment.bytes", _parse_int, 1 << 30, "size of a segment file before it rolls",
                  lambda v: v >= 14, "must be >= 14", dynamic=True),
        ConfigDef("log.roll.ms", _parse_int, _WEEK_MS, "age of a segment before it rolls", lambda v: v >= 1,
                  "must be >= 1", dynamic=True),
        ConfigDef("log.retention.ms", _parse_int, _WEEK_MS, "age after which segments are deleted (-1: never)",
                  lambda v: v >= -1, "must be >= -1", dynamic=True),
        ConfigDef("log.retention.bytes", _parse_int, -1, "partition size above which old segments go",
                  lambda v: v >= -1, "must be >= -1", dynamic=True),
        ConfigDef("log.segment.delete.delay.ms", _parse_int, 60_000,
                  "how long deleted segments and the dirs of deleted topics wait before their files are removed",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("log.retention.check.interval.ms", _parse_int, 300_000, "how often retention runs",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("log.index.interval.bytes", _parse_int, 4096, "bytes between offset index entries",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("log.message.timestamp.type", _parse_str, "CreateTime", "CreateTime or LogAppendTime",
                  lambda v: v in ("CreateTime", "LogAppendTime"), "must be CreateTime or LogAppendTime"),
        ConfigDef("log.flush.offset.checkpoint.interval.ms", _parse_int, 60_000,
                  "how often offset checkpoints are written", lambda v: v >= 1, "must be >= 1"),
        ConfigDef("log.dir.check.interval.ms", _parse_int, 1000,
                  "how often each log dir is checked to still be the directory opened at startup "
                  "(not deleted, replaced or unmounted); 0 turns the check off", lambda v: v >= 0,
                  "must be >= 0"),
        ConfigDef("message.max.bytes", _parse_int, 1048588, "largest record batch accepted",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("socket.request.max.bytes", _parse_int, 104857600, "largest request frame accepted",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("fetch.max.bytes", _parse_int, 57671680, "largest fetch response", lambda v: v >= 0,
                  "must be >= 0"),
        ConfigDef("queued.max.requests", _parse_int, 500, "requests in flight per connection",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("metrics.port", _parse_int, 9404, "port of the Prometheus /metrics endpoint (-1: off)",
                  lambda v: -1 <= v <= 65535, "must be a port number or -1"),
        ConfigDef("metrics.host", _parse_str, "127.0.0.1", "address of the /metrics endpoint"),
        ConfigDef("cluster.id", _parse_str, "", "cluster id (embedded mode generates one)"),
        ConfigDef("offsets.topic.num.partitions", _parse_int, 50,
                  "partitions of __consumer_offsets, fixed when it is created", lambda v: v >= 1, "must be >= 1"),
        ConfigDef("offsets.topic.segment.bytes", _parse_int, 100 * 1024 * 1024, "segment size of __consumer_offsets",
                  lambda v: v >= 14, "must be >= 14"),
        ConfigDef("offsets.retention.minutes", _parse_int, 7 * 24 * 60,
                  "how long the committed offsets of a group without members are kept", lambda v: v >= 1,
                  "must be >= 1"),
        ConfigDef("offsets.retention.check.interval.ms", _parse_int, 600_000, "how often expired offsets are removed",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("offset.metadata.max.bytes", _parse_int, 4096, "largest metadata string of a committed offset",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("offsets.snapshot.min.dirty.records", _parse_int, 1000,
                  "superseded records a __consumer_offsets partition may hold before it is rewritten as a "
                  "snapshot of its live state (minikafka's stand-in for log compaction)", lambda v: v >= 1,
                  "must be >= 1"),
        ConfigDef("group.initial.rebalance.delay.ms", _parse_int, 3000,
                  "how long the first rebalance of an empty group waits for more members to join",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("group.min.session.timeout.ms", _parse_int, 6000, "smallest session timeout a member may ask for",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("group.max.session.timeout.ms", _parse_int, 1_800_000,
                  "largest session timeout a member may ask for", lambda v: v >= 0, "must be >= 0"),
        ConfigDef("group.max.size", _parse_int, 2**31 - 1, "most members a group may have", lambda v: v >= 1,
                  "must be >= 1"),
        ConfigDef("log.dir.min.free.bytes", _parse_int, 0,
                  "a log dir with less free room than this gets no new replica and no move (0: no floor)",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("num.replica.alter.log.dirs.threads", _parse_int, None,
                  "threads copying replicas between log dirs, and moves running at once "
                  "(default: the number of log dirs)", lambda v: v >= 1, "must be >= 1"),
        ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", _parse_int, 2**63 - 1,
                  "bytes per second all moves between log dirs may copy together; changeable at run time",
                  lambda v: v >= 1, "must be >= 1", dynamic=True),
        # ---- cluster mode (zookeeper.connect) ----
        ConfigDef("listener.security.protocol.map", _parse_str,
                  "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
                  "the security protocol of each listener name"),
        ConfigDef("inter.broker.listener.name", _parse_str, "",
                  "the listener other brokers and the controller use (default: PLAINTEXT)"),
        ConfigDef("zookeeper.session.timeout.ms", _parse_int, 18000,
                  "ZooKeeper session timeout: a broker silent this long is taken for dead", lambda v: v >= 1,
                  "must be >= 1"),
        ConfigDef("zookeeper.connection.timeout.ms", _parse_int, None,
                  "how long to wait for ZooKeeper at startup (default: zookeeper.session.timeout.ms)",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("replica.lag.time.max.ms", _parse_int, 30000,
                  "a follower that has not caught up for this long leaves the ISR", lambda v: v >= 1, "must be >= 1"),
        ConfigDef("replica.fetch.max.bytes", _parse_int, 1048576, "bytes a follower fetches per partition",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("replica.fetch.response.max.bytes", _parse_int, 10485760, "bytes a follower fetches per request",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("replica.fetch.wait.max.ms", _parse_int, 500, "how long a follower's fetch waits for data",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("replica.fetch.min.bytes", _parse_int, 1, "bytes a follower's fetch waits for",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("replica.fetch.backoff.ms", _parse_int, 1000, "pause of a follower after a failed fetch",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("num.replica.fetchers", _parse_int, 1, "fetcher tasks per leader broker", lambda v: v >= 1,
                  "must be >= 1"),
        ConfigDef("unclean.leader.election.enable", _parse_bool, False,
                  "let an out-of-sync replica lead when no in-sync one is left (acknowledged records may be lost)"),
        ConfigDef("auto.leader.rebalance.enable", _parse_bool, True,
                  "give leadership back to each partition's preferred (first) replica"),
        ConfigDef("leader.imbalance.check.interval.seconds", _parse_int, 300,
                  "how often the controller looks for partitions not led by their preferred replica",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("controlled.shutdown.enable", _parse_bool, True,
                  "move leadership to other brokers before stopping (SIGTERM)"),
        ConfigDef("controlled.shutdown.max.retries", _parse_int, 3, "attempts at a controlled shutdown",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("controlled.shutdown.retry.backoff.ms", _parse_int, 5000, "pause between those attempts",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("offsets.topic.replication.factor", _parse_int, 3,
                  "replicas of __consumer_offsets (fewer when fewer brokers are alive, with a warning)",
                  lambda v: v >= 1, "must be >= 1"),
    ]
}

ALIASES = {"node.id": "broker.id", "log.dir": "log.dirs",
           # KIP-113's name for the move throttle.
           "intra.broker.throttled.rate": "replica.alter.log.dirs.io.max.bytes.per.second"}


def read_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse Java-properties text (``key=value`` or ``key: value``, ``#``/``!`` comments,
    backslash continuations)."""
    values: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if match is None:
            values[line] = ""
            continue
        values[match.group(1)] = match.group(2)
    if pending:
        values.setdefault(pending, "")
    log.debug("read %d properties from %s", len(values), source)
    return values


def dynamic_keys() -> list[str]:
    return [name for name, definition in DEFINITIONS.items() if definition.dynamic]


def _checked(definition: ConfigDef, key: str, text: str) -> Any:
    try:
        value = definition.parse(text)
    except ValueError as exc:
        raise ConfigError(f"invalid value {text!r} for configuration {key!r}: {exc}") from None
    if definition.check is not None and not definition.check(value):
        raise ConfigError(f"invalid value {text!r} for configuration {key!r}: {definition.check_doc}")
    return value


ConfigListener = Callable[[str, Any], None]


class BrokerConfig:
    """Parsed, validated broker settings.

    Static values never change. Keys declared ``dynamic`` may also get a dynamic value, per
    broker or as a cluster-wide default (IncrementalAlterConfigs; the controller stores them in
    the metadata store and calls ``apply_dynamic``); the effective value is the per-broker one,
    else the cluster default, else the static one. Components register ``on_change`` listeners
    for the keys they use. Event-loop thread only.
    """

    def __init__(self, raw: Mapping[str, str]) -> None:
        self.raw = dict(raw)
        self.explicit: set[str] = set()  # canonical names given in the file or on the command line
        self.values: dict[str, Any] = {name: d.default for name, d in DEFINITIONS.items()}
        for key, text in raw.items():
            name = ALIASES.get(key, key)
            definition = DEFINITIONS.get(name)
            if definition is None:
                log.warning("unknown configuration key %r ignored", key)
                continue
            self.values[name] = _checked(definition, key, text)
            self.explicit.add(name)
        self._check_listeners()
        self.dynamic_broker: dict[str, Any] = {}
        self.dynamic_default: dict[str, Any] = {}
        self._listeners: dict[str, list[ConfigListener]] = {}

    def _check_listeners(self) -> None:
        for key in ("listeners", "advertised.listeners"):
            for listener in self.values[key]:
                try:
                    parse_listener(listener)
                except ValueError as exc:
                    raise ConfigError(f"invalid value {listener!r} for configuration {key!r}: {exc}") from None

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
        raw: dict[str, str] = {}
        if path is not None:
            try:
                text = Path(path).read_text()
            except OSError as exc:
                raise ConfigError(f"cannot read configuration file {path}: {exc.strerror}") from None
            raw.update(read_properties(text, str(path)))
        for override in overrides:
            key, sep, value = override.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"override {override!r} is not of the form key=value")
            raw[key.strip()] = value.strip()
        return cls(raw)

    def __getitem__(self, name: str) -> Any:
        if name in self.dynamic_broker:
            return self.dynamic_broker[name]
        if name in self.dynamic_default:
            return self.dynamic_default[name]
        return self.values[name]

    def source_of(self, name: str) -> int:
        """Where the effective value of a key comes from (a ConfigSource)."""
        if name in self.dynamic_broker:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if name in self.dynamic_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if name in self.explicit:
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    def parse_dynamic(self, configs: Mapping[str, str]) -> dict[str, Any]:
        """Parse values for dynamic keys; raises ConfigError naming the first bad key."""
        parsed: dict[str, Any] = {}
        for key, text in configs.items():
            name = ALIASES.get(key, key)
            definition = DEFINITIONS.get(name)
            if definition is None:
                raise ConfigError(f"Unknown broker config: {key}")
            if not definition.dynamic:
                raise ConfigError(f"Broker config {key} cannot be changed dynamically; set it in server.properties")
            parsed[name] = _checked(definition, key, text)
        return parsed

    def apply_dynamic(self, per_broker: Mapping[str, str], cluster_default: Mapping[str, str]) -> None:
        """Replace every dynamic value (raises ConfigError, changing nothing, if one is bad), then
        call the listeners of each key whose effective value changed."""
        broker_values, default_values = self.parse_dynamic(per_broker), self.parse_dynamic(cluster_default)
        before = {key: self[key] for key in dynamic_keys()}
        self.dynamic_broker, self.dynamic_default = broker_values, default_values
        for key, old in before.items():
            new = self[key]
            if new != old:
                log.info("dynamic config %s changed from %r to %r", key, old, new)
                for listener in list(self._listeners.get(key, [])):
                    listener(key, new)

    def on_change(self, key: str, listener: ConfigListener) -> None:
        """Call ``listener(key, new_value)`` whenever the effective value of a dynamic key changes."""
        definition = DEFINITIONS.get(key)
        if definition is None or not definition.dynamic:
            raise ValueError(f"{key} is not a dynamic broker config")
        self._listeners.setdefault(key, []).append(listener)

    @property
    def broker_id(self) -> int:
        return int(self.values["broker.id"])

    @property
    def log_dirs(self) -> list[str]:
        return list(self.values["log.dirs"])

    @property
    def embedded(self) -> bool:
        return not self.values["zookeeper.connect"]

    def listener(self) -> tuple[str, int]:
        return parse_listener(self.values["listeners"][0])

    def advertised_listener(self, bound_port: int | None = None) -> tuple[str, int]:
        listeners = self.values["advertised.listeners"] or self.values["listeners"]
        host, port = parse_listener(listeners[0])
        if port == 0 and bound_port is not None:
            port = bound_port
        return host or "127.0.0.1", port


def parse_listener(listener: str) -> tuple[str, int]:
    """``PLAINTEXT://host:port`` (or ``NAME://host:port``) -> (host, port)."""
    match = re.fullmatch(r"(?:[A-Za-z_][A-Za-z0-9_]*://)?\[?([^\]/]*?)\]?:(\d+)", listener.strip())
    if match is None:
        raise ValueError("expected NAME://host:port")
    port = int(match.group(2))
    if port > 65535:
        raise ValueError("port out of range")
    return match.group(1), port


class ConfigSource:
    """Where a config value comes from, as DescribeConfigs reports it (Kafka's numbering)."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType:
    """Value types reported by DescribeConfigs v3+ (Kafka's numbering)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    LIST = 7


def config_type_of(definition: ConfigDef) -> int:
    if definition.parse is _parse_bool:
        return ConfigType.BOOLEAN
    if definition.parse is _parse_list:
        return ConfigType.LIST
    if definition.parse is _parse_int:
        return ConfigType.LONG
    return ConfigType.STRING


def format_value(value: Any) -> str | None:
    """A config value as DescribeConfigs shows it; None (no value, e.g. "as many as log dirs") is null."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)
