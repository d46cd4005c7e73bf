"""inter.broker.protocol.version: parsing as Kafka reads it, and the request versions and
behaviours each level maps to (Kafka 3.9's MetadataVersion and controller)."""

from __future__ import annotations

import pytest

from minikafka.config.broker import BrokerConfig, ConfigError
from minikafka.config.inter_broker_protocol import (
    _LEVELS,
    OLDEST_SUPPORTED,
    InterBrokerProtocolVersion,
    parse_inter_broker_protocol_version,
    parse_level,
)
from protocol.apis import (
    alter_partition,
    fetch,
    leader_and_isr,
    offset_for_leader_epoch,
    stop_replica,
    update_metadata,
)


@pytest.mark.parametrize(("text", "level"), [
    ("3.9", "3.9-IV0"), ("3.9-IV0", "3.9-IV0"), (" 3.9.2 ", "3.9-IV0"), ("2.8", "2.8-IV1"), ("2.8-IV0", "2.8-IV0"),
    ("3.3", "3.3-IV3"), ("3.3-IV3", "3.3-IV3"), ("2.7", "2.7-IV2"), ("2.7-IV1", "2.7-IV1"), ("3.7", "3.7-IV4"),
    ("0.10.2", "0.10.2-IV0"), ("0.10.2.1", "0.10.2-IV0"), ("0.8.2", "0.8.2"), ("1.0", "1.0-IV0"),
])
def test_levels_are_read_as_kafka_reads_them(text: str, level: str) -> None:
    assert str(parse_level(text)) == level


def test_levels_compare_in_kafka_order() -> None:
    assert parse_level("2.7-IV2") > parse_level("2.7-IV1") > parse_level("2.6") > parse_level("0.11.0")
    assert parse_level("3.9") == parse_level("3.9-IV0")
    assert sorted(InterBrokerProtocolVersion(*level) for level in reversed(_LEVELS))[0] == parse_level("0.8.0")


def test_the_default_is_kafka_3_9s() -> None:
    config = BrokerConfig({})
    assert str(config["inter.broker.protocol.version"]) == "3.9-IV0"


@pytest.mark.parametrize(("text", "says"), [
    ("3.9-IV9", "is not a valid version"), ("abc", "is not a valid version"), ("", "is not a valid version"),
    ("4.0", "newer than the newest level minikafka knows, 3.9-IV0"),
    ("3.10", "newer than the newest level minikafka knows"),
    ("2.6", "minikafka cannot speak the inter-broker protocol below 2.7-IV1"),
    ("0.10.2-IV0", "below 2.7-IV1"),
])
def test_a_bad_value_names_the_key_and_says_why(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig({"inter.broker.protocol.version": text})
    assert "inter.broker.protocol.version" in str(refused.value)
    assert says in str(refused.value)


@pytest.mark.parametrize(("text", "versions"), [
    # level: LeaderAndIsr, UpdateMetadata, StopReplica, Fetch, OffsetForLeaderEpoch
    ("2.7-IV1", (4, 6, 3, 12, 3)),
    ("2.8-IV0", (4, 6, 3, 12, 4)),
    ("2.8", (5, 7, 3, 12, 4)),
    ("3.0", (5, 7, 3, 12, 4)),
    ("3.1", (5, 7, 3, 13, 4)),
    ("3.3", (6, 7, 3, 13, 4)),
    ("3.4", (7, 8, 4, 13, 4)),
    ("3.5-IV0", (7, 8, 4, 14, 4)),
    ("3.5", (7, 8, 4, 15, 4)),
    ("3.7", (7, 8, 4, 16, 4)),
    ("3.8", (7, 8, 4, 16, 4)),
    ("3.9", (7, 8, 4, 17, 4)),
])
def test_request_versions_follow_the_level(text: str, versions: tuple[int, ...]) -> None:
    level = parse_inter_broker_protocol_version(text)
    assert (level.leader_and_isr_version, level.update_metadata_version, level.stop_replica_version,
            level.fetch_version, level.offset_for_leader_epoch_version) == versions


def test_isr_changes_and_producer_ids_go_through_the_controller_from_kafkas_levels() -> None:
    assert not parse_level("2.7-IV1").alter_partition and parse_level("2.7-IV2").alter_partition
    assert not parse_level("2.8").allocate_producer_ids and parse_level("3.0-IV0").allocate_producer_ids
    assert not parse_level("2.7").topic_ids and parse_level("2.8-IV0").topic_ids


def test_every_supported_level_sends_versions_the_schemas_define() -> None:
    oldest = parse_level(OLDEST_SUPPORTED)
    apis = [(leader_and_isr, "leader_and_isr_version"), (update_metadata, "update_metadata_version"),
            (stop_replica, "stop_replica_version"), (fetch, "fetch_version"),
            (offset_for_leader_epoch, "offset_for_leader_epoch_version")]
    for level in (InterBrokerProtocolVersion(*found) for found in _LEVELS):
        if level < oldest:
            continue
        for module, attribute in apis:
            version = getattr(level, attribute)
            assert module.API.min_version <= version <= module.API.max_version, (str(level), module.API.name)
    # AlterPartition goes out at v3 with topic ids and v1 without (as Kafka's builder chooses).
    assert alter_partition.API.min_version <= 1 and alter_partition.API.max_version >= 3
