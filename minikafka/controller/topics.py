"""Rules every controller applies to topics: legal names, internal topics, and where the
replicas of new partitions go."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


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


class RacksIncomplete(ValueError):
    """Some live brokers have a rack and others none: Kafka refuses to place replicas then
    (AdminOperationException, which its CreateTopics answers UNKNOWN_SERVER_ERROR)."""


RACKS_INCOMPLETE = "Not all brokers have rack information for replica rack aware assignment."


def assign_replicas(brokers: Mapping[int, str | None], num_partitions: int, replication_factor: int,
                    first_partition: int = 0, start: int | None = None) -> dict[int, list[int]]:
    """Place the replicas of new partitions as Kafka's AdminUtils does. ``brokers`` maps each
    live broker to its rack (None: no ``broker.rack``) and must hold at least
    ``replication_factor`` of them. ``start`` fixes where the leaders begin (adding partitions
    to a topic continues from its first partition's leader); None picks it at random.

    Without racks, leaders (the first replica) go round-robin over the brokers and each
    partition's followers are shifted so that no two brokers always follow each other. With a
    rack on every broker, the same walk goes over a list that alternates between racks, and a
    follower is taken only from a rack (and a broker) that holds no replica of the partition yet,
    until every rack (every broker) holds one: replicas spread over racks, leaders over brokers.
    Raises RacksIncomplete when only some brokers have a rack."""
    count = len(brokers)
    if replication_factor > count:
        raise ValueError(f"replication factor {replication_factor} is larger than the {count} available brokers")
    racks = {broker: rack for broker, rack in brokers.items() if rack}
    if racks and len(racks) < count:
        raise RacksIncomplete(RACKS_INCOMPLETE)
    ordered = rack_alternated(racks) if racks else sorted(brokers)
    rack_count = len(set(racks.values())) if racks else 1
    first_index = random.randrange(count) if start is None else start % count
    shift = random.randrange(count) if start is None else start % count
    assignment: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + num_partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        leader_index = (partition + first_index) % count
        replicas = [ordered[leader_index]]
        used_racks = {racks.get(replicas[0])}
        candidate = 0
        while len(replicas) < replication_factor:
            step = 1 + (shift * rack_count + candidate) % (count - 1)
            broker = ordered[(leader_index + step) % count]
            candidate += 1
            rack = racks.get(broker)
            if racks and rack in used_racks and len(used_racks) < rack_count:
                continue
            if broker in replicas and len(replicas) < count:
                continue
            replicas.append(broker)
            used_racks.add(rack)
        assignment[partition] = replicas
    return assignment


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """The brokers one rack after the other (racks by name, brokers by id within each): with
    racks a: 1, 2 and b: 3, that is 1, 3, 2."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    return [column[row] for row in range(max(map(len, columns))) for column in columns if row < len(column)]


def continuing_start(brokers: Iterable[int], first_replica: int) -> int:
    """Where Kafka begins the leaders of partitions added to a topic: at the first broker (by id)
    not below the leader its partition 0 was given."""
    return next((i for i, broker in enumerate(sorted(brokers)) if broker >= first_replica), 0)


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
