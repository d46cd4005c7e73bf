"""The disk balancer of a broker: keeps the file systems of its log dirs evenly used by moving
replicas between them, through the LogDirMover, as an operator would with AlterReplicaLogDirs.

Every ``log.dirs.balancer.interval.ms`` (and at once when a log dir fails or a balancer setting
changes) it measures the dirs and the replicas and, when the spread of used share is over
``log.dirs.balancer.threshold.percent``, plans moves with replica/balance_plan.py, logging one
line per move saying why.  It starts them one per dir at a time (a dir busy with any move, an
operator's included, waits), and drops what is left of the plan when the spread is within the
threshold, when the set of live dirs changes (a dir failed, or came back as a new disk at a
restart) or when a move is refused; the next round plans again from what is there.  It changes
no leadership and touches only this broker's dirs.

Moves are the mover's: crash-safe and resumed at startup, where the balancer counts a resumed
move as done when it plans.  What the balancer itself knows (its plan, the growth samples)
lives in memory only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import Counter, Gauge

from minikafka.replica.balance_plan import (
    BalancePlan,
    DirLoad,
    PlannedMove,
    ReplicaLoad,
    TopicPartition,
    plan_balance,
    projected_spread,
)
from minikafka.replica.log_dir_mover import LogDirMover
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.log_manager import LogManager
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# A replica's growth is measured over at least this long: sizes a moment apart say little.
GROWTH_SAMPLE_S = 1.0

SPREAD = Gauge("minikafka_log_dir_balancer_spread_percent",
               "Points of used share between the fullest and the emptiest file system of this broker's live log "
               "dirs, counting the moves in progress as done")
PLANNED_BYTES = Counter("minikafka_log_dir_balancer_planned_bytes", "Bytes of the replica moves the disk balancer planned")
MOVED_BYTES = Counter("minikafka_log_dir_balancer_moved_bytes", "Bytes of the replicas the disk balancer moved")
MOVES_IN_PROGRESS = Gauge("minikafka_log_dir_balancer_moves_in_progress",
                          "Replica moves of the disk balancer that are waiting for a worker or copying")


@dataclass(frozen=True)
class BalancerSettings:
    """The balancer's dynamic settings (log.dirs.balancer.*), read at every round."""

    enabled: bool
    threshold_percent: float
    interval_ms: int


@dataclass(frozen=True)
class Observation:
    """The live dirs and the replicas in them, as the planner takes them; ``dirs_key`` names the
    live dirs and their directory ids (a replaced disk has a new id)."""

    dirs: tuple[DirLoad, ...]
    replicas: tuple[ReplicaLoad, ...]
    dirs_key: tuple[tuple[str, str], ...]


