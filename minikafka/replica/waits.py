"""Bounded waits (long polls) that end early when the client that asked has gone away.

A connection installs its ``WaitScope`` in a context variable; every task it starts for a
request inherits it. A handler that waits (a Fetch long poll, later acks=all and group joins)
waits through ``wait_released`` so that a client closing its side of the connection gets the
answers to what it already sent at once, instead of holding the connection open until
max_wait_ms runs out. Work a request sets off that must outlive it (a transaction's markers and
its completion) runs in a task of its own through ``spawn_detached``, outside every scope: an
asyncio task inherits its creator's context, and would otherwise give up its waits when that
client leaves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from contextvars import ContextVar, copy_context
from typing import Any, TypeVar

T = TypeVar("T")


class WaitScope:
    """The futures the requests of one connection wait on. Event-loop thread only."""

    def __init__(self) -> None:
        self.released = False
        self._futures: set[asyncio.Future[None]] = set()

    def release_all(self) -> None:
        self.released = True
        for future in self._futures:
            if not future.done():
                future.set_result(None)
        self._futures.clear()


CURRENT_SCOPE: ContextVar[WaitScope | None] = ContextVar("minikafka_wait_scope", default=None)


def spawn_detached(coroutine: Coroutine[Any, Any, T], name: str | None = None) -> asyncio.Task[T]:
    """A task that belongs to no client's connection: its waits never end early because the
    connection whose request started it has closed."""
    context = copy_context()
    context.run(CURRENT_SCOPE.set, None)
    return asyncio.get_running_loop().create_task(coroutine, name=name, context=context)


def client_gone() -> bool:
    scope = CURRENT_SCOPE.get()
    return scope is not None and scope.released


async def wait_released(future: asyncio.Future[None], timeout: float) -> None:
    """Wait until ``future`` is done, ``timeout`` seconds pass, or the client goes away."""
    scope = CURRENT_SCOPE.get()
    if scope is not None:
        if scope.released:
            return
        scope._futures.add(future)
    try:
        await asyncio.wait_for(future, timeout)
    except TimeoutError:
        pass
    finally:
        if scope is not None:
            scope._futures.discard(future)
