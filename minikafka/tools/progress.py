"""What ``--progress`` shows for replicas on the move, for ``log-dirs`` and ``reassign-partitions``.

Two kinds of move are followed, both measured in bytes on disk, as DescribeLogDirs reports them:

- a replica being added to a broker by a reassignment (ListPartitionReassignments names it among
  the adding replicas): its size on that broker against the size of the partition's leader replica;
- a replica moving between the log dirs of one broker (a future replica, ``is_future_key``): the
  future replica's size against its current replica's.

``progress`` is a pure function from the previous entries and a new ``Snapshot`` to the new entries
(state, bytes copied and to copy, a rate smoothed over samples); ``take_snapshot`` reads one from
the cluster and ``follow`` redraws the lines until every move is done.  Offset lag is not used: a
replica that has every offset of a compacted or truncated leader can still be copying bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from minikafka.storage.units import format_bytes
from minikafka.tools.client import LIST_PARTITION_REASSIGNMENTS, Cluster, ToolError, move_error
from protocol import ErrorCode

TopicPartition = tuple[str, int]
WAITING, COPYING, DONE, FAILED = "waiting", "copying", "done", "failed"
# A replica in the target of a followed reassignment that was not under way when first seen is
# PLACED: done if the partition has it.
ADDING, PLACED, DIR_MOVE = "adding", "placed", "dir"
FINISHED_STATES = (DONE, FAILED)
# The controller answers ListPartitionReassignments; Metadata comes from a broker, which learns the
# outcome a moment later. A replica missing from Metadata after its reassignment ended is failed
# only once it has been missing this long.
METADATA_SETTLE_SECONDS = 5.0
# The rate is the bytes copied over about this long: a throttled copy goes in bursts, so a rate
# between two samples a fraction of a second apart says little.
RATE_WINDOW_SECONDS = 10.0


@dataclass(frozen=True)
class ReplicaSizes:
    """What DescribeLogDirs says of one partition on one broker."""

    log_dir: str | None = None  # the current replica's dir; None: the broker has no current replica
    size: int = 0
    future_dir: str | None = None  # where a move between dirs is copying it to
    future_size: int = 0
    move_error: str | None = None  # why its last move between dirs failed


@dataclass(frozen=True)
class Ongoing:
    """One reassignment under way (a ListPartitionReassignments entry)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True)
class Snapshot:
    """The cluster at one instant (``time`` in seconds, monotonic)."""

    time: float
    reassignments: Mapping[TopicPartition, Ongoing] = field(default_factory=dict)
    replicas: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=dict)  # from Metadata
    leaders: Mapping[TopicPartition, int] = field(default_factory=dict)
    sizes: Mapping[tuple[int, str, int], ReplicaSizes] = field(default_factory=dict)  # (broker, topic, partition)


@dataclass(frozen=True)
class Followed:
    """The moves to follow: ``None`` for every one the cluster shows, or those of a plan."""

    reassignments: Mapping[TopicPartition, tuple[int, ...]] | None = None  # -> the target replicas
    dir_moves: Mapping[tuple[int, str, int], str] | None = None  # (broker, topic, partition) -> target dir


EntryKey = tuple[str, int, str, int]  # (kind, broker, topic, partition)


@dataclass(frozen=True)
class ProgressEntry:
    kind: str  # ADDING, PLACED or DIR_MOVE
    broker: int
    topic: str
    partition: int
    target: str | None = None  # the dir it goes to, when known
    state: str = WAITING
    copied: int = 0
    total: int = 0
    rate: float | None = None  # bytes per second over the last RATE_WINDOW_SECONDS
    samples: tuple[tuple[float, int], ...] = ()  # (time, copied) of the samples the rate is over
    detail: str = ""
    missing_since: float | None = None  # when Metadata first lacked it after its reassignment ended

    @property
    def key(self) -> EntryKey:
        return (self.kind, self.broker, self.topic, self.partition)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def fraction(self) -> float:
        if self.state == DONE:
            return 1.0
        return min(1.0, self.copied / self.total) if self.total else 0.0

    @property
    def eta_seconds(self) -> int | None:
        if not self.rate or self.state != COPYING:
            return None
        return max(0, int((self.total - self.copied) / self.rate))


