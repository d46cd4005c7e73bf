"""Helpers for tests that run ZkControllers in the test's own event loop against a real
ZooKeeper, and hold a controller's event queue to make a race happen in one order every time."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

from minikafka.controller.zk_controller import ZkController


async def until(condition: Callable[[], bool | Awaitable[bool]], what: str) -> None:
    """Poll ``condition`` (plain or async) every 10 ms; fail after 20 s naming ``what``."""
    try:
        async with asyncio.timeout(20):
            while True:
                held = condition()
                if await held if inspect.isawaitable(held) else held:
                    return
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def hold_events(controller: ZkController) -> asyncio.Event:
    """Hold the controller's event queue (as a slow event would) until the returned event is set."""
    release, holding = asyncio.Event(), asyncio.Event()

    async def held() -> None:
        holding.set()
        await release.wait()
    controller.post(held)
    await holding.wait()
    return release
