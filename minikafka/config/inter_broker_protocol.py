"""inter.broker.protocol.version: the level of the protocol brokers speak among themselves.

Kafka's ZooKeeper-mode brokers pick, from this one setting, the versions of the requests they
send each other (the controller's LeaderAndIsr, UpdateMetadata and StopReplica; the follower's
Fetch and OffsetForLeaderEpoch; minikafka's brokers send no ListOffsets to each other) and whether a partition leader proposes ISR
changes to the controller (AlterPartition, 2.7-IV2) and a broker asks it for producer ids
(AllocateProducerIds, 3.0-IV0). During a rolling upgrade every broker stays at the old level
until all run the new release, so that none sends a request another cannot read.

The levels and the versions they map to are those of Kafka 3.9's MetadataVersion and
controller (facts read from its source; the table below is ours). A level is written as Kafka
takes it: "3.9-IV0", or a release ("3.9", "2.8", "0.10.2") meaning its newest level, and a
patch release ("3.9.1") meaning its release's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

# Every level of Kafka 3.9's MetadataVersion up to 3.9-IV0, oldest first (4.0's levels are
# unstable in 3.9 and are not taken). A release without internal versions has "" as its IV.
_LEVELS: tuple[tuple[str, str], ...] = (
    ("0.8.0", ""), ("0.8.1", ""), ("0.8.2", ""), ("0.9.0", ""),
    ("0.10.0", "IV0"), ("0.10.0", "IV1"), ("0.10.1", "IV0"), ("0.10.1", "IV1"), ("0.10.1", "IV2"),
    ("0.10.2", "IV0"), ("0.11.0", "IV0"), ("0.11.0", "IV1"), ("0.11.0", "IV2"),
    ("1.0", "IV0"), ("1.1", "IV0"), ("2.0", "IV0"), ("2.0", "IV1"),
    ("2.1", "IV0"), ("2.1", "IV1"), ("2.1", "IV2"), ("2.2", "IV0"), ("2.2", "IV1"),
    ("2.3", "IV0"), ("2.3", "IV1"), ("2.4", "IV0"), ("2.4", "IV1"), ("2.5", "IV0"), ("2.6", "IV0"),
    ("2.7", "IV0"), ("2.7", "IV1"), ("2.7", "IV2"), ("2.8", "IV0"), ("2.8", "IV1"),
    ("3.0", "IV0"), ("3.0", "IV1"), ("3.1", "IV0"), ("3.2", "IV0"),
    ("3.3", "IV0"), ("3.3", "IV1"), ("3.3", "IV2"), ("3.3", "IV3"), ("3.4", "IV0"),
    ("3.5", "IV0"), ("3.5", "IV1"), ("3.5", "IV2"), ("3.6", "IV0"), ("3.6", "IV1"), ("3.6", "IV2"),
    ("3.7", "IV0"), ("3.7", "IV1"), ("3.7", "IV2"), ("3.7", "IV3"), ("3.7", "IV4"),
    ("3.8", "IV0"), ("3.9", "IV0"),
)


@functools.total_ordering
@dataclass(frozen=True)
class InterBrokerProtocolVersion:
    """One level; levels compare in Kafka's order."""

    release: str
    internal: str

    @property
    def rank(self) -> int:
        return _LEVELS.index((self.release, self.internal))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, InterBrokerProtocolVersion):
            return NotImplemented
        return self.rank < other.rank

    def __str__(self) -> str:
        return f"{self.release}-{self.internal}" if self.internal else self.release

    def at_least(self, text: str) -> bool:
        return self >= parse_level(text)

    # ---- what a broker does at this level ---------------------------------------------------
    @property
    def alter_partition(self) -> bool:
        """A partition leader proposes ISR changes to the controller (KIP-497) instead of
        writing the partition's state znode itself."""
        return self.at_least("2.7-IV2")

    @property
    def allocate_producer_ids(self) -> bool:
        """A broker asks the controller for blocks of producer ids (KIP-730) instead of
        claiming them in /latest_producer_id_block itself."""
        return self.at_least("3.0-IV0")

    @property
    def topic_ids(self) -> bool:
        """Inter-broker requests may name topics by id (KIP-516): AlterPartition from v2."""
        return self.at_least("2.8-IV0")

    def _version(self, table: tuple[tuple[str, int], ...]) -> int:
        for level, version in table:
            if self.at_least(level):
                return version
        return 0

    @property
    def leader_and_isr_version(self) -> int:
        return self._version((("3.4-IV0", 7), ("3.2-IV0", 6), ("2.8-IV1", 5), ("2.4-IV1", 4), ("2.4-IV0", 3),
                              ("2.2-IV0", 2), ("1.0-IV0", 1)))

    @property
    def update_metadata_version(self) -> int:
        return self._version((("3.4-IV0", 8), ("2.8-IV1", 7), ("2.4-IV1", 6), ("2.2-IV0", 5), ("1.0-IV0", 4),
                              ("0.10.2-IV0", 3), ("0.10.0-IV1", 2), ("0.9.0", 1)))

    @property
    def stop_replica_version(self) -> int:
        return self._version((("3.4-IV0", 4), ("2.6-IV0", 3), ("2.4-IV1", 2), ("2.2-IV0", 1)))

    @property
    def fetch_version(self) -> int:
        return self._version((("3.9-IV0", 17), ("3.7-IV4", 16), ("3.5-IV1", 15), ("3.5-IV0", 14), ("3.1-IV0", 13),
                              ("2.7-IV1", 12), ("2.3-IV1", 11), ("2.1-IV2", 10), ("2.0-IV1", 8), ("1.1-IV0", 7),
                              ("0.11.0-IV1", 5), ("0.11.0-IV0", 4), ("0.10.1-IV1", 3), ("0.10.0-IV0", 2),
                              ("0.9.0", 1)))

    @property
    def offset_for_leader_epoch_version(self) -> int:
        return self._version((("2.8-IV0", 4), ("2.3-IV1", 3), ("2.1-IV1", 2), ("2.0-IV0", 1)))



