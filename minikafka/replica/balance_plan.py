"""The rules of the disk balancer, as pure functions: how uneven a broker's disks are, how many
bytes must move at least to even them out, and which replica moves do it.

A disk is a file system: log dirs on one file system share its bytes, so moving a replica
between them changes nothing and is never planned.  A disk's *used share* is the part of its
total bytes that is not usable (replicas, and anything else on it), in percent; the *spread* is
the used share of the fullest disk minus that of the emptiest, in points.  The balancer keeps
the spread at most ``threshold_percent``.

``bytes_to_balance`` is the lower bound: the bytes that must move if replicas could be cut into
any pieces (a transport problem with a closed-form answer).  ``plan_balance`` chooses whole
replicas greedily: at each step the move whose bytes most reduce that lower bound (every byte
useful first, then the move doing the most), charging a growing replica the bytes it will add
over ``growth_horizon_s`` so that sealed, slow-growing replicas go first.  It never plans a
replica that is already moving (its move is counted as done), never moves a replica twice,
and never fills a disk below ``min_free_bytes`` of usable room.

Used by the broker's DirBalancer (replica/dir_balancer.py) and by ``minikafka log-dirs --balance``;
nothing here does I/O, so both see the same plan from the same inputs.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from minikafka.storage.units import format_bytes

# A growing replica is charged the bytes it adds over this long: about how long a move of a
# few GiB takes, during which the copy chases the appends.
GROWTH_HORIZON_S = 60.0
# Past the moves where every byte counts, how many of the next larger replicas are weighed per
# pair of disks: the lower bound is convex in the bytes moved, so larger ones only do worse.
_LARGER_CANDIDATES = 8
_MAX_MOVES = 10_000
# Plans longer than this are not searched for needless moves (each check replays the plan).
_MAX_PRUNED = 200
_EPSILON = 1e-9

TopicPartition = tuple[str, int]


class _OfPartition:
    """What names a replica: its topic and partition."""

    topic: str
    partition: int

    @property
    def key(self) -> TopicPartition:
        return self.topic, self.partition

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class DirLoad:
    """One live log dir: its file system's total and usable bytes, and which file system it is
    (dirs with the same ``file_system`` share those bytes)."""

    path: str
    total_bytes: int
    usable_bytes: int
    file_system: str


@dataclass(frozen=True)
class ReplicaLoad(_OfPartition):
    """One replica in a live log dir: its size, how fast it grows, and its move in progress
    (``moving_to``, with ``copied_bytes`` of the copy written), if any."""

    topic: str
    partition: int
    log_dir: str
    size_bytes: int
    growth_bytes_per_s: float = 0.0
    moving_to: str | None = None
    copied_bytes: int = 0


@dataclass(frozen=True)
class PlannedMove(_OfPartition):
    """One replica move of a plan, with what it does to the used shares (percent) of the two
    disks and to the spread (points); ``reason`` says it for the broker log."""

    topic: str
    partition: int
    source_dir: str
    dest_dir: str
    size_bytes: int
    growth_bytes_per_s: float
    source_share: tuple[float, float]  # before, after
    dest_share: tuple[float, float]
    spread: tuple[float, float]

    def reason(self, threshold_percent: float) -> str:
        growth = (f", growing {format_bytes(self.growth_bytes_per_s)}/s" if self.growth_bytes_per_s > 0
                  else ", not growing")
        return (f"{self.name} ({format_bytes(self.size_bytes)}{growth}) from {self.source_dir} "
                f"({self.source_share[0]:.1f}% -> {self.source_share[1]:.1f}% used) to {self.dest_dir} "
                f"({self.dest_share[0]:.1f}% -> {self.dest_share[1]:.1f}% used): spread "
                f"{self.spread[0]:.1f} -> {self.spread[1]:.1f} points, threshold {threshold_percent:g}")


@dataclass(frozen=True)
class BalancePlan:
    """What ``plan_balance`` decided.  Shares (percent) are per log dir, a dir showing its file
    system's; ``*_before`` counts the moves in progress as done."""

    threshold_percent: float
    spread_before: float
    spread_after: float
    lower_bound_bytes: int
    moves: tuple[PlannedMove, ...] = ()
    shares_before: Mapping[str, float] = field(default_factory=dict)
    shares_after: Mapping[str, float] = field(default_factory=dict)
    note: str = ""  # why there is nothing to do, or why the plan stops short of the threshold

    @property
    def planned_bytes(self) -> int:
        return sum(m.size_bytes for m in self.moves)

    @property
    def balanced(self) -> bool:
        """The spread is within the threshold already (counting moves in progress as done)."""
        return self.spread_before <= self.threshold_percent + _EPSILON

    @property
    def reaches_threshold(self) -> bool:
        return self.spread_after <= self.threshold_percent + _EPSILON

    def summary(self) -> str:
        if self.balanced:
            text = (f"spread {self.spread_before:.1f} points, within the threshold of "
                    f"{self.threshold_percent:g}: nothing to move")
        else:
            text = (f"spread {self.spread_before:.1f} points, over the threshold of {self.threshold_percent:g}: "
                    f"{len(self.moves)} move(s), {format_bytes(self.planned_bytes)} (at least "
                    f"{format_bytes(self.lower_bound_bytes)} must move), spread after {self.spread_after:.1f} points")
        return f"{text}; {self.note}" if self.note else text


