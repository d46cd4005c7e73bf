"""Where new replicas go (controller/topics.assign_replicas), checked against the examples Kafka's
AdminUtils documents and against its rules on many layouts; and which replica a consumer in a
rack is sent to (KIP-392's RackAwareReplicaSelector)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from minikafka.config.broker import RACK_AWARE_REPLICA_SELECTOR, BrokerConfig, ConfigError
from minikafka.controller.topics import RacksIncomplete, assign_replicas, continuing_start, rack_alternated
from minikafka.replica.replica_selector import (
    ClientMetadata,
    RackAwareReplicaSelector,
    ReplicaView,
    replica_selector,
)


def test_without_racks_leaders_go_round_robin_and_followers_shift_as_in_kafka() -> None:
    # Kafka's documented example: 5 brokers, 10 partitions, 3 replicas, starting at broker 0.
    placed = assign_replicas(dict.fromkeys(range(5)), 10, 3, start=0)
    assert placed[0] == [0, 1, 2] and placed[4] == [4, 0, 1]
    assert placed[5] == [0, 2, 3], "the second round shifts the followers by one more"
    assert placed[9] == [4, 1, 2]


def test_the_rack_alternated_list_is_kafkas() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]


def test_with_racks_the_assignment_is_kafkas_documented_one() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    placed = assign_replicas(racks, 7, 3, start=0)
    assert [placed[p] for p in range(6)] == [[0, 3, 1], [3, 1, 5], [1, 5, 4], [5, 4, 2], [4, 2, 0], [2, 0, 3]]
    assert placed[6] == [0, 4, 2], "past the first round the followers shift"


@pytest.mark.parametrize("seed", range(40))
def test_with_racks_replicas_spread_over_racks_and_leaders_over_brokers(seed: int) -> None:
    chance = random.Random(seed)
    rack_names = [f"zone-{i}" for i in range(chance.randint(2, 4))]
    brokers = {broker: chance.choice(rack_names) for broker in chance.sample(range(1, 40), chance.randint(3, 9))}
    racks = len(set(brokers.values()))
    factor = chance.randint(1, len(brokers))
    partitions = len(brokers) * chance.randint(1, 4)
    placed = assign_replicas(brokers, partitions, factor, first_partition=0)
    assert sorted(placed) == list(range(partitions))
    for replicas in placed.values():
        assert len(replicas) == len(set(replicas)) == factor
        assert len({brokers[b] for b in replicas}) == min(factor, racks), (brokers, replicas)
    leaders = Counter(replicas[0] for replicas in placed.values())
    assert set(leaders.values()) == {partitions // len(brokers)}, "every broker leads as many partitions"


def test_some_brokers_with_a_rack_and_some_without_cannot_be_placed_on() -> None:
    with pytest.raises(RacksIncomplete, match="Not all brokers have rack information"):
        assign_replicas({1: "a", 2: None, 3: "b"}, 3, 2)
    # An empty broker.rack is no rack.
    assert sorted(assign_replicas({1: "", 2: None}, 1, 2)[0]) == [1, 2]


def test_added_partitions_continue_from_the_leader_of_partition_0() -> None:
    assert continuing_start([1, 2, 3], 2) == 1
    assert continuing_start([1, 3, 5], 2) == 1, "the first broker not below it"
    assert continuing_start([1, 2], 7) == 0
    placed = assign_replicas(dict.fromkeys([1, 2, 3]), 2, 2, first_partition=3, start=continuing_start([1, 2, 3], 2))
    assert sorted(placed) == [3, 4] and placed[3][0] == 2 and placed[4][0] == 3


def _view(broker: int, rack: str | None, end: int = 100, since_caught_up: int = 0) -> ReplicaView:
    return ReplicaView(broker, rack, end, since_caught_up)


def test_the_rack_aware_selector_picks_a_replica_in_the_consumers_rack() -> None:
    selector = RackAwareReplicaSelector()
    leader = _view(1, "a")
    followers = [_view(2, "b", end=90), _view(3, "b", end=100), _view(4, "c")]
    every = [leader, *followers]
    assert selector.select(ClientMetadata("b", "PLAINTEXT"), leader, every).broker_id == 3, "the one furthest ahead"
    tie = [leader, _view(2, "b", since_caught_up=50), _view(3, "b", since_caught_up=10)]
    assert selector.select(ClientMetadata("b", "PLAINTEXT"), leader, tie).broker_id == 3, "then the freshest"
    assert selector.select(ClientMetadata("a", "PLAINTEXT"), leader, [*every, _view(5, "a")]) == leader
    assert selector.select(ClientMetadata("d", "PLAINTEXT"), leader, every) == leader, "no replica in its rack"
    assert selector.select(ClientMetadata("", "PLAINTEXT"), leader, every) == leader, "no rack named"


def test_replica_selector_class_takes_kafkas_class_names_only() -> None:
    assert replica_selector("") is None
    assert isinstance(replica_selector(RACK_AWARE_REPLICA_SELECTOR), RackAwareReplicaSelector)
    config = BrokerConfig({"replica.selector.class": RACK_AWARE_REPLICA_SELECTOR, "broker.rack": "a"})
    assert config["broker.rack"] == "a"
    with pytest.raises(ConfigError, match="replica.selector.class"):
        BrokerConfig({"replica.selector.class": "com.example.Mine"})
