"""The Throttle shared by the moves between log dirs (on the event loop) and the cleaner's
processes (in shared memory): pacing, chunk sizes and rate changes."""

from __future__ import annotations

import asyncio
import multiprocessing
import time

import pytest

from minikafka.storage.throttle import CHUNK_BYTES, Throttle

pytestmark = pytest.mark.timeout(30)


async def test_throttle_paces_copies_and_a_new_rate_applies_at_once():
    throttle = Throttle(4_000_000)
    loop = asyncio.get_running_loop()
    started = loop.time()
    for _ in range(8):
        await throttle.acquire(throttle.chunk_bytes())
    elapsed = loop.time() - started
    assert throttle.chunk_bytes() == 200_000
    assert elapsed >= 0.35  # 1.6 MB at 4 MB/s, the first chunk free (no upper bound: a loaded CI host)
    throttle.set_rate(1)
    await throttle.acquire(10)  # free: the first booking starts now and takes the next 10 s
    waiter = asyncio.ensure_future(throttle.acquire(10))  # must wait those 10 s
    await asyncio.sleep(0)  # one loop turn: the waiter has booked and is sleeping
    assert not waiter.done()
    throttle.set_rate(2**63 - 1)
    await asyncio.wait_for(waiter, 1.0)
    assert throttle.unlimited and throttle.chunk_bytes() == CHUNK_BYTES


def _acquire_in_process(throttle: Throttle, barrier, spans, slot: int) -> None:
    barrier.wait()
    spans[2 * slot] = time.monotonic()
    for _ in range(10):
        throttle.acquire_blocking(20_000)
    spans[2 * slot + 1] = time.monotonic()


def test_processes_share_one_rate():
    context = multiprocessing.get_context("spawn")
    throttle = Throttle(float("inf"), context)
    assert throttle.unlimited
    throttle.acquire_blocking(10**12)  # unlimited: no wait, no booking
    throttle.set_rate(1_000_000)
    # Two processes start together and take 0.2 MB each: the last of the 20 slots of 0.02 s
    # starts 0.38 s after the first when they share the rate, 0.18 s if each had its own.
    barrier = context.Barrier(2)
    spans = context.Array("d", 4)
    workers = [context.Process(target=_acquire_in_process, args=(throttle, barrier, spans, i)) for i in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(20)
        assert worker.exitcode == 0
    assert max(spans[1], spans[3]) - min(spans[0], spans[2]) >= 0.37
    assert throttle.rate == 1_000_000


def test_a_rate_must_be_positive():
    throttle = Throttle(1.0)
    for bad in (0, -5):
        with pytest.raises(ValueError, match="more than 0 bytes per second"):
            throttle.set_rate(bad)
    throttle.set_rate(0.5)  # the cleaner's rate is a double: below one byte a second is allowed
    assert throttle.rate == 0.5