# ---- disks and the lower bound ------------------------------------------------------------


@dataclass
class _Disk:
    total: int
    used: float
    usable: float
    dirs: list[str]

    @property
    def share(self) -> float:
        return 100.0 * self.used / self.total


def _disks(dirs: Iterable[DirLoad], replicas: Iterable[ReplicaLoad]) -> tuple[dict[str, _Disk], dict[str, str]]:
    """The file systems of the live dirs ({id: disk}, {dir: id}), with every move in progress
    counted as finished: the copy complete, the source gone."""
    disks: dict[str, _Disk] = {}
    fs_of: dict[str, str] = {}
    for d in dirs:
        if d.total_bytes <= 0 or d.usable_bytes < 0:
            continue
        fs_of[d.path] = d.file_system
        disk = disks.get(d.file_system)
        if disk is None:
            disks[d.file_system] = _Disk(d.total_bytes, float(d.total_bytes - d.usable_bytes),
                                         float(d.usable_bytes), [d.path])
        else:
            disk.dirs.append(d.path)
    for r in replicas:
        if r.moving_to is None or r.log_dir not in fs_of or r.moving_to not in fs_of:
            continue
        rest = max(0, r.size_bytes - r.copied_bytes)
        source, dest = disks[fs_of[r.log_dir]], disks[fs_of[r.moving_to]]
        dest.used += rest
        dest.usable -= rest
        source.used -= r.size_bytes
        source.usable += r.size_bytes
    return disks, fs_of


def spread_of(shares: Iterable[float]) -> float:
    values = list(shares)
    return max(values) - min(values) if len(values) > 1 else 0.0


def bytes_to_balance(disks: Sequence[tuple[int, float]], threshold_percent: float) -> float:
    """The fewest bytes that must move between disks ``(total bytes, used bytes)`` to bring their
    spread of used share within ``threshold_percent``, were replicas divisible."""
    return _band(disks, threshold_percent)[0]


