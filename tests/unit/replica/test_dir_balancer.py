"""DirBalancer on real temporary log dirs (LogManager, ReplicaManager and LogDirMover, no
sockets).  The temporary dirs share one file system, so the edge that cannot run here is
replaced: each dir is its own disk of DISK_BYTES whose used bytes are the bytes placed in it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from prometheus_client import REGISTRY

from minikafka.replica.dir_balancer import BalancerSettings, DirBalancer
from minikafka.storage.log_manager import DirUsage
from protocol.errors import ErrorCode
from tests.unit.replica.test_mover import Broker

pytestmark = pytest.mark.timeout(30)

DISK_BYTES = 40_000
PARTITIONS = 6


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Node(Broker):
    """A broker whose dirs are disks of DISK_BYTES each, with a balancer."""

    def __init__(self, dirs: list[str]) -> None:
        super().__init__(dirs)
        self.manager.dir_usage = self._usage  # type: ignore[method-assign]
        self.manager.file_system_of = lambda log_dir: dirs.index(log_dir)  # type: ignore[method-assign]
        self.settings = BalancerSettings(enabled=True, threshold_percent=10.0, interval_ms=1000)
        self.clock = Clock()
        self.balancer = DirBalancer(self.manager, self.mover, lambda: self.settings, clock=self.clock)

    def _usage(self, log_dir: str) -> DirUsage:
        return DirUsage(DISK_BYTES, DISK_BYTES - self.manager.placed_bytes(log_dir))

    def where(self) -> dict[int, str]:
        return {p: self.manager.dir_of("t", p) for p in range(PARTITIONS)}  # type: ignore[misc]

    async def settle(self, rounds: int = 40) -> int:
        """Rounds until the balancer has nothing planned nor running; returns how many."""
        for done in range(1, rounds + 1):
            await self.balancer.tick()
            tasks = [m.task for m in self.mover.progress() if m.task is not None]
            if not tasks and not self.balancer.plan and not self.balancer.running:
                return done
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.mover.wait_for_cleanups()
        raise AssertionError(f"not settled after {rounds} rounds")


@pytest.fixture
def dirs(tmp_path) -> list[str]:
    return [str(tmp_path / f"d{i}") for i in (1, 2, 3)]


@pytest.fixture
async def node(dirs) -> AsyncIterator[Node]:
    """Six partitions of ~2.9 kB, all in the first dir (45% used); the others empty."""
    made = Node(dirs)
    for p in range(PARTITIONS):
        made.lead(p, log_dir=dirs[0])
        made.append(p, count=15)
    made.mover.start()
    yield made
    await made.balancer.stop()
    await made.close()


def metric(name: str) -> float:
    value = REGISTRY.get_sample_value(name)
    assert value is not None, name
    return value


def spread(node: Node) -> float:
    seen = node.balancer.observe()
    used = [100 * (d.total_bytes - d.usable_bytes) / d.total_bytes for d in seen.dirs]
    return max(used) - min(used)


async def test_disabled_it_only_measures(node: Node, dirs) -> None:
    node.settings = BalancerSettings(False, 10.0, 1000)
    await node.balancer.tick()
    assert node.balancer.plan == [] and node.mover.progress() == []
    assert metric("minikafka_log_dir_balancer_spread_percent") == pytest.approx(spread(node)) and spread(node) > 40


async def test_it_plans_with_a_reason_per_move_and_moves_one_per_dir_at_a_time(node: Node, dirs, caplog) -> None:
    caplog.set_level(logging.INFO, logger="minikafka.replica.dir_balancer")
    moved_before = metric("minikafka_log_dir_balancer_moved_bytes_total")
    await node.balancer.tick()
    planned = [line for line in caplog.messages if line.startswith("disk balancer plans to move t-")]
    assert len(planned) >= 2 and all(f"from {dirs[0]} (" in line and "threshold 10" in line for line in planned)
    assert "over the threshold of 10" in caplog.text
    # Every planned move leaves the first dir: one at a time.
    running = node.mover.progress()
    assert len(running) == 1 and running[0].source_dir == dirs[0]
    await node.settle()
    assert spread(node) <= 10
    assert set(node.where().values()) == set(dirs)
    assert metric("minikafka_log_dir_balancer_moved_bytes_total") - moved_before == pytest.approx(
        sum(node.log(p).size_bytes for p in range(PARTITIONS) if node.log(p).log_dir != dirs[0]))
    assert metric("minikafka_log_dir_balancer_spread_percent") <= 10
    await node.balancer.tick()  # balanced: no new plan
    assert node.balancer.plan == [] and node.mover.progress() == []


async def test_two_moves_with_no_dir_in_common_run_together(tmp_path) -> None:
    dirs = [str(tmp_path / f"d{i}") for i in (1, 2, 3, 4)]
    node = Node(dirs)
    try:
        for p in range(PARTITIONS):
            node.lead(p, log_dir=dirs[0] if p < 3 else dirs[1])
            node.append(p, count=15)
        node.mover.start()
        await node.balancer.tick()
        assert {(m.source_dir, m.dest_dir) for m in node.mover.progress()} == {(dirs[0], dirs[2]), (dirs[1], dirs[3])}
    finally:
        await node.close()


async def test_a_dir_failing_drops_the_plan_and_the_next_one_spares_it(node: Node, dirs, caplog) -> None:
    caplog.set_level(logging.INFO, logger="minikafka.replica.dir_balancer")
    await node.balancer.tick()
    assert node.balancer.plan or node.balancer.running
    node.channel.report(dirs[2], OSError(5, "Input/output error"))
    node.mover.cancel_moves_involving(dirs[2], "the dir failed")
    node.manager.take_dir_offline(dirs[2])
    await node.settle()
    assert "the live log dirs changed" in caplog.text or "did not happen" in caplog.text
    assert set(node.where().values()) == {dirs[0], dirs[1]}
    assert spread(node) <= 10


async def test_a_refused_move_is_not_planned_again_until_the_dirs_change(node: Node, dirs, caplog) -> None:
    caplog.set_level(logging.INFO, logger="minikafka.replica.dir_balancer")
    node.manager.min_free_bytes = DISK_BYTES - 100  # the mover refuses every move: no room
    await node.balancer.tick()
    # The planner saw the room too: it found nothing to do, and says so once.
    assert node.balancer.plan == [] and node.mover.progress() == []
    assert "log.dir.min.free.bytes" in caplog.text
    node.manager.min_free_bytes = 0
    real_move = node.mover.move
    node.mover.move = lambda *_args: ErrorCode.KAFKA_STORAGE_ERROR  # type: ignore[method-assign]
    await node.balancer.tick()
    assert "was refused" in caplog.text and node.balancer.plan == []
    refused = {key for key in [("t", p) for p in range(PARTITIONS)] if key in node.balancer._pinned}
    assert len(refused) == 1
    node.mover.move = real_move  # type: ignore[method-assign]
    await node.settle()
    assert all(node.manager.dir_of(*key) == dirs[0] for key in refused)


async def test_a_threshold_raised_at_run_time_drops_the_rest_of_the_plan(node: Node, caplog) -> None:
    caplog.set_level(logging.INFO, logger="minikafka.replica.dir_balancer")
    await node.balancer.tick()
    assert node.balancer.plan
    node.settings = BalancerSettings(True, 95.0, 1000)
    await node.balancer.tick()
    assert node.balancer.plan == []
    assert "within the threshold of 95" in caplog.text


async def test_growth_is_measured_between_samples(node: Node) -> None:
    node.settings = BalancerSettings(False, 10.0, 1000)
    node.balancer.observe()
    node.clock.now += 2
    node.append(3, count=10)
    growth = {r.key: r.growth_bytes_per_s for r in node.balancer.observe().replicas}
    assert growth[("t", 3)] > 500 and growth[("t", 0)] == 0


async def test_settings_and_failures_wake_it(node: Node) -> None:
    node.settings = BalancerSettings(False, 10.0, 3_600_000)
    node.balancer.start()
    await asyncio.sleep(0.05)
    assert node.mover.progress() == []
    node.settings = BalancerSettings(True, 10.0, 3_600_000)
    node.balancer.wake()
    for _ in range(100):
        if node.mover.progress():
            break
        await asyncio.sleep(0.01)
    assert node.mover.progress(), "a wake-up did not start a round"


async def test_dirs_on_one_file_system_are_said_to_leave_it_nothing_to_do_once(node: Node, caplog) -> None:
    node.manager.file_system_of = lambda log_dir: 0  # type: ignore[method-assign]
    node.manager.dir_usage = lambda log_dir: DirUsage(DISK_BYTES, DISK_BYTES // 2)  # type: ignore[method-assign]
    for _ in range(3):
        await node.balancer.tick()
    assert node.mover.progress() == []
    assert [r.message for r in caplog.records].count(
        "disk balancer: all live log dirs are on one file system: moving replicas between them would free nothing, "
        "so the balancer has nothing to do") == 1


async def test_a_stop_that_comes_with_a_wake_up_still_stops_it(node: Node) -> None:
    node.settings = BalancerSettings(False, 10.0, 3_600_000)
    node.balancer.start()
    await asyncio.sleep(0.01)  # waiting for the next round
    node.balancer.wake()
    await asyncio.wait_for(node.balancer.stop(), 5)
