"""Where each topic being deleted stands, replica by replica (Kafka's TopicDeletionManager).

A topic marked for deletion keeps its znodes until every one of its replicas has answered a
StopReplica with deletion: a ZooKeeper-mode Kafka broker does not delete the logs of a topic it
is not told about, so a broker that is down meanwhile would keep them for ever. A replica on a
broker that is down, or whose broker could not delete it, makes the deletion wait (Kafka's
"ineligible"); it is asked again when its broker registers. ``TopicDeletions`` only keeps the
table; the controller sends the requests and writes ZooKeeper. Controller event task only.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]
Replica = tuple[int, TopicPartition]  # (broker, partition)


class ReplicaDeletion(enum.Enum):
    WAITING = "waiting"  # to be asked once its broker is live (Kafka's ineligible, while it is down)
    STARTED = "started"  # StopReplica with deletion sent, no answer yet
    FAILED = "failed"  # its broker could not delete it: asked again when that broker registers again
    DONE = "done"  # its broker answered that it deleted it


@dataclass
class _Topic:
    replicas: dict[Replica, ReplicaDeletion]
    # The error of each FAILED replica, for the log.
    failures: dict[Replica, str] = field(default_factory=dict)
    reported: str = ""  # the last "waits for" said in the log, so it is said once per change


class TopicDeletions:
    def __init__(self) -> None:
        self._topics: dict[str, _Topic] = {}

    def begin(self, topic: str, replicas: Iterable[Replica]) -> None:
        """Track the topic's replicas (once: a topic already tracked keeps where it stands)."""
        if topic not in self._topics:
            self._topics[topic] = _Topic(dict.fromkeys(replicas, ReplicaDeletion.WAITING))

    def __contains__(self, topic: object) -> bool:
        return topic in self._topics

    def to_send(self, topic: str, live: Collection[int]) -> dict[int, list[TopicPartition]]:
        """The replicas to send StopReplica with deletion to now, by broker: those waiting on a
        live broker. They count as started from here."""
        sends: dict[int, list[TopicPartition]] = {}
        tracked = self._topics[topic]
        for (broker, tp), state in sorted(tracked.replicas.items()):
            if state is ReplicaDeletion.WAITING and broker in live:
                tracked.replicas[(broker, tp)] = ReplicaDeletion.STARTED
                sends.setdefault(broker, []).append(tp)
        return sends

    def answered(self, topic: str, broker: int, tp: TopicPartition, error: str | None) -> None:
        """``broker`` answered the StopReplica of its replica of ``tp``: deleted (``error`` None),
        or not, with that error; that replica then waits until its broker registers again."""
        tracked = self._topics.get(topic)
        if tracked is None or tracked.replicas.get((broker, tp)) is not ReplicaDeletion.STARTED:
            return
        if error is None:
            tracked.replicas[(broker, tp)] = ReplicaDeletion.DONE
        else:
            tracked.replicas[(broker, tp)] = ReplicaDeletion.FAILED
            tracked.failures[(broker, tp)] = error

    def progress(self, topic: str) -> dict[Replica, ReplicaDeletion]:
        """Where each replica of the topic stands (none if the topic is not being deleted)."""
        tracked = self._topics.get(topic)
        return dict(tracked.replicas) if tracked is not None else {}

    def broker_gone(self, broker: int) -> None:
        """Its requests died with its connection: what it had not answered waits for its return."""
        for tracked in self._topics.values():
            for (holder, tp), state in tracked.replicas.items():
                if holder == broker and state is ReplicaDeletion.STARTED:
                    tracked.replicas[(holder, tp)] = ReplicaDeletion.WAITING

    def broker_back(self, broker: int) -> None:
        """A broker registered (again): the deletions it failed are tried again."""
        for tracked in self._topics.values():
            for (holder, tp), state in tracked.replicas.items():
                if holder == broker and state is ReplicaDeletion.FAILED:
                    tracked.replicas[(holder, tp)] = ReplicaDeletion.WAITING
                    tracked.failures.pop((holder, tp), None)

    def complete(self, topic: str) -> bool:
        """Every replica of the topic is deleted: its znodes may go."""
        tracked = self._topics.get(topic)
        return tracked is not None and all(s is ReplicaDeletion.DONE for s in tracked.replicas.values())

    def waiting_for(self, topic: str, live: Collection[int]) -> dict[int, str]:
        """The brokers the topic's deletion waits for, each with why (in an operator's words)."""
        tracked = self._topics.get(topic)
        if tracked is None:
            return {}
        why: dict[int, str] = {}
        for (broker, tp), state in sorted(tracked.replicas.items()):
            if state is ReplicaDeletion.DONE or broker in why:
                continue
            if broker not in live:
                why[broker] = "which is down"
            elif state is ReplicaDeletion.FAILED:
                why[broker] = (f"which could not delete its replica of {tp[0]}-{tp[1]} ({tracked.failures[(broker, tp)]});"
                               " it is asked again when it registers again")
        return why

    def report(self, topic: str, live: Collection[int]) -> list[str]:
        """What the log should say about the topic's wait, when it changed since last said."""
        waits = self.waiting_for(topic, live)
        lines = [f"deletion of topic {topic} waits for broker {b}, {why}" for b, why in sorted(waits.items())]
        text = "\n".join(lines)
        tracked = self._topics[topic]
        if text == tracked.reported:
            return []
        tracked.reported = text
        return lines

    def forget(self, topic: str) -> None:
        self._topics.pop(topic, None)
