"""How the controller picks a partition's leader and ISR: pure functions of what it knows.

Each election answers the new (leader, ISR), or None when no replica may lead. They follow
Apache Kafka's leader selectors: the first replica in assignment order that is eligible wins,
so leadership is predictable and the preferred (first) replica leads whenever it can.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

NO_LEADER = -1


@dataclass(frozen=True)
class Election:
    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


def offline_partition(replicas: Sequence[int], isr: Sequence[int], live: Collection[int],
                      unclean_allowed: bool) -> Election | None:
    """The leader is gone (or there is none yet): the first live ISR member leads; with no
    live ISR member, a live out-of-sync replica only when unclean election is allowed (it
    may lack acknowledged records)."""
    live_isr = tuple(b for b in isr if b in live)
    for broker in replicas:
        if broker in live_isr:
            return Election(broker, live_isr)
    if unclean_allowed:
        for broker in replicas:
            if broker in live:
                return Election(broker, (broker,), unclean=True)
    return None


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