def _band(disks: Sequence[tuple[int, float]], t: float) -> tuple[float, float]:
    """(``bytes_to_balance``, L): the bytes, and the lowest share L of the band [L, L + t] of
    shares that moving them reaches.

    For a band [L, L + t], the disks above it must shed S(L) bytes and those below must gain
    G(L); the bytes moved are at least max(S, G), and that much suffices.  S falls and G rises
    with L, and they cross between avg - t and avg (avg: the share of all disks together),
    where the answer is their common value.  Both are piecewise linear, so the crossing is
    found exactly between two of their break points.
    """
    disks = [(total, used) for total, used in disks if total > 0]
    shares = [100.0 * used / total for total, used in disks]
    if len(disks) < 2 or max(shares) - min(shares) <= t + _EPSILON:
        return 0.0, min(shares, default=0.0)
    avg = 100.0 * sum(used for _, used in disks) / sum(total for total, _ in disks)

    def shed(level: float) -> float:
        return sum(max(0.0, s - level - t) * total for s, (total, _) in zip(shares, disks, strict=True)) / 100.0

    def gain(level: float) -> float:
        return sum(max(0.0, level - s) * total for s, (total, _) in zip(shares, disks, strict=True)) / 100.0

    low, high = avg - t, avg
    points = sorted({low, high, *(p for s in shares for p in (s - t, s) if low < p < high)})
    previous, previous_gap = points[0], shed(points[0]) - gain(points[0])
    level = high
    for point in points[1:]:
        gap = shed(point) - gain(point)
        if gap <= 0:
            # Linear between the two points: where shed and gain meet.
            level = previous if previous_gap == gap else previous + (point - previous) * previous_gap / (previous_gap - gap)
            break
        previous, previous_gap = point, gap
    return max(shed(level), gain(level)), level


# ---- the plan ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Candidate:
    efficiency: float  # bytes of lower bound removed per byte charged
    gain: float  # bytes of lower bound removed
    replica: ReplicaLoad
    source_fs: str
    dest_fs: str

    def rank(self) -> tuple[float, float, float]:
        """Greater is better: efficiency, then gain, then the slower growth.  Among equals the
        first found wins (candidates are weighed in a fixed order: one input, one plan)."""
        return round(self.efficiency, 9), round(self.gain), -self.replica.growth_bytes_per_s


def projected_spread(dirs: Sequence[DirLoad], replicas: Sequence[ReplicaLoad]) -> float:
    """The spread of the disks once the moves in progress are done."""
    disks, _ = _disks(dirs, replicas)
    return spread_of(disk.share for disk in disks.values())


def plan_balance(dirs: Sequence[DirLoad], replicas: Sequence[ReplicaLoad], threshold_percent: float,
                 min_free_bytes: int = 0, growth_horizon_s: float = GROWTH_HORIZON_S,
                 pinned: Collection[TopicPartition] = ()) -> BalancePlan:
    """The moves (in order) that bring the spread of the disks under ``threshold_percent``
    with the fewest bytes this greedy choice finds, moving none of ``pinned``; see the module
    docstring."""
    disks, fs_of = _disks(dirs, replicas)
    shares_before = {d: disks[fs].share for d, fs in fs_of.items()}
    before = spread_of(disk.share for disk in disks.values())
    if len(disks) < 2:
        why = "all log dirs are on one file system" if len(fs_of) > 1 else "fewer than two live log dirs"
        return BalancePlan(threshold_percent, 0.0, 0.0, 0, shares_before=shares_before, shares_after=shares_before,
                           note=f"{why}: moves between them would free nothing")
    lower_bound = round(bytes_to_balance([(d.total, d.used) for d in disks.values()], threshold_percent))
    plan = BalancePlan(threshold_percent, before, before, lower_bound, shares_before=shares_before,
                       shares_after=shares_before)
    if plan.balanced:
        return plan
    chosen, note = _greedy(disks, fs_of, replicas, pinned, threshold_percent, min_free_bytes, growth_horizon_s)
    chosen = _without_needless(disks, fs_of, chosen, threshold_percent, min_free_bytes)
    moves, after, _ = _replay(disks, fs_of, chosen)
    return BalancePlan(threshold_percent, before, spread_of(disk.share for disk in after.values()), lower_bound,
                       moves, shares_before, {d: after[fs].share for d, fs in fs_of.items()}, note)


_Choice = tuple[ReplicaLoad, str]  # a replica and the dir it goes to


