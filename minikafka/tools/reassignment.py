"""Apache Kafka's reassignment files, checked field by field, and the plans ``--generate`` makes.

A reassignment file, as ``kafka-reassign-partitions.sh`` reads and writes it::

    {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3],
                                "log_dirs":["any","/data/d2","any"]}]}

(``log_dirs`` is optional, one per replica, ``"any"`` leaving the dir to the broker); a
topics-to-move file is ``{"version":1,"topics":[{"topic":"t"}]}``.  Every check raises ToolError
naming the field (``partitions[3].log_dirs[1]: ...``).  Nothing here does I/O: the cluster's
brokers, partitions and log dirs are passed in.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from minikafka.tools.client import ToolError

ANY_DIR = "any"
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class PartitionPlacement:
    """Where one partition's replicas should be: brokers in order (the first is the preferred
    leader), and per replica a log dir or ANY_DIR."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def dir_moves(self) -> list[tuple[int, str]]:
        """(broker, dir) of every replica given a dir."""
        return [(b, d) for b, d in zip(self.replicas, self.log_dirs, strict=True) if d != ANY_DIR]


# ---- the parts every file shares ----------------------------------------------------------


def load_document(text: str, list_key: str, entry_shape: str) -> list[Any]:
    """The entries of ``{"version":1, list_key:[...]}``, after checking the envelope."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolError(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(document, dict):
        raise ToolError(f"the top level must be an object with \"version\" and \"{list_key}\"")
    unknown = sorted(set(document) - {"version", list_key})
    if unknown:
        raise ToolError(f"{unknown[0]}: unknown field (expected \"version\" and \"{list_key}\")")
    if "version" not in document:
        raise ToolError("version: missing (must be 1)")
    if document["version"] != 1 or isinstance(document["version"], bool):
        raise ToolError(f"version: must be 1, not {document['version']!r}")
    entries = document.get(list_key)
    if not isinstance(entries, list) or not entries:
        raise ToolError(f"{list_key}: must be a non-empty list of {entry_shape}")
    return entries


def check_fields(entry: Any, where: str, required: Iterable[str], optional: Iterable[str] = ()) -> None:
    required = list(required)
    allowed = [*required, *optional]
    if not isinstance(entry, dict):
        raise ToolError(f"{where}: must be an object with {_listing(required)}")
    unknown = sorted(set(entry) - set(allowed))
    if unknown:
        raise ToolError(f"{where}.{unknown[0]}: unknown field (expected {', '.join(allowed)})")
    for key in required:
        if key not in entry:
            raise ToolError(f"{where}.{key}: missing")


def _listing(keys: list[str]) -> str:
    quoted = [f'"{k}"' for k in keys]
    return ", ".join(quoted[:-1]) + f" and {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def is_int(value: Any, low: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def topic_partition(entry: dict[str, Any], where: str) -> TopicPartition:
    topic, partition = entry["topic"], entry["partition"]
    if not isinstance(topic, str) or not topic:
        raise ToolError(f"{where}.topic: must be a non-empty string, not {topic!r}")
    if not is_int(partition):
        raise ToolError(f"{where}.partition: must be an integer >= 0, not {partition!r}")
    return topic, partition


# ---- reassignment files -------------------------------------------------------------------


def is_placement(entry: Any) -> bool:
    """Whether a ``partitions`` entry is in Kafka's reassignment form (it names replicas)."""
    return isinstance(entry, dict) and "replicas" in entry


def parse_placement(entry: Any, where: str) -> PartitionPlacement:
    check_fields(entry, where, ("topic", "partition", "replicas"), ("log_dirs",))
    topic, partition = topic_partition(entry, where)
    replicas = entry["replicas"]
    if not isinstance(replicas, list) or not replicas or not all(is_int(b) for b in replicas):
        raise ToolError(f"{where}.replicas: must be a non-empty list of broker ids (integers >= 0), "
                        f"not {replicas!r}")
    twice = sorted({b for b in replicas if replicas.count(b) > 1})
    if twice:
        raise ToolError(f"{where}.replicas: broker {twice[0]} is listed twice in {replicas}")
    log_dirs = entry.get("log_dirs", [ANY_DIR] * len(replicas))
    if not isinstance(log_dirs, list):
        raise ToolError(f"{where}.log_dirs: must be a list of \"any\" or absolute paths, not {log_dirs!r}")
    if len(log_dirs) != len(replicas):
        raise ToolError(f"{where}.log_dirs: has {len(log_dirs)} entries for {len(replicas)} replicas "
                        "(one per replica, \"any\" to let the broker choose)")
    normalized = []
    for i, log_dir in enumerate(log_dirs):
        if not isinstance(log_dir, str) or (log_dir != ANY_DIR and not os.path.isabs(log_dir)):
            raise ToolError(f"{where}.log_dirs[{i}]: must be \"any\" or an absolute path, not {log_dir!r}")
        normalized.append(log_dir if log_dir == ANY_DIR else os.path.normpath(log_dir))
    return PartitionPlacement(topic, partition, tuple(replicas), tuple(normalized))


