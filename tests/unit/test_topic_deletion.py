"""The controller's table of topic deletions (Kafka's TopicDeletionManager): a topic's znodes may
go only once every replica answered that it is deleted, and a broker that is down holds it."""

from __future__ import annotations

from minikafka.controller.topic_deletion import TopicDeletions

T0, T1 = ("t", 0), ("t", 1)
REPLICAS = [(1, T0), (2, T0), (3, T0), (1, T1), (2, T1), (3, T1)]


def _started(live: set[int]) -> tuple[TopicDeletions, dict[int, list[tuple[str, int]]]]:
    deletions = TopicDeletions()
    deletions.begin("t", REPLICAS)
    return deletions, deletions.to_send("t", live)


def test_the_topic_is_complete_only_once_every_replica_answered_success() -> None:
    deletions, sends = _started({1, 2, 3})
    assert sends == {1: [T0, T1], 2: [T0, T1], 3: [T0, T1]}
    assert deletions.to_send("t", {1, 2, 3}) == {}  # asked once, not again while unanswered
    for broker, tp in REPLICAS[:-1]:
        deletions.answered("t", broker, tp, None)
        assert not deletions.complete("t")
    deletions.answered("t", 3, T1, None)
    assert deletions.complete("t")


def test_a_broker_that_is_down_holds_the_deletion_until_it_returns() -> None:
    deletions, sends = _started({1, 2})
    assert set(sends) == {1, 2}
    for broker, tp in REPLICAS:
        if broker != 3:
            deletions.answered("t", broker, tp, None)
    assert not deletions.complete("t")
    assert deletions.report("t", {1, 2}) == ["deletion of topic t waits for broker 3, which is down"]
    assert deletions.report("t", {1, 2}) == []  # said once, until it changes
    deletions.broker_back(3)
    assert deletions.to_send("t", {1, 2, 3}) == {3: [T0, T1]}
    deletions.answered("t", 3, T0, None)
    deletions.answered("t", 3, T1, None)
    assert deletions.complete("t")


def test_a_broker_that_dies_before_answering_is_asked_again_when_it_returns() -> None:
    deletions, _ = _started({1, 2, 3})
    deletions.broker_gone(2)
    deletions.answered("t", 2, T0, None)  # an answer of the dead connection, after the fact: ignored
    assert deletions.waiting_for("t", {1, 3}) == {2: "which is down"}
    assert deletions.to_send("t", {1, 3}) == {}
    assert deletions.to_send("t", {1, 2, 3}) == {2: [T0, T1]}


def test_a_replica_its_broker_could_not_delete_is_asked_again_when_the_broker_registers_again() -> None:
    deletions, _ = _started({1, 2, 3})
    for broker, tp in REPLICAS:
        deletions.answered("t", broker, tp, "KAFKA_STORAGE_ERROR" if (broker, tp) == (2, T1) else None)
    assert not deletions.complete("t")
    assert deletions.to_send("t", {1, 2, 3}) == {}  # not retried while that registration lasts
    (line,) = deletions.report("t", {1, 2, 3})
    assert line.startswith("deletion of topic t waits for broker 2, which could not delete its replica of t-1 "
                           "(KAFKA_STORAGE_ERROR)")
    deletions.broker_back(2)
    assert deletions.to_send("t", {1, 2, 3}) == {2: [T1]}
    deletions.answered("t", 2, T1, None)
    assert deletions.complete("t")


def test_a_topic_already_tracked_keeps_where_it_stands() -> None:
    deletions, _ = _started({1, 2, 3})
    for broker, tp in REPLICAS:
        deletions.answered("t", broker, tp, None)
    deletions.begin("t", REPLICAS)  # a later request for the same topic
    assert deletions.complete("t")
    deletions.forget("t")
    assert "t" not in deletions and not deletions.complete("t")