class DirBalancer:
    """Owns the balancing of this broker's log dirs: the plan in hand, which of its moves are
    running, the replicas it will not try again until the dirs change, the growth samples of the
    replicas and the balancer metrics.

    Event-loop thread only.  The Broker creates it after the LogDirMover, starts it after the
    mover's start (which resumes unfinished moves), calls ``wake`` when a setting changes or a
    dir fails, and stops it before the mover.  It asks the mover for moves (``move``) and reads
    the mover's moves and failures; it writes nothing itself.
    """

    def __init__(self, log_manager: LogManager, mover: LogDirMover, settings: Callable[[], BalancerSettings],
                 *, clock: Callable[[], float] = time.monotonic) -> None:
        self.log_manager = log_manager
        self.mover = mover
        self.settings = settings
        self.clock = clock
        self.plan: list[PlannedMove] = []  # planned, not started, in order
        self.running: dict[TopicPartition, PlannedMove] = {}
        self._planned_for: tuple[tuple[str, str], ...] = ()
        self._pinned: set[TopicPartition] = set()  # moves refused or failed: not planned again until the dirs change
        self._samples: dict[TopicPartition, tuple[float, int]] = {}
        self._growth: dict[TopicPartition, float] = {}
        self._last_note = ""  # the last reason given for moving nothing
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        MOVES_IN_PROGRESS.set_function(lambda: len(self.running))
        self._task = asyncio.get_running_loop().create_task(self._run(), name="disk balancer")

    async def stop(self) -> None:
        """Stop planning and starting moves; the moves running go on until the mover stops."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def wake(self) -> None:
        """Run a round now (a setting changed, a dir failed, a move ended)."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:
                log.exception("the disk balancer's round failed; it tries again at the next one")
            # Not asyncio.wait_for: on Python 3.11 it swallows a cancellation (stop) that comes
            # as the wake-up does.
            try:
                async with asyncio.timeout(self.settings().interval_ms / 1000):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()

    # ---- one round ------------------------------------------------------------------------

    async def tick(self) -> None:
        """Follow the moves started, measure, drop or make a plan, start what may start."""
        settings = self.settings()
        self._follow_running()
        seen = self.observe()
        spread = projected_spread(seen.dirs, seen.replicas)
        SPREAD.set(spread)
        if self.plan:
            if not settings.enabled:
                self._drop_plan("the balancer was disabled")
            elif seen.dirs_key != self._planned_for:
                self._drop_plan("the live log dirs changed")
            elif spread <= settings.threshold_percent:
                self._drop_plan(f"the spread is {spread:.1f} points, within the threshold of "
                                f"{settings.threshold_percent:g}")
        if seen.dirs_key != self._planned_for:
            self._pinned.clear()
        if not settings.enabled:
            return
        if len(seen.dirs) > 1 and len({d.file_system for d in seen.dirs}) == 1:
            self._say_once("all live log dirs are on one file system: moving replicas between them would free "
                           "nothing, so the balancer has nothing to do")
        if not self.plan and not self.running and spread > settings.threshold_percent:
            # A finished move's source is removed in the background: measure without it.
            await self.mover.wait_for_cleanups()
            seen = self.observe()
            SPREAD.set(projected_spread(seen.dirs, seen.replicas))
            self._adopt(plan_balance(seen.dirs, seen.replicas, settings.threshold_percent,
                                     self.log_manager.min_free_bytes, pinned=self._pinned), seen.dirs_key)
        self._start_moves()

    def observe(self) -> Observation:
        """The live dirs (a dir whose file system does not answer is left out) and every replica
        in them, with its growth since the last sample and its move in progress."""
        dirs = []
        for log_dir in self.log_manager.live_dirs:
            try:
                usage = self.log_manager.dir_usage(log_dir)
                file_system = self.log_manager.file_system_of(log_dir)
            except KafkaStorageError:
                continue
            dirs.append(DirLoad(log_dir, usage.total_bytes, usage.usable_bytes, str(file_system)))
        moving = {m.key: m for m in self.mover.progress()}
        now = self.clock()
        replicas = []
        for key, replica in list(self.log_manager.logs.items()):
            size = replica.size_bytes
            move = moving.get(key)
            replicas.append(ReplicaLoad(key[0], key[1], replica.log_dir, size, self._growth_of(key, size, now),
                                        move.dest_dir if move is not None else None,
                                        move.future.size_bytes if move is not None else 0))
        for gone in self._samples.keys() - self.log_manager.logs.keys():
            del self._samples[gone]
            self._growth.pop(gone, None)
        ids = self.log_manager.directory_ids
        return Observation(tuple(dirs), tuple(replicas), tuple((d.path, str(ids.get(d.path))) for d in dirs))

    def _growth_of(self, key: TopicPartition, size: int, now: float) -> float:
        """Bytes per second the replica grew over its last sample period (never below 0:
        retention shrinking it says nothing of its appends)."""
        sample = self._samples.get(key)
        if sample is None:
            self._samples[key] = (now, size)
        elif now - sample[0] >= GROWTH_SAMPLE_S:
            self._growth[key] = max(0.0, (size - sample[1]) / (now - sample[0]))
            self._samples[key] = (now, size)
        return self._growth.get(key, 0.0)

    def _adopt(self, plan: BalancePlan, dirs_key: tuple[tuple[str, str], ...]) -> None:
        self._planned_for = dirs_key
        if not plan.moves:
            self._say_once(plan.summary())
            return
        self._last_note = ""
        log.info("disk balancer: %s", plan.summary())
        for move in plan.moves:
            log.info("disk balancer plans to move %s", move.reason(plan.threshold_percent))
        PLANNED_BYTES.inc(plan.planned_bytes)
        self.plan = list(plan.moves)

    def _say_once(self, note: str) -> None:
        """Log why nothing moves once, not at every round."""
        if note != self._last_note:
            log.warning("disk balancer: %s", note)
        self._last_note = note

    def _drop_plan(self, why: str) -> None:
        log.info("disk balancer: %d planned move(s) dropped: %s", len(self.plan), why)
        self.plan = []

    def _start_moves(self) -> None:
        """Start each planned move whose two dirs are in no move now, in plan order."""
        busy = {d for m in self.mover.progress() for d in (m.source_dir, m.dest_dir)}
        for planned in list(self.plan):
            if planned.source_dir in busy or planned.dest_dir in busy:
                continue
            self.plan.remove(planned)
            if self.log_manager.dir_of(*planned.key) != planned.source_dir:
                log.info("disk balancer: not moving %s: it is no longer in %s", planned.name, planned.source_dir)
                continue
            code = self.mover.move(planned.topic, planned.partition, planned.dest_dir)
            if code != ErrorCode.NONE:
                failure = self.mover.failures.get(planned.key)
                self._pinned.add(planned.key)
                self._drop_plan(f"the move of {planned.name} to {planned.dest_dir} was refused "
                                f"({failure.reason if failure is not None else code.name})")
                return
            self.running[planned.key] = planned
            busy.update((planned.source_dir, planned.dest_dir))
            task = self.mover.moves[planned.key].task
            if task is not None:
                task.add_done_callback(lambda _: self.wake())

    def _follow_running(self) -> None:
        for key, planned in list(self.running.items()):
            move = self.mover.moves.get(key)
            if move is not None and move.active and move.dest_dir == planned.dest_dir:
                continue
            del self.running[key]
            replica = self.log_manager.get_log(*key)
            if replica is not None and replica.log_dir == planned.dest_dir:
                MOVED_BYTES.inc(replica.size_bytes)
                continue
            self._pinned.add(key)
            failure = self.mover.failures.get(key)
            log.warning("disk balancer: the move of %s to %s did not happen (%s); it is not tried again until "
                        "the log dirs change", planned.name, planned.dest_dir,
                        failure.reason if failure is not None else "cancelled, or the replica was deleted")