@functools.cache
def parse_level(text: str) -> InterBrokerProtocolVersion:
    """A level as Kafka reads it; ValueError for one it does not know."""
    by_name: dict[str, tuple[str, str]] = {}
    for release, internal in _LEVELS:
        by_name[f"{release}-{internal}" if internal else release] = (release, internal)
        by_name[release] = (release, internal)  # a release alone: its newest level (the last one listed)
    value = text.strip()
    parts = value.split(".")
    # Kafka keeps three numbers of a 0.x release ("0.10.2") and two of the others ("3.9"): more
    # name a patch release, which speaks its release's newest level.
    keep = 3 if value.startswith("0.") else 2
    key = ".".join(parts[:keep]) if len(parts) > keep else value
    found = by_name.get(key)
    if found is None:
        if key.startswith(("4.", "5.")) or _newer_than_known(key):
            raise ValueError(f"{value} is newer than the newest level minikafka knows, {LATEST}; "
                             f"use {LATEST} or lower")
        raise ValueError(f"{value} is not a valid version (expected a Kafka release such as 3.9 or a level "
                         f"such as 3.9-IV0)")
    return InterBrokerProtocolVersion(*found)


def _newer_than_known(key: str) -> bool:
    release = key.split("-")[0].split(".")
    try:
        numbers = tuple(int(n) for n in release)
    except ValueError:
        return False
    return len(numbers) == 2 and numbers > (3, 9)


LATEST = "3.9-IV0"  # Kafka 3.9's default in ZooKeeper mode
DEFAULT = parse_level(LATEST)
# minikafka's follower reads Fetch responses only in their flexible form (v12, KIP-482), which
# Kafka's brokers send from 2.7-IV1: below it a minikafka follower could not replicate.
OLDEST_SUPPORTED = "2.7-IV1"


def parse_inter_broker_protocol_version(text: str) -> InterBrokerProtocolVersion:
    """The value of inter.broker.protocol.version; ValueError (without the key: the config
    layer names it) for an unknown level or one minikafka cannot speak."""
    level = parse_level(text)
    if level < parse_level(OLDEST_SUPPORTED):
        raise ValueError(f"minikafka cannot speak the inter-broker protocol below {OLDEST_SUPPORTED} (its followers "
                         f"read Fetch v12 or later); {level} is older. Raise the cluster's inter.broker.protocol.version "
                         f"to at least {OLDEST_SUPPORTED} (a rolling restart of its Kafka brokers) before adding a "
                         f"minikafka broker")
    return level
