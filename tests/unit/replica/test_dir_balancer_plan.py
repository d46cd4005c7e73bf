"""The disk balancer's rules (replica/balance_plan.py), without I/O: the lower bound of the bytes
to move, and the plan of whole-replica moves."""

from __future__ import annotations

import random

import pytest

from minikafka.replica.balance_plan import (
    BalancePlan,
    DirLoad,
    ReplicaLoad,
    _band,
    bytes_to_balance,
    plan_balance,
    projected_spread,
    spread_of,
)

MB = 1_000_000


def dirs(*used: int, total: int = 1000 * MB) -> list[DirLoad]:
    """One dir per file system, /d1, /d2, ...: ``used`` bytes of ``total`` each."""
    return [DirLoad(f"/d{i}", total, total - u, f"fs{i}") for i, u in enumerate(used, 1)]


def replicas(log_dir: str, *sizes: int, topic: str = "t", first: int = 0) -> list[ReplicaLoad]:
    return [ReplicaLoad(topic, first + i, log_dir, size) for i, size in enumerate(sizes)]


def shares_after(plan: BalancePlan) -> dict[str, float]:
    return {d: round(s, 6) for d, s in plan.shares_after.items()}


# ---- the lower bound ---------------------------------------------------------------------


def test_lower_bound_of_two_equal_disks_is_half_the_excess_over_the_threshold() -> None:
    assert bytes_to_balance([(100, 90), (100, 10)], 10) == pytest.approx(35)
    assert bytes_to_balance([(100, 90), (100, 10)], 80) == 0
    assert bytes_to_balance([(100, 90)], 0) == 0


def test_lower_bound_spreads_the_excess_over_every_emptier_disk() -> None:
    # The band ends at [33.3, 43.3]: 46.7 leave the full disk, 23.3 reach each of the others.
    assert bytes_to_balance([(100, 90), (100, 10), (100, 10)], 10) == pytest.approx(140 / 3)
    # Two full disks and an empty one: the band ends at [53.3, 63.3].
    assert bytes_to_balance([(100, 90), (100, 90), (100, 0)], 10) == pytest.approx(160 / 3)


def test_lower_bound_weighs_disks_by_their_size() -> None:
    # (180 - x) / 200 - (10 + x) / 100 = 0.1
    assert bytes_to_balance([(200, 180), (100, 10)], 10) == pytest.approx(140 / 3)


def _brute_force(disks: list[tuple[int, float]], t: float) -> float:
    """min over a fine grid of band starts L of max(shed, gain)."""
    shares = [100 * u / total for total, u in disks]
    avg = 100 * sum(u for _, u in disks) / sum(total for total, _ in disks)
    best = float("inf")
    for step in range(2_001):
        level = avg - t + t * step / 2_000
        shed = sum(max(0.0, s - level - t) * total for s, (total, _) in zip(shares, disks, strict=True)) / 100
        gain = sum(max(0.0, level - s) * total for s, (total, _) in zip(shares, disks, strict=True)) / 100
        best = min(best, max(shed, gain))
    return best


def test_lower_bound_agrees_with_a_brute_force_search() -> None:
    rng = random.Random(24)
    for _ in range(40):
        disks = [(total, rng.uniform(0, total)) for total in (rng.choice([100, 250, 1000]) for _ in range(rng.randint(2, 6)))]
        t = rng.choice([0, 1, 5, 10, 30])
        assert bytes_to_balance(disks, t) == pytest.approx(_brute_force(disks, t), rel=1e-2, abs=0.5), (disks, t)


def test_every_byte_counts_while_it_leaves_a_disk_above_the_band_for_one_below() -> None:
    # What the planner takes for granted instead of weighing each such move.
    rng = random.Random(7)
    for _ in range(100):
        disks = [(total, rng.uniform(0, total)) for total in (rng.choice([100, 400]) for _ in range(rng.randint(2, 5)))]
        t = rng.choice([1, 5, 10])
        bound, level = _band(disks, t)
        shares = [100 * u / total for total, u in disks]
        above = [i for i, s in enumerate(shares) if s > level + t]
        below = [i for i, s in enumerate(shares) if s < level]
        for a in above:
            for b in below:
                x = min((shares[a] - level - t) * disks[a][0], (level - shares[b]) * disks[b][0]) / 100
                after = [(total, u - x if i == a else u + x if i == b else u) for i, (total, u) in enumerate(disks)]
                assert bytes_to_balance(after, t) == pytest.approx(bound - x, abs=1e-6), (disks, t, a, b)


