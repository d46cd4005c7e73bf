"""Broker configuration: server.properties with Apache Kafka's key names.

Every key is declared once in ``DEFINITIONS`` with its type and default. Values come from a
properties file and then from ``--override key=value`` arguments; an unknown key is a warning, a
value that does not parse is a ``ConfigError`` naming the key.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minikafka.config.inter_broker_protocol import DEFAULT as DEFAULT_INTER_BROKER_PROTOCOL
from minikafka.config.inter_broker_protocol import parse_inter_broker_protocol_version
from minikafka.config.kafka_broker_keys import (
    CLUSTER_LEVEL_LISTENER_KEYS,
    KAFKA_DYNAMIC_DEFINED,
    KAFKA_DYNAMIC_UNDEFINED,
    KAFKA_STATIC_UNDEFINED,
    PER_BROKER_ONLY,
    PER_LISTENER_ONLY,
)

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
    # Java's Long.parseLong grammar: Python's int() would also take "1_000" and explain a refusal in
    # its own words.
    if re.fullmatch(r"[+-]?[0-9]+", text.strip()) is None:
        raise ValueError("expected a whole number")
    return int(text.strip())


def _parse_double(text: str) -> float:
    # A plain decimal number: float() would also take "1_0", "nan" and "inf".
    if re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", text.strip()) is None:
        raise ValueError("expected a number")
    return float(text.strip())


def _parse_str(text: str) -> str:
    return text.strip()


# Kafka's replica selectors (KIP-392) by their class names; "" is Kafka's default (no selector:
# consumers read from the leader).
RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
REPLICA_SELECTORS = ("", LEADER_SELECTOR, RACK_AWARE_REPLICA_SELECTOR)

CLEANUP_POLICIES = ("compact", "delete")


def parse_cleanup_policy(text: str) -> list[str]:
    """compact and/or delete, or nothing at all. Kafka 3.9 takes an empty policy (what an
    IncrementalAlterConfigs SUBTRACT of the last policy leaves): its logs are neither compacted
    nor trimmed by retention, so they keep every record until DeleteRecords moves their start.
    An empty item ("compact,") is refused, as Kafka's list validator refuses it."""
    if not text.strip():
        return []
    policies = [item.strip() for item in text.split(",")]
    wrong = [p for p in policies if p not in CLEANUP_POLICIES]
    if wrong:
        raise ValueError(f"expected compact, delete, compact,delete or nothing, not {text.strip()!r}")
    return policies


