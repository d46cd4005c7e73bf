"""Rules every controller applies to topics: legal names, internal topics, and where the
replicas of new partitions go."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


def topic_name_error(name: str) -> str | None:
    """Why Kafka would refuse this topic name, or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        return f"Topic name {name} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def collision_error(name: str, existing: Iterable[str]) -> str | None:
    """'.' and '_' collide in metric names, so Kafka refuses a topic differing only by them."""
    key = name.replace(".", "_")
    for other in existing:
        if other != name and other.replace(".", "_") == key:
            return f"Topic '{name}' collides with existing topic: {other}"
    return None


def assign_replicas(brokers: Sequence[int], num_partitions: int, replication_factor: int,
                    first_partition: int = 0, start: int | None = None) -> dict[int, list[int]]:
    """Spread replicas over brokers as Kafka's rack-unaware placement does: leaders (the first
    replica) round-robin from a random broker, and each partition's followers shifted so that
    no two brokers always follow each other. ``brokers`` must hold at least
    ``replication_factor`` ids."""
    ordered = sorted(brokers)
    count = len(ordered)
    if replication_factor > count:
        raise ValueError(f"replication factor {replication_factor} is larger than the {count} available brokers")
    first_index = random.randrange(count) if start is None else start % count
    shift = random.randrange(count) if start is None else start % count
    assignment: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + num_partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        leader_index = (partition + first_index) % count
        replicas = [ordered[leader_index]]
        for follower in range(replication_factor - 1):
            step = 1 + (shift + follower) % (count - 1)
            replicas.append(ordered[(leader_index + step) % count])
        assignment[partition] = replicas
    return assignment


def assignment_error(assignment: dict[int, list[int]], live_brokers: Iterable[int]) -> str | None:
    """Why a replica assignment given by a client cannot be used, or None."""
    live = set(live_brokers)
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) > 1:
        return "All partitions should have the same number of replicas"
    for index, replicas in sorted(assignment.items()):
        if not replicas:
            return f"Partition {index} has no replicas"
        if len(set(replicas)) != len(replicas):
            return f"Duplicate brokers not allowed in replica assignment: {replicas} for partition {index}"
        unknown = sorted(set(replicas) - live)
        if unknown:
            return f"Unknown broker(s) {unknown} in replica assignment of partition {index}"
    return None