def progress(previous: Mapping[EntryKey, ProgressEntry], snapshot: Snapshot,
             followed: Followed) -> dict[EntryKey, ProgressEntry]:
    """The entries after ``snapshot``: those of ``previous`` carried on (a finished one stays as
    it was) and any new move ``followed`` asks for."""
    entries: dict[EntryKey, ProgressEntry] = {}
    for key, entry in previous.items():
        entries[key] = entry if entry.state in FINISHED_STATES else _advance(entry, snapshot)
    known = {(key[2], key[3]) for key in entries if key[0] in (ADDING, PLACED)}
    for entry in _new_entries(snapshot, followed, known):
        if entry.key not in entries:
            entries[entry.key] = _advance(entry, snapshot)
    return entries


def _new_entries(snapshot: Snapshot, followed: Followed, known: set[TopicPartition]) -> list[ProgressEntry]:
    found = []
    for (topic, partition), ongoing in snapshot.reassignments.items():
        if followed.reassignments is None or (topic, partition) in followed.reassignments:
            found += [ProgressEntry(ADDING, broker, topic, partition) for broker in ongoing.adding]
    if followed.reassignments is not None:
        for (topic, partition), target in followed.reassignments.items():
            if (topic, partition) in snapshot.reassignments or (topic, partition) in known:
                continue
            found += [ProgressEntry(PLACED, broker, topic, partition) for broker in target]
    if followed.dir_moves is None:
        found += [ProgressEntry(DIR_MOVE, broker, topic, partition, sizes.future_dir)
                  for (broker, topic, partition), sizes in snapshot.sizes.items() if sizes.future_dir]
    else:
        # A replica being added is created in its dir: its ADDING entry shows the dir.
        found += [ProgressEntry(DIR_MOVE, broker, topic, partition, target)
                  for (broker, topic, partition), target in followed.dir_moves.items()
                  if broker not in _adding(snapshot, (topic, partition))]
    return found


def _adding(snapshot: Snapshot, partition: TopicPartition) -> tuple[int, ...]:
    ongoing = snapshot.reassignments.get(partition)
    return ongoing.adding if ongoing is not None else ()


def _advance(entry: ProgressEntry, snapshot: Snapshot) -> ProgressEntry:
    if entry.kind in (ADDING, PLACED):
        return _advance_adding(entry, snapshot)
    return _advance_dir_move(entry, snapshot)


def _copying(entry: ProgressEntry, copied: int, total: int, now: float, **changes: object) -> ProgressEntry:
    samples = [*entry.samples, (now, copied)] if entry.state == COPYING else [(now, copied)]
    while len(samples) > 2 and samples[1][0] <= now - RATE_WINDOW_SECONDS:
        samples.pop(0)
    (first_at, first_copied), (last_at, last_copied) = samples[0], samples[-1]
    rate = max(0.0, (last_copied - first_copied) / (last_at - first_at)) if last_at > first_at else None
    return replace(entry, state=COPYING, copied=copied, total=max(total, copied), rate=rate,
                   samples=tuple(samples), **changes)  # type: ignore[arg-type]


