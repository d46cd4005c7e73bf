"""How the controller picks a partition's leader and ISR: pure functions of what it knows.

Each election answers the new (leader, ISR), or None when no replica may lead. They follow
Apache Kafka's leader selectors: the first replica in assignment order that is eligible wins,
so leadership is predictable and the preferred (first) replica leads whenever it can.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

NO_LEADER = -1


@dataclass(frozen=True)
class Election:
    leader: int
    isr: tuple[int, ...]


def offline_partition(replicas: Sequence[int], isr: Sequence[int], live: Collection[int]) -> Election | None:
    """The leader is gone (or there is none yet): the first live ISR member leads. None when no
    ISR member is live; then only an unclean election (``unclean_leader``) can give it a leader."""
    live_isr = tuple(b for b in isr if b in live)
    for broker in replicas:
        if broker in live_isr:
            return Election(broker, live_isr)
    return None


@dataclass(frozen=True)
class ReplicaLogEnd:
    """Where one replica's log ends, as the replica reports it: the leader epoch of the last
    entry of its leader-epoch cache (-1: none, an empty log) and its log end offset."""

    latest_epoch: int
    log_end_offset: int

    @property
    def empty(self) -> bool:
        return self.latest_epoch < 0 and self.log_end_offset <= 0


@dataclass(frozen=True)
class UncleanElection:
    """An unclean election's choice: ``leader`` (alone in the ISR), where its log ends, and how
    many offsets other live replicas hold past that end (they truncate them when they follow it)."""

    leader: int
    isr: tuple[int, ...]
    log_end: ReplicaLogEnd
    offsets_behind: int


def unclean_leader(replicas: Sequence[int], live: Collection[int],
                   log_ends: Mapping[int, ReplicaLogEnd]) -> UncleanElection | None:
    """No in-sync replica is live, and an out-of-sync one may lead: the live replica whose log
    goes furthest, that is the highest latest leader epoch, then the highest log end offset (the
    order of KIP-966's unclean recovery; a newer epoch's history supersedes an older one's, however
    long), the first in assignment order on a tie. An empty replica (a disk replaced) thus never
    leads while another live one holds data. Apache Kafka takes the first live replica instead.

    ``log_ends`` holds the reports of the replicas that answered. None when no replica is live,
    or when a live one did not report: it might hold more than all the others, and choosing
    without it could throw away what only it has."""
    candidates = [b for b in replicas if b in live]
    if not candidates or any(b not in log_ends for b in candidates):
        return None
    order = {b: i for i, b in enumerate(candidates)}
    leader = max(candidates, key=lambda b: (log_ends[b].latest_epoch, log_ends[b].log_end_offset, -order[b]))
    chosen = log_ends[leader]
    furthest = max(log_ends[b].log_end_offset for b in candidates)
    return UncleanElection(leader, (leader,), chosen, max(0, furthest - chosen.log_end_offset))


def new_partition(replicas: Sequence[int], live: Collection[int]) -> Election | None:
    """A partition just created: every live replica is in sync (all are empty)."""
    live_replicas = tuple(b for b in replicas if b in live)
    return Election(live_replicas[0], live_replicas) if live_replicas else None


def controlled_shutdown(replicas: Sequence[int], isr: Sequence[int], live: Collection[int],
                        leaving: Collection[int]) -> Election | None:
    """The leader is shutting down cleanly: another live ISR member takes over, and the
    leaving brokers leave the ISR."""
    staying = tuple(b for b in isr if b in live and b not in leaving)
    for broker in replicas:
        if broker in staying:
            return Election(broker, staying)
    return None


def preferred_replica(replicas: Sequence[int], isr: Sequence[int], live: Collection[int]) -> Election | None:
    """Give leadership back to the first replica, if it is live and in sync."""
    if replicas and replicas[0] in live and replicas[0] in isr:
        return Election(replicas[0], tuple(isr))
    return None


def without_replica(isr: Sequence[int], broker: int) -> tuple[int, ...]:
    """The ISR once ``broker`` leaves it; the last member stays (Kafka keeps it, so the
    partition knows which replica has every acknowledged record)."""
    remaining = tuple(b for b in isr if b != broker)
    return remaining or tuple(isr)
