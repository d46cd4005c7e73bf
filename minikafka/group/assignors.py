"""The server-side assignors of KIP-848 consumer groups: `uniform` and `range`.

An assignor maps each member to the partitions it should own (the group's target
assignment), from the members' subscriptions, the partition count of each subscribed
topic and the previous target. Both are sticky: a partition stays with its member when
balance allows, so that a member leaving or joining moves as few partitions as possible.
Pure functions over immutable inputs; any caller may use them.

- uniform (Kafka's UniformAssignor): spreads every subscribed partition so that the
  members' counts differ by at most one among members that could take it.
- range (Kafka's RangeAssignor): per topic, the subscribed members sorted by member id
  each get a contiguous range, the first `partitions % members` one more; members
  subscribed to the same co-partitioned topics get the same partition numbers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

TopicId = uuid.UUID
# member id -> topic id -> partitions
Assignment = Mapping[TopicId, frozenset[int]]
GroupAssignment = dict[str, dict[TopicId, frozenset[int]]]


@dataclass(frozen=True)
class AssignmentSpec:
    """What an assignor reads: each member's subscribed topic ids, each topic's partition
    count, and the previous target assignment (for stickiness)."""

    subscriptions: Mapping[str, frozenset[TopicId]]
    partition_counts: Mapping[TopicId, int]
    previous: Mapping[str, Assignment]


class UnknownAssignorError(ValueError):
    pass


def _freeze(assignment: Mapping[str, Mapping[TopicId, set[int]]]) -> GroupAssignment:
    return {member: {topic: frozenset(parts) for topic, parts in topics.items() if parts}
            for member, topics in assignment.items()}


def uniform(spec: AssignmentSpec) -> GroupAssignment:
    members = sorted(spec.subscriptions)
    result: dict[str, dict[TopicId, set[int]]] = {m: {} for m in members}
    counts = dict.fromkeys(members, 0)
    eligible: dict[tuple[TopicId, int], list[str]] = {}
    for topic, count in sorted(spec.partition_counts.items(), key=lambda item: str(item[0])):
        subscribers = [m for m in members if topic in spec.subscriptions[m]]
        if subscribers:
            for partition in range(count):
                eligible[(topic, partition)] = subscribers
    owner: dict[tuple[TopicId, int], str] = {}

    def give(tp: tuple[TopicId, int], member: str) -> None:
        owner[tp] = member
        result[member].setdefault(tp[0], set()).add(tp[1])
        counts[member] += 1

    def take(tp: tuple[TopicId, int]) -> None:
        member = owner.pop(tp)
        result[member][tp[0]].discard(tp[1])
        counts[member] -= 1

    # Stickiness: keep what the previous target gave a member that still may own it, up to
    # a fair share (total / members, rounded up).
    quota = -(-len(eligible) // len(members)) if members else 0
    for member in members:
        for topic, partitions in sorted(spec.previous.get(member, {}).items(), key=lambda item: str(item[0])):
            for partition in sorted(partitions):
                tp = (topic, partition)
                if tp in eligible and tp not in owner and member in eligible[tp] and counts[member] < quota:
                    give(tp, member)
    for tp, candidates in eligible.items():
        if tp not in owner:
            give(tp, min(candidates, key=lambda m: (counts[m], m)))
    # Balance: move a partition from a member with two more than another member that may
    # take it. Each move lowers the sum of squared counts, so the loop ends; the bound is a
    # guard, not a limit reached in practice.
    for _ in range(len(eligible) * max(len(members), 1) + 1):
        moved = False
        for tp, member in sorted(owner.items(), key=lambda item: (-counts[item[1]], str(item[0][0]), item[0][1])):
            target = min(eligible[tp], key=lambda m: (counts[m], m))
            if counts[member] - counts[target] >= 2:
                take(tp)
                give(tp, target)
                moved = True
                break
        if not moved:
            break
    return _freeze(result)


def range_assignor(spec: AssignmentSpec) -> GroupAssignment:
    members = sorted(spec.subscriptions)
    result: dict[str, dict[TopicId, set[int]]] = {m: {} for m in members}
    for topic, count in spec.partition_counts.items():
        subscribers = [m for m in members if topic in spec.subscriptions[m]]
        if not subscribers:
            continue
        share, extra = divmod(count, len(subscribers))
        start = 0
        for index, member in enumerate(subscribers):
            size = share + (1 if index < extra else 0)
            if size:
                result[member][topic] = set(range(start, start + size))
            start += size
    return _freeze(result)


ASSIGNORS: dict[str, Callable[[AssignmentSpec], GroupAssignment]] = {
    "uniform": uniform,
    "range": range_assignor,
}


def assign(name: str, spec: AssignmentSpec) -> GroupAssignment:
    """The target assignment `name` computes; every member of the spec has an entry."""
    assignor = ASSIGNORS.get(name)
    if assignor is None:
        raise UnknownAssignorError(f"unknown assignor {name!r}; known: {', '.join(ASSIGNORS)}")
    return assignor(spec)