# ---- the plan ----------------------------------------------------------------------------


def test_a_balanced_broker_gets_no_moves() -> None:
    plan = plan_balance(dirs(300 * MB, 250 * MB), replicas("/d1", 300 * MB) + replicas("/d2", 250 * MB, first=1), 10)
    assert plan.balanced and plan.moves == () and plan.lower_bound_bytes == 0
    assert plan.spread_before == pytest.approx(5)
    assert "within the threshold" in plan.summary()


def test_one_full_dir_is_emptied_into_the_others_until_the_spread_is_under_the_threshold() -> None:
    sizes = [300 * MB, 200 * MB, 150 * MB, 100 * MB, 90 * MB, 40 * MB, 20 * MB]
    plan = plan_balance(dirs(900 * MB, 0, 0), replicas("/d1", *sizes), 10)
    assert plan.spread_before == pytest.approx(90)
    assert plan.reaches_threshold and plan.spread_after <= 10
    assert plan.lower_bound_bytes == round(1600 * MB / 3)
    # Whole replicas: the best assignment (found by trying all 3^7) moves 550 MB.
    assert plan.planned_bytes == 560 * MB
    assert {m.source_dir for m in plan.moves} == {"/d1"}
    assert {m.dest_dir for m in plan.moves} == {"/d2", "/d3"}
    assert len({m.key for m in plan.moves}) == len(plan.moves), "a replica moved twice"
    assert [m.spread[0] for m in plan.moves[1:]] == [m.spread[1] for m in plan.moves[:-1]]
    assert plan.moves[-1].spread[1] == plan.spread_after
    reason = plan.moves[0].reason(10)
    assert reason.startswith(f"{plan.moves[0].name} (") and "from /d1 (90.0% -> " in reason
    assert "spread 90.0 -> " in reason and "threshold 10" in reason


def test_the_fewest_bytes_are_chosen_among_replicas_that_would_do() -> None:
    # 350 MB must leave /d1: the 350 MB replica does it alone; the 600 MB one would overshoot.
    plan = plan_balance(dirs(800 * MB, 100 * MB), replicas("/d1", 350 * MB, 600 * MB) + replicas("/d2", 100 * MB, first=5),
                        0)
    assert [(m.name, m.dest_dir) for m in plan.moves] == [("t-0", "/d2")]
    assert plan.spread_after == pytest.approx(0)


def test_sealed_replicas_go_before_growing_ones_of_the_same_size() -> None:
    loads = [ReplicaLoad("hot", 0, "/d1", 200 * MB, growth_bytes_per_s=2 * MB),
             ReplicaLoad("cold", 0, "/d1", 200 * MB),
             ReplicaLoad("warm", 0, "/d1", 200 * MB, growth_bytes_per_s=0.1 * MB)]
    plan = plan_balance(dirs(600 * MB, 0), loads, 30)
    assert [m.topic for m in plan.moves] == ["cold"]
    assert "not growing" in plan.moves[0].reason(30)


def test_a_replica_already_moving_is_never_planned_and_its_move_counts_as_done() -> None:
    loads = [ReplicaLoad("t", 0, "/d1", 300 * MB, moving_to="/d2", copied_bytes=100 * MB),
             *replicas("/d1", 300 * MB, 300 * MB, first=1)]
    plan = plan_balance(dirs(900 * MB, 100 * MB, 0), loads, 10)
    # With the move done: /d1 600 MB, /d2 300 MB (its 100 MB of copy are in the 100 used), /d3 0.
    assert plan.shares_before == {"/d1": 60, "/d2": 30, "/d3": 0}
    assert plan.moves and all(m.key != ("t", 0) for m in plan.moves)
    assert [m.dest_dir for m in plan.moves] == ["/d3"]


def test_no_dir_is_filled_below_the_min_free_bytes() -> None:
    loads = replicas("/d1", 300 * MB, 300 * MB, 200 * MB)
    free = dirs(800 * MB, 600 * MB, 0)  # /d2 has 400 MB usable, /d3 1000 MB
    plan = plan_balance(free, loads, 10, min_free_bytes=250 * MB)
    assert plan.moves and all(m.dest_dir == "/d3" or m.size_bytes <= 150 * MB for m in plan.moves)
    stuck = plan_balance(dirs(800 * MB, 0, total=1000 * MB), loads, 10, min_free_bytes=900 * MB)
    assert stuck.moves == () and not stuck.reaches_threshold
    assert "log.dir.min.free.bytes=900000000" in stuck.note