def _advance_adding(entry: ProgressEntry, snapshot: Snapshot) -> ProgressEntry:
    partition = (entry.topic, entry.partition)
    here = snapshot.sizes.get((entry.broker, *partition))
    size = here.size if here is not None and here.log_dir is not None else None
    ongoing = snapshot.reassignments.get(partition)
    if ongoing is not None and entry.broker in ongoing.adding:
        total = _leader_size(snapshot, partition, ongoing)
        if size is None:
            return replace(entry, state=WAITING, total=total, detail="the replica is not created yet")
        return _copying(entry, size, total, snapshot.time, target=here.log_dir if here else None, detail="")
    replicas = snapshot.replicas.get(partition, ())
    if entry.broker in replicas:
        final = size or 0
        return replace(entry, state=DONE, copied=final, total=final, detail="", missing_since=None,
                       target=here.log_dir if here else entry.target)
    if ongoing is not None:
        return replace(entry, state=FAILED, detail=f"no longer among the replicas being added "
                                                   f"({_ids(ongoing.adding)})")
    if partition not in snapshot.replicas:
        why = "the partition no longer exists"
    else:
        why = f"the reassignment ended without it (replicas: {_ids(replicas)}): cancelled, or replaced"
    since = snapshot.time if entry.missing_since is None else entry.missing_since
    if snapshot.time - since < METADATA_SETTLE_SECONDS:
        return replace(entry, state=WAITING, missing_since=since,
                       detail="the reassignment is over; waiting for the metadata to show it")
    return replace(entry, state=FAILED, detail=why)


def _leader_size(snapshot: Snapshot, partition: TopicPartition, ongoing: Ongoing) -> int:
    leader = snapshot.leaders.get(partition, -1)
    sizes = snapshot.sizes.get((leader, *partition))
    if sizes is not None and sizes.log_dir is not None:
        return sizes.size
    # No leader now (or it did not answer): the largest replica not being added stands in for it.
    return max((s.size for b in ongoing.replicas if b not in ongoing.adding
                for s in [snapshot.sizes.get((b, *partition))] if s is not None and s.log_dir is not None),
               default=0)


def _advance_dir_move(entry: ProgressEntry, snapshot: Snapshot) -> ProgressEntry:
    sizes = snapshot.sizes.get((entry.broker, entry.topic, entry.partition))
    if sizes is None:
        if entry.state == COPYING:
            return replace(entry, state=FAILED, detail="the replica left the broker")
        return replace(entry, state=WAITING, detail="the replica is not on the broker yet")
    if sizes.future_dir is not None and (entry.target is None or sizes.future_dir == entry.target):
        return _copying(entry, sizes.future_size, sizes.size, snapshot.time, target=sizes.future_dir, detail="")
    if sizes.log_dir is not None and sizes.log_dir == entry.target:
        return replace(entry, state=DONE, copied=sizes.size, total=sizes.size, detail="")
    if sizes.move_error:
        return replace(entry, state=FAILED, detail=sizes.move_error)
    if entry.state == COPYING:
        # The copy is gone and the replica did not move: cancelled, or failed without a record.
        return replace(entry, state=FAILED, detail="the move stopped (cancelled, or its dir failed)")
    return replace(entry, state=WAITING, detail=f"in {sizes.log_dir}" if sizes.log_dir else "")


def _ids(brokers: tuple[int, ...] | list[int]) -> str:
    return ",".join(map(str, brokers)) or "none"


# ---- reading a snapshot -------------------------------------------------------------------


def sizes_of(cluster: Cluster, brokers: list[int]) -> dict[tuple[int, str, int], ReplicaSizes]:
    """DescribeLogDirs of ``brokers``, per (broker, topic, partition); a broker that does not
    answer is left out (its moves show as waiting)."""
    found: dict[tuple[int, str, int], ReplicaSizes] = {}
    for broker in brokers:
        try:
            results = cluster.describe(broker)
        except ToolError:
            dropped = cluster.connections.pop(broker, None)
            if dropped is not None:
                dropped.close()
            continue
        found.update(replica_sizes(broker, results))
    return found


def replica_sizes(broker: int, results: list[Any]) -> dict[tuple[int, str, int], ReplicaSizes]:
    """One broker's DescribeLogDirs results, per (broker, topic, partition)."""
    found: dict[tuple[int, str, int], ReplicaSizes] = {}
    for result in results:
        for topic in result.topics:
            for p in topic.partitions:
                key = (broker, topic.name, p.partition_index)
                sizes = found.get(key, ReplicaSizes())
                if p.is_future_key:
                    sizes = replace(sizes, future_dir=result.log_dir, future_size=p.partition_size)
                else:
                    sizes = replace(sizes, log_dir=result.log_dir, size=p.partition_size, move_error=move_error(p))
                found[key] = sizes
    return found