def parse_reassignment(text: str) -> list[PartitionPlacement]:
    """Kafka's reassignment file; raises ToolError naming the first wrong field."""
    entries = load_document(text, "partitions", '{"topic", "partition", "replicas"[, "log_dirs"]}')
    found: list[PartitionPlacement] = []
    seen: dict[TopicPartition, int] = {}
    for i, entry in enumerate(entries):
        where = f"partitions[{i}]"
        placement = parse_placement(entry, where)
        key = (placement.topic, placement.partition)
        if key in seen:
            raise ToolError(f"{where}: {placement.name} is already in partitions[{seen[key]}]")
        seen[key] = i
        found.append(placement)
    return found


def parse_topics_to_move(text: str) -> list[str]:
    """``{"version":1,"topics":[{"topic":"t"}]}``: the topics, in file order."""
    entries = load_document(text, "topics", '{"topic"}')
    topics: list[str] = []
    for i, entry in enumerate(entries):
        where = f"topics[{i}]"
        check_fields(entry, where, ("topic",))
        topic = entry["topic"]
        if not isinstance(topic, str) or not topic:
            raise ToolError(f"{where}.topic: must be a non-empty string, not {topic!r}")
        if topic in topics:
            raise ToolError(f"{where}.topic: {topic} is already in topics[{topics.index(topic)}]")
        topics.append(topic)
    return topics


def parse_broker_list(text: str, option: str = "--broker-list") -> list[int]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items or not all(item.isdigit() for item in items):
        raise ToolError(f"{option}: {text!r} is not a comma-separated list of broker ids")
    brokers = [int(item) for item in items]
    twice = sorted({b for b in brokers if brokers.count(b) > 1})
    if twice:
        raise ToolError(f"{option}: broker {twice[0]} is listed twice")
    return brokers


def check_placements(placements: list[PartitionPlacement], partitions: Mapping[TopicPartition, Any],
                     brokers: Iterable[int], log_dirs: Mapping[int, Mapping[str, bool]]) -> None:
    """Raises ToolError naming the first entry the cluster cannot do: an unknown topic, partition or
    broker, or a dir that is not a log dir of its broker (``log_dirs``: broker -> {dir: online},
    for at least every broker given a dir) or is offline."""
    known = set(brokers)
    topics = {topic for topic, _ in partitions}
    for i, placement in enumerate(placements):
        where = f"partitions[{i}]"
        if placement.topic not in topics:
            raise ToolError(f"{where}.topic: topic {placement.topic!r} does not exist")
        if (placement.topic, placement.partition) not in partitions:
            raise ToolError(f"{where}.partition: {placement.topic} has no partition {placement.partition}")
        for broker in placement.replicas:
            if broker not in known:
                raise ToolError(f"{where}.replicas: broker {broker} is not in the cluster (brokers: {sorted(known)})")
        for j, (broker, log_dir) in enumerate(zip(placement.replicas, placement.log_dirs, strict=True)):
            if log_dir == ANY_DIR:
                continue
            dirs = log_dirs.get(broker, {})
            if log_dir not in dirs:
                raise ToolError(f"{where}.log_dirs[{j}]: {log_dir} is not a log dir of broker {broker} "
                                f"(its log dirs: {', '.join(dirs) or 'none known'})")
            if not dirs[log_dir]:
                raise ToolError(f"{where}.log_dirs[{j}]: {log_dir} is offline on broker {broker}")