def _greedy(disks: dict[str, _Disk], fs_of: dict[str, str], replicas: Sequence[ReplicaLoad],
            pinned: Collection[TopicPartition], threshold: float, min_free_bytes: int,
            horizon: float) -> tuple[list[_Choice], str]:
    """Moves chosen one at a time by ``_best_move`` until the spread is within the threshold;
    and why it stopped short, if it did."""
    disks = {i: replace(d) for i, d in disks.items()}
    placed: dict[str, float] = dict.fromkeys(fs_of, 0.0)
    for r in replicas:
        if r.log_dir in placed:
            placed[r.log_dir] += r.size_bytes
        if r.moving_to in placed:
            placed[r.moving_to] += r.size_bytes
    movable: dict[str, list[ReplicaLoad]] = {}
    for r in replicas:
        if r.moving_to is None and r.log_dir in fs_of and r.size_bytes > 0 and r.key not in pinned:
            movable.setdefault(fs_of[r.log_dir], []).append(r)
    pools = {fs: _Pool(found) for fs, found in movable.items()}
    chosen: list[_Choice] = []
    while spread_of(disk.share for disk in disks.values()) > threshold + _EPSILON:
        if len(chosen) >= _MAX_MOVES:
            return chosen, f"stopped after {_MAX_MOVES} moves"
        best = _best_move(disks, pools, threshold, min_free_bytes, horizon)
        if best is None:
            note = ("no move of a whole replica brings it closer to the threshold" if not chosen
                    else "no further move of a whole replica brings it closer")
            if min_free_bytes > 0:
                note += f" (log.dir.min.free.bytes={min_free_bytes} must stay free)"
            return chosen, note
        r = best.replica
        dest = disks[best.dest_fs]
        dest_dir = min(dest.dirs, key=lambda d: (placed[d], dest.dirs.index(d)))
        _shift(disks[best.source_fs], dest, r.size_bytes)
        placed[r.log_dir] -= r.size_bytes
        placed[dest_dir] += r.size_bytes
        pools[best.source_fs].remove(r)
        chosen.append((r, dest_dir))
    return chosen, ""


def _shift(source: _Disk, dest: _Disk, size: int) -> None:
    source.used -= size
    source.usable += size
    dest.used += size
    dest.usable -= size


def _replay(disks: dict[str, _Disk], fs_of: dict[str, str], chosen: Sequence[_Choice],
            min_free_bytes: int = 0) -> tuple[tuple[PlannedMove, ...], dict[str, _Disk], bool]:
    """The moves applied in order to a copy of ``disks``: their records, the disks after, and
    whether every move found its destination with room to spare (``min_free_bytes``)."""
    disks = {i: replace(d) for i, d in disks.items()}
    moves = []
    roomy = True
    spread = spread_of(disk.share for disk in disks.values())
    for r, dest_dir in chosen:
        source, dest = disks[fs_of[r.log_dir]], disks[fs_of[dest_dir]]
        shares = source.share, dest.share
        _shift(source, dest, r.size_bytes)
        roomy = roomy and dest.usable >= max(min_free_bytes, 0)
        after = spread_of(disk.share for disk in disks.values())
        moves.append(PlannedMove(r.topic, r.partition, r.log_dir, dest_dir, r.size_bytes, r.growth_bytes_per_s,
                                 (shares[0], source.share), (shares[1], dest.share), (spread, after)))
        spread = after
    return tuple(moves), disks, roomy


def _without_needless(disks: dict[str, _Disk], fs_of: dict[str, str], chosen: list[_Choice], threshold: float,
                      min_free_bytes: int) -> list[_Choice]:
    """Drop, largest first, each move the plan reaches the threshold without: a greedy choice
    early on can make a later one unnecessary."""

    def enough(choices: list[_Choice]) -> bool:
        moves, after, roomy = _replay(disks, fs_of, choices, min_free_bytes)
        return roomy and spread_of(disk.share for disk in after.values()) <= threshold + _EPSILON

    if len(chosen) > _MAX_PRUNED or not enough(chosen):
        return chosen
    for choice in sorted(chosen, key=lambda c: -c[0].size_bytes):
        fewer = [c for c in chosen if c is not choice]
        if enough(fewer):
            chosen = fewer
    return chosen