# Kafka's security protocols, all of which this broker speaks.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")
_PEM_ONLY = "minikafka reads PEM only; convert a JKS or PKCS12 store to PEM (keytool -importkeystore, openssl pkcs12)"
# The authorizers of Kafka's configuration that turn ACL authorization on; "" leaves it off.
AUTHORIZERS = frozenset({"", "kafka.security.authorizer.AclAuthorizer",
                         "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
LISTENER_PREFIX = "listener.name."
JAAS_CONFIG = "sasl.jaas.config"


def _parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` -> {NAME: PROTOCOL}, names and protocols upper-cased as Kafka does."""
    mapping: dict[str, str] = {}
    for entry in _parse_list(text):
        name, sep, protocol = (part.strip().upper() for part in entry.partition(":"))
        if not sep or not name:
            raise ValueError(f"{entry!r} is not NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"{protocol!r} is not a security protocol (one of {', '.join(SECURITY_PROTOCOLS)})")
        if name in mapping:
            raise ValueError(f"listener name {name} is mapped twice")
        mapping[name] = protocol
    return mapping


@dataclass(frozen=True)
class Listener:
    """One endpoint of ``listeners`` or ``advertised.listeners`` (``NAME://host:port``), with the
    security protocol its name has in ``listener.security.protocol.map``. An empty host means every
    interface."""

    name: str
    security_protocol: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True)
class ConfigDef:
    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    check: Callable[[Any], bool] | None = None
    check_doc: str = ""
    dynamic: bool = False  # may be changed at runtime (IncrementalAlterConfigs on the broker)
    # A secret (a password, a private key): DescribeConfigs shows no value, logs never print it.
    sensitive: bool = False
    # May also be given for one listener as listener.name.<listener>.<key> (Kafka's per-listener prefix).
    per_listener: bool = False


_WEEK_MS = 7 * 24 * 3600 * 1000

DEFINITIONS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        ConfigDef("broker.id", _parse_int, 1, "id of this broker", lambda v: v >= 0, "must be >= 0"),
        ConfigDef("listeners", _parse_list, ["PLAINTEXT://127.0.0.1:9092"],
                  "addresses the broker listens on (NAME://host:port,...)", lambda v: len(v) > 0,
                  "needs at least one listener"),
        ConfigDef("advertised.listeners", _parse_list, [],
                  "addresses given to clients, per listener name (default: that listener's address)"),
        ConfigDef("listener.security.protocol.map", _parse_protocol_map,
                  {name: name for name in SECURITY_PROTOCOLS},
                  "security protocol of each listener name (NAME:PROTOCOL,...)"),
        ConfigDef("inter.broker.listener.name", _parse_str, "",
                  "the listener other brokers connect to (default: the one named after "
                  "security.inter.broker.protocol)"),
        ConfigDef("control.plane.listener.name", _parse_str, "",
                  "a listener that serves only the controller's requests (LeaderAndIsr, StopReplica, "
                  "UpdateMetadata), KIP-291: the controller connects to each broker's listener of that name "
                  "(empty: none, the controller uses the inter-broker listener)"),
        ConfigDef("security.inter.broker.protocol", _parse_str, "PLAINTEXT",
                  "names the inter-broker listener when inter.broker.listener.name is not given",
                  lambda v: v.upper() in SECURITY_PROTOCOLS, "must be one of " + ", ".join(SECURITY_PROTOCOLS)),
        ConfigDef("log.dirs", _parse_list, ["./data/d1", "./data/d2"], "the log directories (disks)",
                  lambda v: len(v) > 0, "needs at least one directory"),
        ConfigDef("zookeeper.connect", _parse_str, "", "ZooKeeper connection string (cluster mode)"),
        ConfigDef("inter.broker.protocol.version", parse_inter_broker_protocol_version, DEFAULT_INTER_BROKER_PROTOCOL,
                  "the protocol level brokers speak among themselves (as Kafka's: 3.9, 3.9-IV0, ...; at least "
                  "2.7-IV1): request versions, ISR changes through the controller from 2.7-IV2, producer ids "
                  "from it from 3.0-IV0"),
        ConfigDef("broker.rack", _parse_str, "",
                  "the rack (or zone) of this broker: new replicas are spread over racks, and consumers "
                  "with a client.rack read from a replica in theirs (empty: none)"),
        ConfigDef("num.partitions", _parse_int, 1, "partitions of an auto-created topic", lambda v: v >= 1,
                  "must be >= 1"),
        ConfigDef("default.replication.factor", _parse_int, 1, "replicas of an auto-created topic",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("min.insync.replicas", _parse_int, 1, "replicas that must acknowledge acks=all",
                  lambda v: v >= 1, "must be >= 1", dynamic=True),
        ConfigDef("auto.create.topics.enable", _parse_bool, True, "create unknown topics on use"),
        ConfigDef("log.segment.bytes", _parse_int, 1 << 30, "size of a segment file before it rolls",
                  lambda v: v >= 14, "must be >= 14", dynamic=True),
        ConfigDef("log.roll.ms", _parse_int, _WEEK_MS, "age of a segment before it rolls (default: log.roll.hours)",
                  lambda v: v >= 1, "must be >= 1", dynamic=True),
        ConfigDef("log.roll.hours", _parse_int, 168, "log.roll.ms in hours, when log.roll.ms is not given",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("log.retention.ms", _parse_int, _WEEK_MS,
                  "age after which segments are deleted (-1: never; default: log.retention.minutes, "
                  "else log.retention.hours)", lambda v: v >= -1, "must be >= -1", dynamic=True),
        ConfigDef("log.retention.minutes", _parse_int, None,
                  "log.retention.ms in minutes, when log.retention.ms is not given (negative: never)"),
        ConfigDef("log.retention.hours", _parse_int, 168,
                  "log.retention.ms in hours, when neither log.retention.ms nor .minutes is given (negative: never)"),
        ConfigDef("log.retention.bytes", _parse_int, -1, "partition size above which old segments go",
                  lambda v: v >= -1, "must be >= -1", dynamic=True),
        ConfigDef("log.segment.delete.delay.ms", _parse_int, 60_000,
                  "how long deleted segments and the dirs of deleted topics wait before their files are removed",
                  lambda v: v >= 0, "must be >= 0", dynamic=True),
        ConfigDef("log.retention.check.interval.ms", _parse_int, 300_000, "how often retention runs",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("log.index.interval.bytes", _parse_int, 4096, "bytes between offset index entries",
                  lambda v: v >= 0, "must be >= 0", dynamic=True),
        ConfigDef("log.message.timestamp.type", _parse_str, "CreateTime", "CreateTime or LogAppendTime",
                  lambda v: v in ("CreateTime", "LogAppendTime"), "must be CreateTime or LogAppendTime", dynamic=True),
        ConfigDef("log.cleanup.policy", parse_cleanup_policy, ["delete"],
                  "what happens to old segments of a topic without cleanup.policy: delete (by retention), "
                  "compact (the latest record of each key is kept), compact,delete or empty (neither: kept for ever)",
                  dynamic=True),
        ConfigDef("log.cleaner.enable", _parse_bool, True, "run the log cleaner, which compacts compacted topics"),
        ConfigDef("log.cleaner.threads", _parse_int, 1, "cleans running at once, each in a process of its own (at most one per log dir)",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("log.cleaner.backoff.ms", _parse_int, 15_000, "pause of the cleaner when no log needs cleaning",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("log.cleaner.dedupe.buffer.size", _parse_int, 128 * 1024 * 1024,
                  "memory of the cleaners' maps of the latest offset of each key, shared by the threads",
                  lambda v: v >= 1024, "must be >= 1024"),
        ConfigDef("log.cleaner.io.buffer.load.factor", _parse_double, 0.9,
                  "how full a cleaner's key map may get before a clean stops mapping more of the log",
                  lambda v: 0 < v <= 1, "must be > 0 and <= 1"),
        ConfigDef("log.cleaner.io.buffer.size", _parse_int, 512 * 1024, "bytes the cleaner reads at a time",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("log.cleaner.io.max.bytes.per.second", _parse_double, 1.7976931348623157e308,
                  "bytes per second the cleaners read and write together",
                  lambda v: v > 0, "must be > 0", dynamic=True),
        ConfigDef("log.cleaner.min.cleanable.ratio", _parse_double, 0.5,
                  "share of a log that must be dirty (written since its last clean) before it is cleaned",
                  lambda v: 0 <= v <= 1, "must be between 0 and 1", dynamic=True),
        ConfigDef("log.cleaner.delete.retention.ms", _parse_int, 86_400_000,
                  "how long a tombstone is kept after the clean that first sees it", lambda v: v >= 0,
                  "must be >= 0", dynamic=True),
        ConfigDef("log.cleaner.min.compaction.lag.ms", _parse_int, 0,
                  "how old a record must be before it may be compacted away", lambda v: v >= 0, "must be >= 0",
                  dynamic=True),
        ConfigDef("log.cleaner.max.compaction.lag.ms", _parse_int, 2**63 - 1,
                  "how old a dirty record may get before its log is cleaned whatever its dirty share",
                  lambda v: v >= 1, "must be >= 1", dynamic=True),
        ConfigDef("log.flush.offset.checkpoint.interval.ms", _parse_int, 60_000,
                  "how often offset checkpoints are written", lambda v: v >= 1, "must be >= 1"),
        ConfigDef("log.dir.check.interval.ms", _parse_int, 1000,
                  "how often each log dir is checked to still be the directory opened at startup "
                  "(not deleted, replaced or unmounted); 0 turns the check off", lambda v: v >= 0,
                  "must be >= 0"),
        ConfigDef("log.dir.failure.timeout.ms", _parse_int, 30_000,
                  "cluster mode: how long a broker keeps telling the controller that a log dir failed "
                  "before it shuts down (when it led replicas there), so that they get other leaders",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("message.max.bytes", _parse_int, 1048588, "largest record batch accepted",
                  lambda v: v >= 0, "must be >= 0", dynamic=True),
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
        ConfigDef("group.initial.rebalance.delay.ms", _parse_int, 3000,
                  "how long the first rebalance of an empty group waits for more members to join",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("group.min.session.timeout.ms", _parse_int, 6000, "smallest session timeout a member may ask for",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("group.max.session.timeout.ms", _parse_int, 1_800_000,
                  "largest session timeout a member may ask for", lambda v: v >= 0, "must be >= 0"),
        ConfigDef("group.max.size", _parse_int, 2**31 - 1, "most members a group may have", lambda v: v >= 1,
                  "must be >= 1"),
        ConfigDef("quota.window.num", _parse_int, 11, "samples a client quota's rate is measured over",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("quota.window.size.seconds", _parse_int, 1, "time span of each sample of a client quota's rate",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("group.coordinator.rebalance.protocols", _parse_list, ["classic", "consumer"],
                  "group protocols the coordinator serves: classic (JoinGroup/SyncGroup) and consumer (KIP-848)",
                  lambda v: bool(v) and set(v) <= {"classic", "consumer"} and "classic" in v,
                  "must list classic and may add consumer"),
        ConfigDef("group.consumer.session.timeout.ms", _parse_int, 45_000,
                  "how long a consumer-protocol member may go without a heartbeat before it is removed",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("group.consumer.heartbeat.interval.ms", _parse_int, 5000,
                  "how often consumer-protocol members are told to heartbeat", lambda v: v >= 1, "must be >= 1"),
        ConfigDef("group.consumer.assignors", _parse_list, ["uniform", "range"],
                  "server-side assignors of consumer-protocol groups, the first is the default",
                  lambda v: bool(v) and set(v) <= {"uniform", "range"}, "must name uniform and/or range"),
        ConfigDef("group.consumer.migration.policy", lambda text: text.strip().lower(), "bidirectional",
                  "whether a classic group is upgraded online when a member joins with the consumer protocol "
                  "(upgrade, bidirectional) or not (disabled, downgrade; a consumer group is never downgraded)",
                  lambda v: v in {"disabled", "upgrade", "downgrade", "bidirectional"},
                  "must be disabled, upgrade, downgrade or bidirectional"),
        ConfigDef("group.consumer.max.size", _parse_int, 2**31 - 1, "most members a consumer-protocol group may have",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("log.dir.min.free.bytes", _parse_int, 0,
                  "a log dir with less free room than this gets no new replica and no move (0: no floor)",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("background.threads", _parse_int, 10,
                  "threads for the log dirs' blocking background work: the fsync of a rolled segment, "
                  "the removal of a deleted partition's files", lambda v: v >= 1, "must be >= 1"),
        ConfigDef("num.replica.alter.log.dirs.threads", _parse_int, None,
                  "threads copying replicas between log dirs, and moves running at once "
                  "(default: the number of log dirs)", lambda v: v >= 1, "must be >= 1"),
        ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", _parse_int, 2**63 - 1,
                  "bytes per second all moves between log dirs may copy together",
                  lambda v: v >= 1, "must be >= 1", dynamic=True),
        ConfigDef("log.dirs.balancer.enable", _parse_bool, False,
                  "move replicas between this broker's log dirs by itself to keep their disks evenly used",
                  dynamic=True),
        ConfigDef("log.dirs.balancer.threshold.percent", _parse_double, 10.0,
                  "the disk balancer moves replicas when the used share of the fullest disk of the log dirs is "
                  "more than this many points above that of the emptiest",
                  lambda v: 0 <= v <= 100, "must be between 0 and 100", dynamic=True),
        ConfigDef("log.dirs.balancer.interval.ms", _parse_int, 30_000,
                  "how often the disk balancer looks at the log dirs (it also looks when one fails)",
                  lambda v: v >= 1, "must be >= 1", dynamic=True),
        # ---- cluster mode (zookeeper.connect) ----
        ConfigDef("leader.replication.throttled.rate", _parse_int, 2**63 - 1,
                  "bytes per second this broker as leader returns to followers of the replicas listed in "
                  "leader.replication.throttled.replicas, together",
                  lambda v: v >= 0, "must be >= 0", dynamic=True),
        ConfigDef("follower.replication.throttled.rate", _parse_int, 2**63 - 1,
                  "bytes per second this broker as follower fetches for the replicas listed in "
                  "follower.replication.throttled.replicas, together",
                  lambda v: v >= 0, "must be >= 0", dynamic=True),
        ConfigDef("minikafka.controller.eligible", _parse_bool, True,
                  "cluster mode: whether this broker stands in controller elections; false keeps it from ever "
                  "creating /controller, so that the controller stays an Apache Kafka broker while a mixed "
                  "cluster migrates (minikafka's own key: Apache Kafka ignores it with a warning)"),
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
        ConfigDef("replica.selector.class", _parse_str, "",
                  "which replica a consumer that names its rack is told to read from (KIP-392): "
                  f"{RACK_AWARE_REPLICA_SELECTOR}, or empty for the leader alone",
                  lambda v: v in REPLICA_SELECTORS, "must be empty or one of " + ", ".join(REPLICA_SELECTORS[1:])),
        ConfigDef("num.replica.fetchers", _parse_int, 1, "fetcher tasks per leader broker", lambda v: v >= 1,
                  "must be >= 1"),
        ConfigDef("unclean.leader.election.enable", _parse_bool, False,
                  "let an out-of-sync replica lead when no in-sync one is left (acknowledged records may be lost)",
                  dynamic=True),
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
        # ---- transactions (KIP-98) ----
        ConfigDef("transaction.state.log.num.partitions", _parse_int, 50,
                  "partitions of __transaction_state, fixed when it is created", lambda v: v >= 1, "must be >= 1"),
        ConfigDef("transaction.state.log.replication.factor", _parse_int, 3,
                  "replicas of __transaction_state (fewer when fewer brokers are alive, with a warning)",
                  lambda v: v >= 1, "must be >= 1"),
        ConfigDef("transaction.state.log.min.isr", _parse_int, 2,
                  "min.insync.replicas of __transaction_state", lambda v: v >= 1, "must be >= 1"),
        ConfigDef("transaction.state.log.segment.bytes", _parse_int, 100 * 1024 * 1024,
                  "segment size of __transaction_state", lambda v: v >= 14, "must be >= 14"),
        ConfigDef("transaction.max.timeout.ms", _parse_int, 900_000,
                  "the longest transaction.timeout.ms a producer may ask for", lambda v: v >= 1, "must be >= 1"),
        ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", _parse_int, 10_000,
                  "how often transactions open longer than their timeout are aborted", lambda v: v >= 1,
                  "must be >= 1"),
        ConfigDef("transactional.id.expiration.ms", _parse_int, 604_800_000,
                  "how long an idle transactional id is kept", lambda v: v >= 1, "must be >= 1"),
        ConfigDef("transaction.partition.verification.enable", _parse_bool, True,
                  "a leader checks with the coordinator that a transaction's first batch in a partition "
                  "belongs to an ongoing transaction that has the partition (KIP-890); changeable at run time, "
                  "cluster-wide or per broker", dynamic=True),
        ConfigDef("offsets.topic.replication.factor", _parse_int, 3,
                  "replicas of __consumer_offsets (fewer when fewer brokers are alive, with a warning)",
                  lambda v: v >= 1, "must be >= 1"),
        # ---- security: TLS, SASL, ACLs (minikafka/security) ----
        ConfigDef("ssl.keystore.type", _parse_str, "PEM", "format of the key store: PEM only (JKS and PKCS12 "
                  "are refused)", lambda v: v.upper() == "PEM", _PEM_ONLY, per_listener=True),
        ConfigDef("ssl.keystore.location", _parse_str, "",
                  "PEM file holding this broker's private key and its certificate chain", per_listener=True),
        ConfigDef("ssl.keystore.password", _parse_str, "",
                  "not used with PEM (Kafka refuses it too): give the private key's password as ssl.key.password",
                  sensitive=True, per_listener=True),
        ConfigDef("ssl.key.password", _parse_str, "", "password of the (encrypted) private key", sensitive=True,
                  per_listener=True),
        ConfigDef("ssl.keystore.certificate.chain", _parse_str, "",
                  "the certificate chain in PEM, inline (instead of ssl.keystore.location)", per_listener=True),
        ConfigDef("ssl.keystore.key", _parse_str, "", "the private key in PEM, inline (with "
                  "ssl.keystore.certificate.chain)", sensitive=True, per_listener=True),
        ConfigDef("ssl.truststore.type", _parse_str, "PEM", "format of the trust store: PEM only",
                  lambda v: v.upper() == "PEM", _PEM_ONLY, per_listener=True),
        ConfigDef("ssl.truststore.location", _parse_str, "",
                  "PEM file of the CA certificates trusted for peers' certificates (default: the system's)",
                  per_listener=True),
        ConfigDef("ssl.truststore.password", _parse_str, "", "not used with PEM", sensitive=True, per_listener=True),
        ConfigDef("ssl.truststore.certificates", _parse_str, "",
                  "trusted CA certificates in PEM, inline (instead of ssl.truststore.location)", per_listener=True),
        ConfigDef("ssl.client.auth", _parse_str, "none",
                  "whether TLS clients must present a certificate: required, requested or none",
                  lambda v: v in ("required", "requested", "none"), "must be required, requested or none",
                  per_listener=True),
        ConfigDef("ssl.enabled.protocols", _parse_list, ["TLSv1.2", "TLSv1.3"], "TLS versions accepted",
                  lambda v: bool(v) and all(p in TLS_VERSIONS for p in v),
                  "must list TLSv1.2 and/or TLSv1.3", per_listener=True),
        ConfigDef("ssl.protocol", _parse_str, "TLSv1.3", "the TLS protocol (TLSv1.2, TLSv1.3 or TLS: the newest "
                  "the peers share)", lambda v: v in (*TLS_VERSIONS, "TLS"), "must be TLS, TLSv1.2 or TLSv1.3",
                  per_listener=True),
        ConfigDef("ssl.cipher.suites", _parse_list, [],
                  "TLS 1.2 cipher suites offered, by IANA or OpenSSL name (default: OpenSSL's)", per_listener=True),
        ConfigDef("ssl.endpoint.identification.algorithm", _parse_str, "https",
                  "how a broker checks another broker's certificate: https (its name or IP must match) or empty "
                  "(any certificate the trust store vouches for)", lambda v: v.lower() in ("https", ""),
                  "must be https or empty", per_listener=True),
        ConfigDef("ssl.principal.mapping.rules", _parse_str, "DEFAULT",
                  "how a client certificate's subject becomes the principal's name (Kafka's RULE:pattern/"
                  "replacement/[LU] syntax)", per_listener=True),
        ConfigDef("sasl.enabled.mechanisms", _parse_list, ["GSSAPI"],
                  "SASL mechanisms of the SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", per_listener=True),
        ConfigDef("sasl.mechanism.inter.broker.protocol", _parse_str, "GSSAPI",
                  "the SASL mechanism brokers authenticate to each other with on a SASL inter-broker listener"),
        ConfigDef("sasl.server.max.receive.size", _parse_int, 524288,
                  "largest frame a client may send before it has authenticated", lambda v: v >= 1, "must be >= 1",
                  per_listener=True),
        ConfigDef("connections.max.reauth.ms", _parse_int, 0,
                  "a SASL session lasts this long; then the client must authenticate again on its connection "
                  "(KIP-368) or it is closed (0: sessions never expire)", lambda v: v >= 0, "must be >= 0",
                  per_listener=True),
        ConfigDef("connection.failed.authentication.delay.ms", _parse_int, 100,
                  "how long a failed authentication waits before its answer (it slows down password guessing)",
                  lambda v: v >= 0, "must be >= 0"),
        ConfigDef("authorizer.class.name", _parse_str, "",
                  "the authorizer: kafka.security.authorizer.AclAuthorizer or "
                  "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACL authorization on; "
                  "empty: every principal may do everything",
                  lambda v: v in AUTHORIZERS, "must be empty, " + " or ".join(sorted(a for a in AUTHORIZERS if a))),
        ConfigDef("super.users", _parse_str, "",
                  "principals allowed everything whatever the ACLs, separated by semicolons (User:admin;User:broker)"),
        ConfigDef("allow.everyone.if.no.acl.found", _parse_bool, False,
                  "whether a resource no ACL names is open to every principal"),
    ]
}

# A key given in another unit stands for its milliseconds key when that one is not given; among
# several, the finer unit wins (Kafka's precedence: ms, then minutes, then hours).
UNIT_VARIANTS: dict[str, tuple[tuple[str, int], ...]] = {
    "log.retention.ms": (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    "log.roll.ms": (("log.roll.hours", 3_600_000),),
}
# Negative retention in any unit means "keep forever", which log.retention.ms spells -1.
_UNLIMITED_WHEN_NEGATIVE = {"log.retention.ms"}

# Keys of Apache Kafka's broker (most from its stock server.properties) that tune what minikafka
# does differently or not at all. They are accepted with a note, so a Kafka configuration loads
# without warnings, and offered as suggestions for misspelt keys.
KAFKA_KEYS_WITHOUT_EFFECT = frozenset({
    "num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.roll.jitter.ms", "log.roll.jitter.hours",
})

ALIASES = {"node.id": "broker.id", "log.dir": "log.dirs",
           # KIP-113's name for the move throttle.
           "intra.broker.throttled.rate": "replica.alter.log.dirs.io.max.bytes.per.second"}


def _did_you_mean(key: str) -> str:
    known = [*DEFINITIONS, *ALIASES, *KAFKA_KEYS_WITHOUT_EFFECT]
    nearest = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
    return f" (did you mean {nearest[0]}?)" if nearest else ""


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
    """The keys minikafka applies at run time when they change dynamically."""
    return [name for name, definition in DEFINITIONS.items() if definition.dynamic]


def updatable_dynamically(name: str) -> bool:
    """Whether AlterConfigs on a broker may set ``name`` (a key Kafka or minikafka updates at run
    time; a key neither knows is a custom config, which Kafka stores as well)."""
    name = ALIASES.get(name, name)
    definition = DEFINITIONS.get(name)
    if definition is not None:
        return definition.dynamic or name in KAFKA_DYNAMIC_DEFINED
    return name not in KAFKA_STATIC_UNDEFINED


def _listener_base(key: str) -> str | None:
    """``<key>`` of ``listener.name.<listener>.<key>``; None for a key without that prefix."""
    if not key.startswith(LISTENER_PREFIX):
        return None
    return key[len(LISTENER_PREFIX):].partition(".")[2]


def _kafka_set(keys: Iterable[str]) -> str:
    return f"Set({', '.join(keys)})"


_INTEGER_RANGES = {"SHORT": 2**15, "INT": 2**31, "LONG": 2**63}


def _check_kafka_typed(key: str, kind: str, text: str) -> None:
    """A value of a Kafka key minikafka does not define, checked against its Kafka type."""
    try:
        if kind in _INTEGER_RANGES:
            value = _parse_int(text)
            if not -_INTEGER_RANGES[kind] <= value < _INTEGER_RANGES[kind]:
                raise ValueError(f"out of range for a {kind.lower()}")
        elif kind == "DOUBLE":
            _parse_double(text)
        elif kind == "BOOLEAN":
            _parse_bool(text)
    except ValueError as exc:
        raise ConfigError(f"invalid value {text!r} for configuration {key!r}: {exc}") from None


def _check_dynamic_value(key: str, text: str) -> Any:
    """The parsed value of a dynamic key (of its base key for a listener-prefixed one), as far as
    minikafka or Kafka knows its type; raises ConfigError naming ``key``."""
    base = _listener_base(key) or key
    name = ALIASES.get(base, base)
    definition = DEFINITIONS.get(name)
    if definition is not None:
        return _checked(definition, key, text)
    if name in KAFKA_DYNAMIC_UNDEFINED:
        _check_kafka_typed(key, KAFKA_DYNAMIC_UNDEFINED[name][0], text)
    return text


def check_dynamic_configs(configs: Mapping[str, str | None], per_broker: bool) -> None:
    """Refuse a set of dynamic broker configs as Kafka does (ConfigError, with Kafka's words):
    static keys, key and trust stores without a listener prefix, bad values, and at the cluster
    default (``per_broker`` False) the listener and security keys only a broker id may carry."""
    static = [key for key in configs if _listener_base(key) is None and not updatable_dynamically(key)]
    if static:
        raise ConfigError(f"Cannot update these configs dynamically: {_kafka_set(static)}")
    unprefixed = [key for key in configs if key in PER_LISTENER_ONLY]
    if unprefixed:
        raise ConfigError("These security configs can be dynamically updated only per-listener using the "
                          f"listener prefix: {_kafka_set(unprefixed)}")
    for key, text in configs.items():
        if text is None:
            raise ConfigError(f"Null value not supported for : {key}")
        _check_dynamic_value(key, text)
    if not per_broker:
        broker_only = [key for key in configs if key in PER_BROKER_ONLY or (
            (base := _listener_base(key)) is not None and base not in CLUSTER_LEVEL_LISTENER_KEYS)]
        if broker_only:
            raise ConfigError("Cannot update these configs at default cluster level, broker id must be specified: "
                              f"{_kafka_set(broker_only)}")


def applied_dynamically(key: str) -> bool:
    """Whether minikafka acts on a dynamic value of ``key`` at run time; any other accepted key is
    only stored and described, as Kafka would store and describe it."""
    definition = DEFINITIONS.get(ALIASES.get(key, key))
    return definition is not None and definition.dynamic and _listener_base(key) is None


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
        without_effect = []
        # listener name -> {key: value} of listener.name.<listener>.<key> settings (see listener_value).
        self.per_listener: dict[str, dict[str, Any]] = {}
        for key, text in raw.items():
            if key.startswith(LISTENER_PREFIX):
                self._set_per_listener(key, text)
                continue
            name = ALIASES.get(key, key)
            definition = DEFINITIONS.get(name)
            if definition is None:
                if key in KAFKA_KEYS_WITHOUT_EFFECT:
                    without_effect.append(key)
                else:
                    log.warning("unknown configuration key %r ignored%s", key, _did_you_mean(key))
                continue
            self.values[name] = _checked(definition, key, text)
            self.explicit.add(name)
        if without_effect:
            log.info("Kafka configuration keys without effect in minikafka: %s", ", ".join(without_effect))
        self._resolve_unit_variants()
        self._check_log_dirs_distinct()
        self._bound = self._parse_listeners("listeners")
        self._advertised = self._parse_listeners("advertised.listeners")
        self._check_listeners()
        # Dynamic values minikafka applies (parsed), per broker and as the cluster default ...
        self.dynamic_broker: dict[str, Any] = {}
        self.dynamic_default: dict[str, Any] = {}
        # ... and those it only stores and describes, as given (see applied_dynamically).
        self.stored_broker: dict[str, str] = {}
        self.stored_default: dict[str, str] = {}
        self._told_unapplied: set[str] = set()
        self._listeners: dict[str, list[ConfigListener]] = {}

    def _set_per_listener(self, key: str, text: str) -> None:
        """``listener.name.<listener>.<key>``: a per-listener key, or a JAAS configuration of one
        listener and SASL mechanism (``listener.name.<listener>.<mechanism>.sasl.jaas.config``)."""
        listener, _, rest = key[len(LISTENER_PREFIX):].partition(".")
        definition = DEFINITIONS.get(rest)
        if listener and definition is not None and definition.per_listener:
            self.per_listener.setdefault(listener.upper(), {})[rest] = _checked(definition, key, text)
        elif listener and rest.lower().endswith("." + JAAS_CONFIG) and rest.count(".") == 3:
            mechanism = rest[: -len(JAAS_CONFIG) - 1].upper()
            self.per_listener.setdefault(listener.upper(), {})[f"{mechanism}.{JAAS_CONFIG}"] = text.strip()
        else:
            log.warning("unknown configuration key %r ignored (not a key that can be set per listener)", key)

    def listener_value(self, listener: str, key: str) -> Any:
        """``listener.name.<listener>.<key>`` if given, else ``key``'s value (Kafka's precedence)."""
        overrides = self.per_listener.get(listener.upper(), {})
        return overrides[key] if key in overrides else self[key]

    def listener_key(self, listener: str, key: str) -> str:
        """The name a listener's value of ``key`` was given under (for messages about it)."""
        if key in self.per_listener.get(listener.upper(), {}):
            return f"{LISTENER_PREFIX}{listener.lower()}.{key}"
        return key

    def jaas_config(self, listener: str, mechanism: str) -> str | None:
        """``listener.name.<listener>.<mechanism>.sasl.jaas.config``, as given."""
        found = self.per_listener.get(listener.upper(), {}).get(f"{mechanism.upper()}.{JAAS_CONFIG}")
        return None if found is None else str(found)

    def _resolve_unit_variants(self) -> None:
        for name, variants in UNIT_VARIANTS.items():
            if name in self.explicit:
                continue
            given = [(variant, factor) for variant, factor in variants if variant in self.explicit]
            if not given:
                continue
            variant, factor = given[0]
            value = self.values[variant] * factor
            if name in _UNLIMITED_WHEN_NEGATIVE and value < 0:
                value = -1
            self.values[name] = _checked(DEFINITIONS[name], variant, str(value))
            self.explicit.add(name)

    def _check_log_dirs_distinct(self) -> None:
        """Two entries naming one directory (spelt differently, or through a symlink) would have two
        log managers share its files; refuse before anything is written."""
        seen: dict[str, str] = {}
        for log_dir in self.values["log.dirs"]:
            real = os.path.realpath(log_dir)
            if real in seen:
                raise ConfigError(f"invalid value {','.join(self.values['log.dirs'])!r} for configuration 'log.dirs': "
                                  f"{seen[real]!r} and {log_dir!r} are the same directory ({real})")
            seen[real] = log_dir

    def _parse_listeners(self, key: str) -> dict[str, Listener]:
        """The endpoints of ``key`` by listener name, each with its security protocol."""
        protocols = self.values["listener.security.protocol.map"]
        parsed: dict[str, Listener] = {}
        for text in self.values[key]:
            try:
                name, host, port = split_listener(text)
            except ValueError as exc:
                raise ConfigError(f"invalid value {text!r} for configuration {key!r}: {exc}") from None
            if name in parsed:
                raise ConfigError(f"invalid value {text!r} for configuration {key!r}: listener name {name} "
                                  "appears twice")
            if name not in protocols:
                raise ConfigError(f"invalid value {text!r} for configuration {key!r}: listener name {name} has no "
                                  "security protocol in 'listener.security.protocol.map'")
            parsed[name] = Listener(name, protocols[name], host, port)
        return parsed

    def _check_listeners(self) -> None:
        for name, listener in self._advertised.items():
            if name not in self._bound:
                raise ConfigError(f"invalid value {str(listener)!r} for configuration 'advertised.listeners': "
                                  f"no listener is named {name} in 'listeners'")
        for name, listener in self._bound.items():
            if name not in self._advertised and _unspecified(listener.host):
                raise ConfigError(
                    f"invalid value {str(listener)!r} for configuration 'listeners': {listener.host} is not an "
                    f"address clients can reach, and advertised.listeners names no {name} listener; set "
                    f"advertised.listeners={name}://<a routable host>:{listener.port or '<port>'}")
        for listener in self._advertised.values():
            if _unspecified(listener.host):
                raise ConfigError(f"invalid value {str(listener)!r} for configuration 'advertised.listeners': "
                                  f"{listener.host} is the non-routable meta-address; advertise a host clients "
                                  "can reach")
        inter_broker = self.inter_broker_listener_name
        if inter_broker not in self._bound:
            raise ConfigError(f"invalid value {inter_broker!r} for configuration 'inter.broker.listener.name': "
                              f"it must name one of the listeners ({', '.join(self._bound)})")
        control_plane = self.control_plane_listener_name
        if control_plane is not None and control_plane not in self._bound:
            raise ConfigError(f"invalid value {control_plane!r} for configuration 'control.plane.listener.name': "
                              f"it must name one of the listeners ({', '.join(self._bound)})")
        if control_plane == inter_broker:
            raise ConfigError(f"invalid value {control_plane!r} for configuration 'control.plane.listener.name': "
                              "it must differ from the inter-broker listener, which serves the other requests "
                              "between brokers")

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Iterable[str] = ()) -> BrokerConfig:
        """The file's settings, then each ``key=value`` override on top."""
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

    def dynamic_text(self, name: str) -> tuple[str | None, int] | None:
        """(value as text, ConfigSource) of the dynamic value of ``name`` in force or stored, per
        broker before cluster default; None when it has none."""
        for applied, stored, source in ((self.dynamic_broker, self.stored_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                                        (self.dynamic_default, self.stored_default,
                                         ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)):
            if name in applied:
                return format_value(applied[name]), source
            if name in stored:
                return stored[name], source
        return None

    def source_of(self, name: str) -> int:
        """Where the effective value of a key comes from (a ConfigSource); for a key minikafka
        only stores, where the value it describes comes from."""
        if name in self.dynamic_broker or name in self.stored_broker:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if name in self.dynamic_default or name in self.stored_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if name in self.explicit:
            return ConfigSource.STATIC_BROKER_CONFIG
        return ConfigSource.DEFAULT_CONFIG

    def parse_dynamic(self, configs: Mapping[str, str], per_broker: bool = True) -> dict[str, Any]:
        """Check a set of dynamic configs (see check_dynamic_configs; raises ConfigError) and parse
        the values minikafka applies."""
        return self._split_dynamic(configs, per_broker)[0]

    @staticmethod
    def _split_dynamic(configs: Mapping[str, str], per_broker: bool) -> tuple[dict[str, Any], dict[str, str]]:
        check_dynamic_configs(configs, per_broker)
        applied: dict[str, Any] = {}
        stored: dict[str, str] = {}
        for key, text in configs.items():
            if applied_dynamically(key):
                applied[ALIASES.get(key, key)] = _check_dynamic_value(key, text)
            else:
                stored[key] = text
        return applied, stored

    def apply_dynamic(self, per_broker: Mapping[str, str], cluster_default: Mapping[str, str]) -> None:
        """Replace every dynamic value (raises ConfigError, changing nothing, if one is bad), then
        call the listeners of each key whose effective value changed."""
        broker_values, broker_stored = self._split_dynamic(per_broker, True)
        default_values, default_stored = self._split_dynamic(cluster_default, False)
        before = {key: self[key] for key in dynamic_keys()}
        self.dynamic_broker, self.dynamic_default = broker_values, default_values
        self.stored_broker, self.stored_default = broker_stored, default_stored
        for key in sorted({*broker_stored, *default_stored} - self._told_unapplied):
            # Kafka acts on these (or, for a custom key, its plugins may read it); minikafka keeps
            # them so that they are described and survive restarts, and says once that it does no more.
            self._told_unapplied.add(key)
            log.info("dynamic broker config %s is stored and described as Kafka does, but has no effect in "
                     "minikafka", key)
        for key, old in before.items():
            new = self[key]
            if new != old:
                log.info("dynamic config %s changed from %s to %s", key, shown_value(old), shown_value(new))
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

    def listeners(self) -> list[Listener]:
        """The endpoints the broker binds (``listeners``), in the order given."""
        return list(self._bound.values())

    def advertised_listeners(self, bound_ports: Mapping[str, int] | None = None) -> list[Listener]:
        """The endpoints given to clients and other brokers, one per listener: the entry of
        ``advertised.listeners`` with its name, else the listener itself. An empty host is advertised
        as 127.0.0.1, a port 0 as the one bound for that listener name (``bound_ports``)."""
        advertised = []
        for name, listener in self._bound.items():
            chosen = self._advertised.get(name, listener)
            port = chosen.port or (bound_ports or {}).get(name, 0)
            advertised.append(dataclasses.replace(chosen, host=chosen.host or "127.0.0.1", port=port))
        return advertised

    @property
    def inter_broker_listener_name(self) -> str:
        """Kafka's rule: ``inter.broker.listener.name``, else the listener named after
        ``security.inter.broker.protocol`` (PLAINTEXT by default)."""
        return (str(self.values["inter.broker.listener.name"]).upper()
                or str(self.values["security.inter.broker.protocol"]).upper())

    @property
    def control_plane_listener_name(self) -> str | None:
        """The listener that serves only the controller's requests, if one is named."""
        return str(self.values["control.plane.listener.name"]).upper() or None

    def security_protocol_of(self, listener: str) -> str:
        return self._bound[listener].security_protocol

    def listener(self) -> tuple[str, int]:
        """(host, port) of the first listener, the one the broker binds today."""
        first = self.listeners()[0]
        return first.host, first.port

    def advertised_listener(self, bound_port: int | None = None) -> tuple[str, int]:
        """(host, port) advertised for the first listener."""
        first = self.listeners()[0]
        advertised = self.advertised_listeners({first.name: bound_port or 0})[0]
        return advertised.host, advertised.port


def _unspecified(host: str) -> bool:
    """0.0.0.0 or :: (bind to every address): fine to listen on, never an address to be reached at."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def split_listener(listener: str) -> tuple[str, str, int]:
    """``NAME://host:port`` (host may be empty or a bracketed IPv6 address) -> (NAME, host, port)."""
    match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^\[\]/:]*):(\d+)", listener.strip())
    if match is None:
        raise ValueError("expected NAME://host:port")
    port = int(match.group(3))
    if port > 65535:
        raise ValueError("port out of range")
    return match.group(1).upper(), match.group(2).strip("[]"), port


def parse_listener(listener: str) -> tuple[str, int]:
    """``NAME://host:port`` -> (host, port)."""
    _, host, port = split_listener(listener)
    return host, port


class ConfigSource:
    """Where a config value comes from, as DescribeConfigs reports it (Kafka's numbering)."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType:
    """Value types reported by DescribeConfigs v3+ (Kafka's numbering)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9

    @classmethod
    def named(cls, name: str) -> int:
        """The number of a type named as kafka_broker_keys names it ("INT", "LIST", ...)."""
        return int(getattr(cls, name))


def config_type_of(definition: ConfigDef) -> int:
    if definition.parse is _parse_bool:
        return ConfigType.BOOLEAN
    if definition.parse in (_parse_list, parse_cleanup_policy):
        return ConfigType.LIST
    if definition.parse is _parse_int:
        return ConfigType.LONG
    if definition.parse is _parse_double:
        return ConfigType.DOUBLE
    return ConfigType.STRING


def format_value(value: Any) -> str | None:
    """A config value as DescribeConfigs shows it; None (no value, e.g. "as many as log dirs") is null."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, dict):
        return ",".join(f"{key}:{item}" for key, item in value.items())
    return str(value)


# Defaults that stand for "no limit" (Kafka's Long.MAX_VALUE, Integer.MAX_VALUE and Double.MAX_VALUE).
_UNLIMITED = frozenset({2**63 - 1, 2**31 - 1, 1.7976931348623157e308})


def shown_value(value: Any) -> str:
    """A value as an operator reads it (logs, config-keys): a no-limit value is "unlimited"."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value in _UNLIMITED:
        return "unlimited"
    text = format_value(value)
    return "(none)" if text is None else text


# Variables of the Kafka images' convention that are not broker settings (the JVM's).
_NOT_SETTINGS = frozenset({"KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS",
                           "KAFKA_LOG4J_OPTS", "KAFKA_JMX_OPTS", "KAFKA_JMX_PORT", "KAFKA_DEBUG", "KAFKA_HOME"})


_SEPARATORS = {"_": ".", "__": "_", "___": "-"}


def overrides_from_environment(environ: Mapping[str, str]) -> list[str]:
    """``key=value`` overrides from ``KAFKA_*`` variables, as the common Kafka images read them:
    ``KAFKA_ZOOKEEPER_CONNECT`` is ``zookeeper.connect``; ``__`` stands for ``_`` and ``___``
    for ``-`` in a key (``KAFKA_LOG_DIR__CHECK`` would be ``log.dir_check``)."""
    overrides = []
    for name, value in sorted(environ.items()):
        if not name.startswith("KAFKA_") or name in _NOT_SETTINGS:
            continue
        key = re.sub(r"_{1,3}", lambda run: _SEPARATORS[run.group()], name[len("KAFKA_"):].lower())
        overrides.append(f"{key}={value}")
    return overrides