def reassignment_json(placements: Iterable[PartitionPlacement]) -> str:
    """Kafka's JSON for ``placements``, one line, as kafka-reassign-partitions.sh prints it."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": p.topic, "partition": p.partition, "replicas": list(p.replicas), "log_dirs": list(p.log_dirs)}
        for p in placements]}, separators=(",", ":"))


def throttled_replicas(pairs: Iterable[tuple[int, int]]) -> str:
    """The value of a ``*.replication.throttled.replicas`` topic config: ``partition:broker,...``."""
    return ",".join(f"{partition}:{broker}" for partition, broker in sorted(set(pairs)))


# ---- --generate ---------------------------------------------------------------------------


def generate(current: Mapping[TopicPartition, tuple[int, ...]], sizes: Mapping[TopicPartition, int],
             brokers: list[int]) -> list[PartitionPlacement]:
    """A placement of every partition of ``current`` (keeping its replication factor) on
    ``brokers``: replica counts per broker differ by at most one, bytes (``sizes``: a partition's
    size) and preferred leaders are spread; between brokers equal in all that, a replica stays
    where it is.  The same input always gives the same plan.  Log dirs are left to the brokers."""
    brokers = sorted(set(brokers))
    if not brokers:
        raise ToolError("--broker-list: no broker given")
    for (topic, partition), replicas in sorted(current.items()):
        if len(replicas) > len(brokers):
            raise ToolError(f"--broker-list: {topic}-{partition} has {len(replicas)} replicas but only "
                            f"{len(brokers)} broker(s) are given")
    counts = dict.fromkeys(brokers, 0)
    held_bytes = dict.fromkeys(brokers, 0)
    leaders = dict.fromkeys(brokers, 0)
    chosen: dict[TopicPartition, list[int]] = {}
    # Largest first, so the small partitions even out what the large ones left uneven.
    for key in sorted(current, key=lambda tp: (-sizes.get(tp, 0), tp)):
        size = sizes.get(key, 0)
        picked = _pick(current[key], brokers, counts, held_bytes, leaders)
        for b in picked:
            counts[b] += 1
            held_bytes[b] += size
        leaders[picked[0]] += 1
        chosen[key] = picked
    _even_out_leaders(chosen, leaders)
    return [PartitionPlacement(topic, partition, tuple(chosen[(topic, partition)]),
                               (ANY_DIR,) * len(chosen[(topic, partition)]))
            for topic, partition in sorted(chosen)]


def _pick(replicas: tuple[int, ...], brokers: list[int], counts: dict[int, int], held_bytes: dict[int, int],
          leaders: dict[int, int]) -> list[int]:
    """The brokers of one partition, preferred leader first."""
    fewest = min(counts.values())
    least = [b for b in brokers if counts[b] == fewest]

    def leader_rank(b: int) -> tuple[int, int, int, bool, int]:
        return (leaders[b], counts[b], held_bytes[b], b not in replicas[:1], b)

    def follower_rank(b: int) -> tuple[int, bool, int]:
        return (held_bytes[b], b not in replicas, b)

    # Counts stay within one of each other as long as every broker at the fewest is taken before
    # any other.
    if len(least) >= len(replicas):
        leader = min(least, key=leader_rank)
        rest = sorted((b for b in least if b != leader), key=follower_rank)[:len(replicas) - 1]
    else:
        leader = min(brokers, key=leader_rank)
        must = [b for b in least if b != leader]
        extra = sorted((b for b in brokers if b not in least and b != leader), key=follower_rank)
        rest = must + extra[:len(replicas) - 1 - len(must)]
    return [leader, *rest]


def _even_out_leaders(chosen: dict[TopicPartition, list[int]], leaders: dict[int, int]) -> None:
    """Hand a preferred leadership to another replica of the same partition while that narrows the
    gap by two or more (each hand-over lowers the sum of squares, so this ends)."""
    changed = True
    while changed:
        changed = False
        for key in sorted(chosen):
            replicas = chosen[key]
            lighter = min(replicas[1:], key=lambda b: (leaders[b], b), default=None)
            if lighter is not None and leaders[replicas[0]] - leaders[lighter] >= 2:
                leaders[replicas[0]] -= 1
                leaders[lighter] += 1
                replicas.remove(lighter)
                replicas.insert(0, lighter)
                changed = True
