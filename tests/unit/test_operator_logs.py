"""Logs an operator can read: a refusal clients repeat is logged once a minute with a count, and a
LeaderAndIsr that hands this broker many partitions (a cluster starting) is one summary line per
kind instead of one line per partition."""

from __future__ import annotations

import logging
import uuid

import pytest

from minikafka.replica.leadership import PartitionCommand, RoleChanges
from minikafka.server.repeated_log import RepeatedLog

LOGGER = "tests.operator_logs"


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_a_repeated_refusal_is_logged_once_per_interval_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    repeated = RepeatedLog(logging.getLogger(LOGGER), interval_s=60, clock=clock)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for i in range(1276):  # what one misconfigured topic cost in two minutes
            clock.now = 1000 + i * 0.09
            repeated.log(logging.INFO, ("bulk", "NOT_ENOUGH_REPLICAS"), "produce to %s-%d refused: %s", "bulk",
                         i % 3, "NOT_ENOUGH_REPLICAS")
        repeated.log(logging.INFO, ("other", "NOT_ENOUGH_REPLICAS"), "produce to %s-%d refused: %s", "other", 0,
                     "NOT_ENOUGH_REPLICAS")
    lines = _messages(caplog)
    assert lines[0] == "produce to bulk-0 refused: NOT_ENOUGH_REPLICAS"
    assert len(lines) == 3, lines  # at 0 s, at 60 s (with the count of the first minute), and the other topic
    assert lines[1].startswith("produce to bulk-")
    assert lines[1].endswith(f"(and {667 - 1} more like it in the 60 s before)"), lines[1]
    assert lines[2] == "produce to other-0 refused: NOT_ENOUGH_REPLICAS"


def _command(topic: str, index: int, leader: int) -> PartitionCommand:
    return PartitionCommand(topic, uuid.uuid4(), index, leader, 1, (1, 2), (1, 2), 0, True)


def test_many_role_changes_are_summarised_per_topic(caplog: pytest.LogCaptureFixture) -> None:
    roles = RoleChanges(leads=[_command("__consumer_offsets", i, 1) for i in range(50)]
                        + [_command("bulk", i, 1) for i in range(3)],
                        follows=[_command("bulk", 3, 2), _command("bulk", 4, 3)])
    with caplog.at_level(logging.INFO, logger="minikafka.replica.leadership"):
        roles.log()
    assert [r.getMessage() for r in caplog.records] == [
        "leading 53 partition(s): __consumer_offsets (50), bulk (3)",
        "following 2 partition(s) this broker led (now led by broker(s) 2, 3): bulk (2)"]


def test_a_few_role_changes_keep_a_line_each(caplog: pytest.LogCaptureFixture) -> None:
    roles = RoleChanges(leads=[_command("orders", 0, 1)], follows=[_command("orders", 1, 2)])
    with caplog.at_level(logging.INFO, logger="minikafka.replica.leadership"):
        roles.log()
    assert [r.getMessage() for r in caplog.records] == ["leading orders-0 in epoch 1 with in-sync replicas [1, 2]",
                                                        "orders-1: following broker 2 from epoch 1"]