def reassignments_of(cluster: Cluster) -> dict[TopicPartition, Ongoing]:
    """ListPartitionReassignments: every reassignment under way."""
    response = cluster.ask_controller(LIST_PARTITION_REASSIGNMENTS, {"topics": None})
    if response.error_code:
        raise ToolError(f"ListPartitionReassignments failed: {ErrorCode(response.error_code).name}"
                        + (f" ({response.error_message})" if response.error_message else ""))
    return {(t.name, p.partition_index): Ongoing(tuple(p.replicas), tuple(p.adding_replicas),
                                                 tuple(p.removing_replicas))
            for t in response.topics for p in t.partitions}


def take_snapshot(cluster: Cluster, brokers: list[int] | None = None, reassignments: bool = True) -> Snapshot:
    """Metadata, ListPartitionReassignments (unless ``reassignments`` is false) and DescribeLogDirs
    of ``brokers`` (default: every broker)."""
    now = time.monotonic()
    cluster.refresh()
    ongoing = reassignments_of(cluster) if reassignments else {}
    sizes = sizes_of(cluster, sorted(cluster.brokers) if brokers is None else brokers)
    return Snapshot(now, ongoing, {tp: tuple(r) for tp, r in cluster.partitions.items()}, dict(cluster.leaders),
                    sizes)


# ---- drawing ------------------------------------------------------------------------------


def progress_line(entry: ProgressEntry, width: int = 30) -> str:
    if entry.kind in (ADDING, PLACED):
        where = f"{'new ' if entry.kind == ADDING else ''}replica on broker {entry.broker}" + (f" ({entry.target})" if entry.target else "")
    else:
        where = f"broker {entry.broker} -> {entry.target or '?'}"
    head = f"{entry.name:<30} {where}"
    filled = int(round(entry.fraction * width))
    bar = "#" * filled + "." * (width - filled)
    if entry.state == DONE:
        return f"{head} [{'#' * width}] done ({format_bytes(entry.total)})"
    if entry.state == FAILED:
        return f"{head} FAILED: {entry.detail}"
    if entry.state == WAITING:
        return f"{head} [{bar}] waiting" + (f" ({entry.detail})" if entry.detail else "")
    rate = f"{format_bytes(entry.rate)}/s" if entry.rate else "- B/s"
    eta = "-"
    seconds = entry.eta_seconds
    if seconds is not None:
        eta = f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return (f"{head} [{bar}] {entry.fraction * 100:5.1f}% {format_bytes(entry.copied)} of "
            f"{format_bytes(entry.total)} {rate} ETA {eta}")


def follow(sample: Callable[[], Snapshot], followed: Followed, out: TextIO, interval: float, timeout: float,
           idle: str = "no moves in progress") -> int:
    """Redraw every followed move until all are done (0), one failed (1) or ``timeout`` seconds
    passed (3; 0 = no limit).  On a terminal the lines are redrawn in place."""
    entries: dict[EntryKey, ProgressEntry] = {}
    tty = hasattr(out, "isatty") and out.isatty()
    drawn = 0
    deadline = time.monotonic() + timeout if timeout else None
    while True:
        snapshot = sample()
        entries = progress(entries, snapshot, followed)
        lines = [progress_line(e) for _, e in sorted(entries.items())] or [idle]
        if tty and drawn:
            out.write(f"\x1b[{drawn}F\x1b[J")
        out.write("\n".join(lines) + "\n")
        if not tty:
            out.write("\n")
        out.flush()
        drawn = len(lines)
        if all(e.state in FINISHED_STATES for e in entries.values()):
            return 1 if any(e.state == FAILED for e in entries.values()) else 0
        if deadline is not None and snapshot.time > deadline:
            out.write(f"gave up after {timeout:g}s with moves still running\n")
            return 3
        time.sleep(interval)