def test_no_replica_is_moved_when_none_would_bring_the_spread_closer() -> None:
    plan = plan_balance(dirs(900 * MB, 0), replicas("/d1", 900 * MB), 10)
    assert plan.moves == () and plan.spread_after == plan.spread_before == pytest.approx(90)
    assert "no move of a whole replica" in plan.summary()


def test_dirs_sharing_a_file_system_are_one_disk() -> None:
    shared = [DirLoad("/a", 1000 * MB, 100 * MB, "root"), DirLoad("/b", 1000 * MB, 100 * MB, "root")]
    plan = plan_balance(shared, replicas("/a", 900 * MB), 0)
    assert plan.moves == () and "one file system" in plan.note and "one file system" in plan.summary()
    # With a third, empty disk: a move goes to whichever of its dirs, never between /a and /b.
    plan = plan_balance([*shared, DirLoad("/c", 1000 * MB, 1000 * MB, "other")],
                        replicas("/a", 300 * MB, 300 * MB, 300 * MB), 10)
    assert plan.moves and {m.dest_dir for m in plan.moves} == {"/c"}


def test_within_a_disk_the_dir_with_the_fewest_bytes_takes_the_move() -> None:
    target = [DirLoad("/x", 1000 * MB, 1000 * MB, "new"), DirLoad("/y", 1000 * MB, 1000 * MB, "new")]
    loads = replicas("/d1", 200 * MB, 200 * MB, 200 * MB, 200 * MB)
    plan = plan_balance([*dirs(800 * MB), *target], loads, 10)
    assert [m.dest_dir for m in plan.moves] == ["/x", "/y"]
    assert shares_after(plan) == {"/d1": 40.0, "/x": 40.0, "/y": 40.0}


def test_the_same_inputs_give_the_same_plan() -> None:
    loads = replicas("/d1", *[50 * MB] * 12) + replicas("/d2", *[50 * MB] * 2, topic="u")
    first = plan_balance(dirs(600 * MB, 100 * MB, 0), loads, 5)
    assert first == plan_balance(dirs(600 * MB, 100 * MB, 0), loads, 5)
    assert first.moves


def test_random_brokers_plans_keep_every_rule() -> None:
    rng = random.Random(113)
    for _ in range(150):
        count = rng.randint(2, 4)
        loads: list[ReplicaLoad] = []
        used = []
        for d in range(1, count + 1):
            sizes = [rng.randint(1, 80) * MB for _ in range(rng.randint(0, 15))]
            loads += replicas(f"/d{d}", *sizes, topic=f"t{d}")
            used.append(sum(sizes) + rng.randint(0, 50) * MB)
        moving = rng.sample(loads, k=min(2, len(loads)))
        targets = [f"/d{d}" for d in range(1, count + 1)]
        loads = [ReplicaLoad(r.topic, r.partition, r.log_dir, r.size_bytes,
                             moving_to=rng.choice([t for t in targets if t != r.log_dir])) if r in moving else r
                 for r in loads]
        threshold = rng.choice([2, 5, 10, 20])
        min_free = rng.choice([0, 100 * MB])
        plan = plan_balance(dirs(*used, total=2000 * MB), loads, threshold, min_free_bytes=min_free)
        keys = [m.key for m in plan.moves]
        assert len(keys) == len(set(keys))
        assert not {r.key for r in loads if r.moving_to} & set(keys)
        assert plan.spread_after <= plan.spread_before
        assert spread_of(plan.shares_after.values()) == pytest.approx(plan.spread_after)
        if plan.reaches_threshold:
            assert plan.planned_bytes >= plan.lower_bound_bytes - 1
        for m in plan.moves:
            assert m.source_dir != m.dest_dir
            assert m.dest_share[1] <= 100 * (1 - min_free / (2000 * MB)) + 1e-6


def test_pinned_replicas_stay_but_count() -> None:
    loads = replicas("/d1", 300 * MB, 300 * MB, 300 * MB)
    plan = plan_balance(dirs(900 * MB, 0), loads, 40, pinned={("t", 0), ("t", 1)})
    assert [m.key for m in plan.moves] == [("t", 2)]
    assert projected_spread(dirs(900 * MB, 0), loads) == pytest.approx(90)
    assert projected_spread(dirs(900 * MB, 0), [ReplicaLoad("t", 0, "/d1", 300 * MB, moving_to="/d2")]) == \
        pytest.approx(30)
