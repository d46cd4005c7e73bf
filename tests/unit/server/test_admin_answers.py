"""Answers of admin APIs that Kafka's command-line tools rely on, decided without I/O."""

from __future__ import annotations

import pytest

from minikafka.metadata.cache import NO_LEADER, PartitionMetadata
from minikafka.server.handlers.describe_client_quotas import (
    MATCH_ANY,
    MATCH_DEFAULT,
    MATCH_EXACT,
    filter_error,
)
from minikafka.server.handlers.elect_leaders import PREFERRED, UNCLEAN, embedded_outcome
from protocol.errors import ErrorCode


def _partition(leader: int, offline: tuple[int, ...] = ()) -> PartitionMetadata:
    return PartitionMetadata(leader=leader, leader_epoch=0, replicas=(1,), isr=(1,), offline_replicas=offline)


@pytest.mark.parametrize("election", [PREFERRED, UNCLEAN])
def test_the_embedded_broker_leading_a_partition_needs_no_election_of_either_kind(election: int) -> None:
    """kafka-leader-election --election-type unclean on a led partition: Kafka answers
    ELECTION_NOT_NEEDED ("Valid replica already elected"), not an error."""
    assert embedded_outcome(election, _partition(1))[0] == ErrorCode.ELECTION_NOT_NEEDED


def test_an_unknown_partition_is_named_unknown() -> None:
    assert embedded_outcome(UNCLEAN, None)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert embedded_outcome(PREFERRED, None)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_partition_whose_only_replica_is_offline_has_nobody_to_elect() -> None:
    assert embedded_outcome(UNCLEAN, _partition(NO_LEADER))[0] == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert embedded_outcome(UNCLEAN, _partition(1, offline=(1,)))[0] == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert embedded_outcome(PREFERRED, _partition(NO_LEADER))[0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


@pytest.mark.parametrize("components", [
    [],
    [("user", MATCH_EXACT, "alice")],
    [("user", MATCH_DEFAULT, None), ("client-id", MATCH_ANY, None)],
    [("ip", MATCH_ANY, None)],
])
def test_the_filters_kafka_accepts_are_accepted(components: list[tuple[str, int, str | None]]) -> None:
    assert filter_error(components) is None


@pytest.mark.parametrize(("components", "reason"), [
    ([("user", 3, None)], "Unexpected match type: 3"),
    ([("user", MATCH_EXACT, None)], "needs a name"),
    ([("", MATCH_ANY, None)], "empty filter component entity type"),
    ([("user", MATCH_ANY, None), ("user", MATCH_EXACT, "bob")], "Duplicate user filter component"),
    ([("group", MATCH_ANY, None)], "Custom entity type 'group' not supported"),
    ([("ip", MATCH_ANY, None), ("user", MATCH_ANY, None)], "IP filter component should not be used"),
])
def test_a_wrong_filter_is_refused_with_the_reason(components: list[tuple[str, int, str | None]],
                                                   reason: str) -> None:
    error = filter_error(components)
    assert error is not None and reason in error
