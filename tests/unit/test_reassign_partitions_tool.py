"""``minikafka reassign-partitions`` without a broker: Kafka's reassignment files checked field by
field, the plans --generate makes, and the progress arithmetic of --progress from sampled bytes."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from minikafka.tools.client import ToolError
from minikafka.tools.log_dirs import Assignment, parse_assignment
from minikafka.tools.progress import (
    ADDING,
    COPYING,
    DIR_MOVE,
    DONE,
    FAILED,
    METADATA_SETTLE_SECONDS,
    PLACED,
    RATE_WINDOW_SECONDS,
    WAITING,
    Followed,
    Ongoing,
    ReplicaSizes,
    Snapshot,
    progress,
    progress_line,
)
from minikafka.tools.reassignment import (
    PartitionPlacement,
    check_placements,
    generate,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    reassignment_json,
    throttled_replicas,
)

# ---- the reassignment file ----------------------------------------------------------------


def _file(*entries: object, **envelope: object) -> str:
    document: dict[str, object] = {"version": 1, "partitions": list(entries)}
    document.update(envelope)
    return json.dumps({k: v for k, v in document.items() if v is not None})


def _entry(**fields: object) -> dict[str, object]:
    entry: dict[str, object] = {"topic": "t", "partition": 0, "replicas": [1, 2, 3]}
    entry.update(fields)
    return {k: v for k, v in entry.items() if v is not None}


def test_kafkas_file_is_read_with_its_log_dirs() -> None:
    text = _file(_entry(log_dirs=["any", "/data/d2/", "any"]), _entry(partition=1, replicas=[3]))
    first, second = parse_reassignment(text)
    assert first == PartitionPlacement("t", 0, (1, 2, 3), ("any", "/data/d2", "any"))
    assert first.dir_moves() == [(2, "/data/d2")]
    assert second == PartitionPlacement("t", 1, (3,), ("any",))
    # What the tool prints reads back the same.
    assert parse_reassignment(reassignment_json([first, second])) == [first, second]


BAD_REASSIGNMENT_FILES = [
    ("{", "not JSON"),
    ("[]", "the top level must be an object"),
    (json.dumps({"partitions": [_entry()]}), "version: missing"),
    (_file(_entry(), version=2), "version: must be 1, not 2"),
    (_file(_entry(), extra=1), "extra: unknown field"),
    (_file(), "partitions: must be a non-empty list"),
    (_file("t-0"), "partitions[0]: must be an object"),
    (_file(_entry(topic=None)), "partitions[0].topic: missing"),
    (_file(_entry(), _entry(partition=None)), "partitions[1].partition: missing"),
    (_file(_entry(replicas=None)), "partitions[0].replicas: missing"),
    (_file(_entry(replica=[1])), "partitions[0].replica: unknown field"),
    (_file(_entry(topic=7)), "partitions[0].topic: must be a non-empty string, not 7"),
    (_file(_entry(partition="0")), "partitions[0].partition: must be an integer >= 0, not '0'"),
    (_file(_entry(partition=True)), "partitions[0].partition: must be an integer >= 0, not True"),
    (_file(_entry(replicas=[])), "partitions[0].replicas: must be a non-empty list of broker ids"),
    (_file(_entry(replicas="1,2")), "partitions[0].replicas: must be a non-empty list of broker ids"),
    (_file(_entry(replicas=[1, -2])), "partitions[0].replicas: must be a non-empty list of broker ids"),
    (_file(_entry(replicas=[1, 2, 1])), "partitions[0].replicas: broker 1 is listed twice"),
    (_file(_entry(log_dirs="any")), "partitions[0].log_dirs: must be a list"),
    (_file(_entry(log_dirs=["any", "any"])), "partitions[0].log_dirs: has 2 entries for 3 replicas"),
    (_file(_entry(log_dirs=["any", "data/d2", "any"])),
     "partitions[0].log_dirs[1]: must be \"any\" or an absolute path, not 'data/d2'"),
    (_file(_entry(log_dirs=["any", None, "any"])), "partitions[0].log_dirs[1]: must be \"any\" or an absolute"),
    (_file(_entry(), _entry(partition=1), _entry(replicas=[2])), "partitions[2]: t-0 is already in partitions[0]"),
]


@pytest.mark.parametrize(("text", "message"), BAD_REASSIGNMENT_FILES,
                         ids=[m.split(":")[0] + f"-{i}" for i, (_, m) in enumerate(BAD_REASSIGNMENT_FILES)])
def test_a_wrong_reassignment_file_names_the_field(text: str, message: str) -> None:
    with pytest.raises(ToolError) as raised:
        parse_reassignment(text)
    assert str(raised.value).startswith(message), str(raised.value)


CLUSTER_PARTITIONS = {("t", 0): [1, 2], ("t", 1): [2, 3]}
CLUSTER_DIRS = {1: {"/a/d1": True, "/a/d2": True}, 2: {"/b/d1": True, "/b/d2": False}}


@pytest.mark.parametrize(("entry", "message"), [
    (_entry(topic="nope"), "partitions[1].topic: topic 'nope' does not exist"),
    (_entry(partition=7), "partitions[1].partition: t has no partition 7"),
    (_entry(replicas=[1, 9]), "partitions[1].replicas: broker 9 is not in the cluster (brokers: [1, 2, 3])"),
    (_entry(replicas=[1, 2], log_dirs=["any", "/a/d1"]),
     "partitions[1].log_dirs[1]: /a/d1 is not a log dir of broker 2 (its log dirs: /b/d1, /b/d2)"),
    (_entry(replicas=[1, 2], log_dirs=["any", "/b/d2"]), "partitions[1].log_dirs[1]: /b/d2 is offline on broker 2"),
])
def test_what_the_cluster_cannot_do_is_named(entry: dict[str, object], message: str) -> None:
    placements = parse_reassignment(_file(_entry(partition=1, replicas=[3, 1], log_dirs=["any", "/a/d2"]), entry))
    with pytest.raises(ToolError) as raised:
        check_placements(placements, CLUSTER_PARTITIONS, [1, 2, 3], CLUSTER_DIRS)
    assert str(raised.value) == message


def test_a_good_file_passes_the_cluster_checks() -> None:
    placements = parse_reassignment(_file(_entry(replicas=[3, 1], log_dirs=["any", "/a/d2"]),
                                          _entry(partition=1, replicas=[2, 1], log_dirs=["/b/d1", "any"])))
    check_placements(placements, CLUSTER_PARTITIONS, [1, 2, 3], CLUSTER_DIRS)


def test_topics_to_move_and_broker_lists() -> None:
    assert parse_topics_to_move(json.dumps({"version": 1, "topics": [{"topic": "a"}, {"topic": "b"}]})) == ["a", "b"]
    for text, message in [
        (json.dumps({"version": 1, "topics": []}), "topics: must be a non-empty list"),
        (json.dumps({"version": 1, "topics": [{"name": "a"}]}), "topics[0].name: unknown field"),
        (json.dumps({"version": 1, "topics": [{}]}), "topics[0].topic: missing"),
        (json.dumps({"version": 1, "topics": [{"topic": ""}]}), "topics[0].topic: must be a non-empty string"),
        (json.dumps({"version": 1, "topics": [{"topic": "a"}, {"topic": "a"}]}),
         "topics[1].topic: a is already in topics[0]"),
        (json.dumps({"version": 1, "partitions": []}), "partitions: unknown field"),
    ]:
        with pytest.raises(ToolError, match=r"^" + message.replace("[", r"\[").replace("]", r"\]")):
            parse_topics_to_move(text)
    assert parse_broker_list("3, 1,2") == [3, 1, 2]
    for text in ("", "1,x", "1,-2"):
        with pytest.raises(ToolError, match="--broker-list: .* is not a comma-separated list of broker ids"):
            parse_broker_list(text)
    with pytest.raises(ToolError, match="--broker-list: broker 2 is listed twice"):
        parse_broker_list("2,1,2")


def test_log_dirs_move_takes_kafkas_reassignment_entries_too() -> None:
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2, 3], "log_dirs": ["/d1", "any", "/d3"]},
        {"topic": "t", "partition": 1, "log_dir": "/d2"},
    ]})
    assert parse_assignment(text) == [Assignment("t", 0, "/d1", 1), Assignment("t", 0, "/d3", 3),
                                      Assignment("t", 1, "/d2", None)]
    for entry, message in [
        ({"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["any"]},
         "partitions[0].log_dirs: every dir is 'any'"),
        ({"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/d1", "/d2"]},
         "partitions[0].log_dirs: has 2 entries for 1 replicas"),
        ({"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/d1"], "log_dir": "/d1"},
         "partitions[0].log_dir: unknown field"),
    ]:
        with pytest.raises(ToolError) as raised:
            parse_assignment(json.dumps({"version": 1, "partitions": [entry]}))
        assert str(raised.value).startswith(message), str(raised.value)
    twice = json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "log_dir": "/d2", "broker": 3},
        {"topic": "t", "partition": 0, "replicas": [1, 3], "log_dirs": ["any", "/d3"]}]})
    with pytest.raises(ToolError, match=r"^partitions\[1\]: t-0 is already in partitions\[0\]"):
        parse_assignment(twice)


def test_throttled_replicas_are_kafkas_partition_broker_pairs() -> None:
    assert throttled_replicas([(1, 3), (0, 2), (0, 1), (0, 2)]) == "0:1,0:2,1:3"


# ---- --generate ---------------------------------------------------------------------------


def _spread(plan: list[PartitionPlacement], brokers: list[int]) -> tuple[dict[int, int], dict[int, int]]:
    replicas = dict.fromkeys(brokers, 0)
    leaders = dict.fromkeys(brokers, 0)
    for placement in plan:
        assert len(set(placement.replicas)) == len(placement.replicas)
        assert set(placement.replicas) <= set(brokers)
        for broker in placement.replicas:
            replicas[broker] += 1
        leaders[placement.replicas[0]] += 1
    return replicas, leaders


@pytest.mark.parametrize(("partitions", "replication", "brokers"), [
    (6, 3, [1, 2, 3]), (12, 2, [1, 2, 3, 4]), (7, 3, [1, 2, 3, 4, 5]), (5, 1, [2, 4, 6]), (20, 3, [1, 2, 3, 4, 5, 6]),
    (3, 2, [1, 2, 3, 4, 5, 6, 7]),
])
def test_generate_balances_replicas_and_leaders(partitions: int, replication: int, brokers: list[int]) -> None:
    current = {("t", p): tuple(range(1, replication + 1)) for p in range(partitions)}
    sizes = {("t", p): (p * 7919) % 1000 * 1000 for p in range(partitions)}
    plan = generate(current, sizes, brokers)
    assert [(p.topic, p.partition) for p in plan] == sorted(current)
    assert all(len(p.replicas) == replication and p.log_dirs == ("any",) * replication for p in plan)
    replicas, leaders = _spread(plan, brokers)
    assert max(replicas.values()) - min(replicas.values()) <= 1, replicas
    assert max(leaders.values()) - min(leaders.values()) <= 1, leaders
    assert generate(current, sizes, list(reversed(brokers))) == plan  # deterministic


def test_generate_spreads_bytes_and_keeps_replication_factors() -> None:
    # Two partitions per broker either way; the bytes even out only with the largest and the
    # smallest together.
    sizes = {("t", 0): 100, ("t", 1): 1000, ("t", 2): 200, ("t", 3): 900}
    plan = {(p.topic, p.partition): p.replicas for p in generate(dict.fromkeys(sizes, (1,)), sizes, [1, 2])}
    assert plan[("t", 1)] == plan[("t", 0)] != plan[("t", 3)] == plan[("t", 2)]
    held = {b: sum(sizes[tp] for tp, r in plan.items() if b in r) for b in (1, 2)}
    assert held == {1: 1100, 2: 1100}
    mixed = generate({("a", 0): (1, 2, 3), ("b", 0): (1,)}, {}, [1, 2, 3, 4])
    assert [len(p.replicas) for p in mixed] == [3, 1]
    assert _spread(mixed, [1, 2, 3, 4])[0] == {1: 1, 2: 1, 3: 1, 4: 1}


def test_generate_refuses_too_few_brokers() -> None:
    with pytest.raises(ToolError, match="--broker-list: t-0 has 3 replicas but only 2 broker"):
        generate({("t", 0): (1, 2, 3)}, {}, [1, 2])


# ---- --progress arithmetic ----------------------------------------------------------------

MOVING = Ongoing(replicas=(4, 1, 2, 3), adding=(4,), removing=(3,))


def _snapshot(at: float, adding_size: int | None, leader_size: int, ongoing: bool = True,
              replicas: tuple[int, ...] = (4, 1, 2, 3)) -> Snapshot:
    sizes = {(1, "t", 0): ReplicaSizes("/b1/d1", leader_size), (2, "t", 0): ReplicaSizes("/b2/d1", leader_size - 10)}
    if adding_size is not None:
        sizes[(4, "t", 0)] = ReplicaSizes("/b4/d2", adding_size)
    return Snapshot(at, {("t", 0): MOVING} if ongoing else {}, {("t", 0): replicas}, {("t", 0): 1}, sizes)


def test_an_adding_replica_is_measured_against_the_leader_in_bytes() -> None:
    everything = Followed()
    first = progress({}, _snapshot(10.0, None, 1000), everything)
    (key,) = first
    assert key == (ADDING, 4, "t", 0)
    assert first[key].state == WAITING and first[key].total == 1000 and "not created yet" in first[key].detail

    second = progress(first, _snapshot(11.0, 100, 1000), everything)
    entry = second[key]
    assert (entry.state, entry.copied, entry.total, entry.rate, entry.target) == (COPYING, 100, 1000, None,
                                                                                  "/b4/d2")
    third = progress(second, _snapshot(13.0, 500, 1200), everything)[key]
    assert (third.copied, third.total, third.rate) == (500, 1200, 200.0)  # 400 bytes in 2 s
    assert third.eta_seconds == 3 and third.fraction == pytest.approx(500 / 1200)
    # The rate is over every sample of the last RATE_WINDOW_SECONDS, not the last two alone.
    fourth = progress({key: third}, _snapshot(14.0, 1100, 1300), everything)[key]
    assert fourth.rate == pytest.approx(1000 / 3)
    line = progress_line(fourth)
    assert "t-0" in line and "new replica on broker 4" in line and "1.1 KiB of 1.3 KiB" in line
    assert "333 B/s" in line and "ETA 0:00:00" in line
    later = progress({key: fourth}, _snapshot(14.0 + RATE_WINDOW_SECONDS + 2, 1200, 1300), everything)[key]
    assert later.samples == ((14.0, 1100), (14.0 + RATE_WINDOW_SECONDS + 2, 1200))
    assert later.rate == pytest.approx(100 / (RATE_WINDOW_SECONDS + 2)) and later.eta_seconds == 12

    done = progress({key: later}, _snapshot(30.0, 1300, 1300, ongoing=False, replicas=(4, 1, 2)), everything)[key]
    assert (done.state, done.copied, done.total) == (DONE, 1300, 1300)
    assert "done (1.3 KiB)" in progress_line(done)
    # Finished stays finished.
    assert progress({key: done}, _snapshot(31.0, None, 1300, ongoing=False), everything)[key] == done


def test_a_cancelled_reassignment_fails_its_adding_replicas() -> None:
    key = (ADDING, 4, "t", 0)
    copying = progress(progress({}, _snapshot(1.0, 10, 1000), Followed()), _snapshot(2.0, 20, 1000), Followed())
    ended = progress(copying, _snapshot(3.0, None, 1000, ongoing=False, replicas=(1, 2, 3)), Followed())
    # The broker's Metadata may not show the outcome yet: the replica is failed only once it stays missing.
    assert ended[key].state == WAITING and "waiting for the metadata" in ended[key].detail
    still = progress(ended, _snapshot(3.0 + METADATA_SETTLE_SECONDS - 0.1, None, 1000, ongoing=False,
                                      replicas=(1, 2, 3)), Followed())
    assert still[key].state == WAITING
    cancelled = progress(still, _snapshot(3.0 + METADATA_SETTLE_SECONDS, None, 1000, ongoing=False,
                                          replicas=(1, 2, 3)), Followed())[key]
    assert cancelled.state == FAILED and "ended without it (replicas: 1,2,3)" in cancelled.detail
    assert "FAILED" in progress_line(cancelled)
    # Metadata catching up within the delay makes it done.
    caught_up = progress(ended, _snapshot(4.0, 1000, 1000, ongoing=False, replicas=(4, 1, 2)), Followed())[key]
    assert caught_up.state == DONE


def test_without_a_leader_the_largest_remaining_replica_is_the_total() -> None:
    leaderless = Snapshot(1.0, {("t", 0): MOVING}, {("t", 0): (4, 1, 2, 3)}, {("t", 0): -1},
                          {(2, "t", 0): ReplicaSizes("/d", 700), (3, "t", 0): ReplicaSizes("/d", 900),
                           (4, "t", 0): ReplicaSizes("/d", 50)})
    (entry,) = progress({}, leaderless, Followed()).values()
    assert (entry.copied, entry.total) == (50, 900)


def test_a_move_between_dirs_is_its_future_replica_against_the_current_one() -> None:
    followed = Followed(reassignments={}, dir_moves={(1, "t", 0): "/d2"})
    key = (DIR_MOVE, 1, "t", 0)

    def at(time: float, sizes: ReplicaSizes) -> Snapshot:
        return Snapshot(time, sizes={(1, "t", 0): sizes})

    waiting = progress({}, at(1.0, ReplicaSizes("/d1", 800)), followed)
    assert waiting[key].state == WAITING and waiting[key].detail == "in /d1"
    copying = progress(waiting, at(2.0, ReplicaSizes("/d1", 800, "/d2", 200)), followed)
    assert (copying[key].state, copying[key].copied, copying[key].total) == (COPYING, 200, 800)
    faster = progress(copying, at(4.0, ReplicaSizes("/d1", 800, "/d2", 600)), followed)[key]
    assert faster.rate == 200.0 and faster.eta_seconds == 1
    assert "broker 1 -> /d2" in progress_line(faster) and " 75.0% " in progress_line(faster)
    done = progress({key: faster}, at(5.0, ReplicaSizes("/d2", 810)), followed)[key]
    assert (done.state, done.copied, done.total) == (DONE, 810, 810)

    stopped = progress({key: faster}, at(5.0, ReplicaSizes("/d1", 800)), followed)[key]
    assert stopped.state == FAILED and "the move stopped" in stopped.detail
    refused = progress(waiting, at(2.0, ReplicaSizes("/d1", 800, move_error="the move to /d2 failed: full")),
                       followed)[key]
    assert refused.state == FAILED and refused.detail == "the move to /d2 failed: full"


def test_every_move_is_followed_when_no_plan_is_given_and_a_plan_follows_only_its_own() -> None:
    snapshot = Snapshot(1.0, {("t", 0): MOVING, ("u", 0): Ongoing((5, 1), (5,), (1,))},
                        {("t", 0): (4, 1, 2, 3), ("u", 0): (5, 1)}, {},
                        {(2, "t", 1): ReplicaSizes("/d1", 10, "/d2", 5)})
    assert sorted(progress({}, snapshot, Followed())) == [
        (ADDING, 4, "t", 0), (ADDING, 5, "u", 0), (DIR_MOVE, 2, "t", 1)]
    # A dir given to a replica being added is shown on its ADDING line, not as a move of its own.
    plan = Followed(reassignments={("u", 0): (5,), ("v", 0): (1, 2)},
                    dir_moves={(5, "u", 0): "/d5", (2, "t", 1): "/d2"})
    entries = progress({}, snapshot, plan)
    assert sorted(entries) == [(ADDING, 5, "u", 0), (DIR_MOVE, 2, "t", 1), (PLACED, 1, "v", 0), (PLACED, 2, "v", 0)]
    # v-0 is not moving and does not have the replicas asked for: its target replicas fail unless
    # Metadata shows them soon.
    assert {entries[(PLACED, b, "v", 0)].state for b in (1, 2)} == {WAITING}
    later = progress(entries, replace(snapshot, time=1.0 + METADATA_SETTLE_SECONDS), plan)
    assert {later[(PLACED, b, "v", 0)].state for b in (1, 2)} == {FAILED}
    placed = progress({}, Snapshot(1.0, replicas={("v", 0): (2, 1)}, sizes={(1, "v", 0): ReplicaSizes("/d", 5)}),
                      plan)
    assert placed[(PLACED, 1, "v", 0)].state == placed[(PLACED, 2, "v", 0)].state == DONE
    assert "v-0" in progress_line(placed[(PLACED, 1, "v", 0)]) and " replica on broker 1 " in progress_line(
        placed[(PLACED, 1, "v", 0)])