class _Pool:
    """The replicas of one disk that may still move, by size; the sealed (not growing) ones
    also on their own, since a move of one of them costs exactly its size."""

    def __init__(self, replicas: Iterable[ReplicaLoad]) -> None:
        self.all = sorted(replicas, key=lambda r: (r.size_bytes, r.name))
        self.sizes = [r.size_bytes for r in self.all]
        self.sealed = [r for r in self.all if r.growth_bytes_per_s <= 0]
        self.sealed_sizes = [r.size_bytes for r in self.sealed]

    def remove(self, replica: ReplicaLoad) -> None:
        i = self.all.index(replica)
        del self.all[i], self.sizes[i]
        if replica in self.sealed:
            i = self.sealed.index(replica)
            del self.sealed[i], self.sealed_sizes[i]

    def largest_sealed(self, limit: float) -> ReplicaLoad | None:
        i = bisect.bisect_right(self.sealed_sizes, limit)
        return self.sealed[i - 1] if i else None

    def growing(self, limit: float) -> list[ReplicaLoad]:
        return [r for r in self.all[:bisect.bisect_right(self.sizes, limit)] if r.growth_bytes_per_s > 0]

    def smallest_above(self, limit: float, ceiling: float, count: int) -> list[ReplicaLoad]:
        start = bisect.bisect_right(self.sizes, limit)
        return [r for r in self.all[start:start + count] if r.size_bytes <= ceiling]


def _best_move(disks: dict[str, _Disk], pools: dict[str, _Pool], threshold: float, min_free_bytes: int,
               horizon: float) -> _Candidate | None:
    """The next move: first the largest sealed replica whose every byte reduces the lower bound
    (it leaves a disk above the band for one below, by no more than either is from the band);
    when there is none, the best of the growing replicas and of the few next larger ones,
    weighed by how much they reduce the lower bound per byte charged."""
    ids = list(disks)
    base, level = _band([(disks[i].total, disks[i].used) for i in ids], threshold)
    excess = {i: max(0.0, disks[i].share - level - threshold) * disks[i].total / 100 for i in ids}
    deficit = {i: max(0.0, level - disks[i].share) * disks[i].total / 100 for i in ids}
    room = {i: disks[i].usable - max(min_free_bytes, 0) for i in ids}
    pairs = [(a, b) for a in ids if a in pools for b in ids if disks[b].share < disks[a].share]

    best: _Candidate | None = None
    for a, b in pairs:
        if excess[a] > 0 and deficit[b] > 0:
            r = pools[a].largest_sealed(min(excess[a], deficit[b], room[b]))
            if r is not None:
                candidate = _Candidate(1.0, float(r.size_bytes), r, a, b)
                if best is None or candidate.rank() > best.rank():
                    best = candidate
    if best is not None:
        return best

    def gain_of(source: str, dest: str, size: int) -> float:
        after = [(disks[i].total, disks[i].used - size if i == source else disks[i].used + size if i == dest
                  else disks[i].used) for i in ids]
        return base - _band(after, threshold)[0]

    for a, b in pairs:
        useful = min(excess[a], deficit[b], room[b])
        weighed = [(r, float(r.size_bytes)) for r in pools[a].growing(useful)]
        weighed += [(r, gain_of(a, b, r.size_bytes))
                    for r in pools[a].smallest_above(max(useful, 0.0), room[b], _LARGER_CANDIDATES)]
        for r, gain in weighed:
            if gain < 1:
                continue
            charged = r.size_bytes + max(0.0, r.growth_bytes_per_s) * horizon
            candidate = _Candidate(gain / charged, gain, r, a, b)
            if best is None or candidate.rank() > best.rank():
                best = candidate
    return best
