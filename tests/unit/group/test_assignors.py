"""The server-side assignors of KIP-848 groups, on plain objects."""

from __future__ import annotations

import uuid

import pytest

from minikafka.group.assignors import AssignmentSpec, UnknownAssignorError, assign

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def _flat(assignment: dict[uuid.UUID, frozenset[int]]) -> set[tuple[uuid.UUID, int]]:
    return {(topic, p) for topic, parts in assignment.items() for p in parts}


def _spec(members: dict[str, set[uuid.UUID]], counts: dict[uuid.UUID, int],
          previous: dict[str, dict[uuid.UUID, frozenset[int]]] | None = None) -> AssignmentSpec:
    return AssignmentSpec({m: frozenset(t) for m, t in members.items()}, counts, previous or {})


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_every_subscribed_partition_has_exactly_one_member(name: str) -> None:
    result = assign(name, _spec({"a": {T1, T2}, "b": {T1}, "c": {T2}}, {T1: 5, T2: 4}))
    owned = [tp for parts in result.values() for tp in _flat(parts)]
    assert sorted(owned, key=str) == sorted({(T1, p) for p in range(5)} | {(T2, p) for p in range(4)}, key=str)
    assert all(topic in {T1} for topic in result["b"]) and all(topic in {T2} for topic in result["c"])


def test_uniform_balances_to_within_one() -> None:
    result = assign("uniform", _spec({m: {T1, T2} for m in "abc"}, {T1: 7, T2: 3}))
    counts = sorted(len(_flat(parts)) for parts in result.values())
    assert counts == [3, 3, 4]


def test_uniform_moves_only_the_leavers_partitions() -> None:
    members = {m: {T1} for m in "abcd"}
    first = assign("uniform", _spec(members, {T1: 8}))
    del members["d"]
    second = assign("uniform", _spec(members, {T1: 8}, first))
    for member in "abc":
        assert _flat(first[member]) <= _flat(second[member]), member
    assert sorted(len(_flat(parts)) for parts in second.values()) == [2, 3, 3]


def test_uniform_gives_a_newcomer_its_share_from_the_others() -> None:
    first = assign("uniform", _spec({"a": {T1}, "b": {T1}}, {T1: 6}))
    second = assign("uniform", _spec({"a": {T1}, "b": {T1}, "c": {T1}}, {T1: 6}, first))
    assert [len(_flat(second[m])) for m in "abc"] == [2, 2, 2]
    assert _flat(second["a"]) <= _flat(first["a"]) and _flat(second["b"]) <= _flat(first["b"])


def test_range_gives_contiguous_ranges_the_first_members_one_more() -> None:
    result = assign("range", _spec({"b": {T1, T2}, "a": {T1, T2}}, {T1: 5, T2: 5}))
    assert result["a"] == {T1: frozenset({0, 1, 2}), T2: frozenset({0, 1, 2})}
    assert result["b"] == {T1: frozenset({3, 4}), T2: frozenset({3, 4})}


def test_a_member_with_no_topic_gets_an_empty_assignment() -> None:
    assert assign("uniform", _spec({"a": {T1}, "b": set()}, {T1: 2}))["b"] == {}


def test_an_unknown_assignor_is_named() -> None:
    with pytest.raises(UnknownAssignorError, match="sticky"):
        assign("sticky", _spec({"a": {T1}}, {T1: 1}))
