"""Bounded waits (long polls) that end early when the client that asked has gone away.

A connection installs its ``WaitScope`` in a context variable; every task it starts for a
request inherits it. A handler that waits (a Fetch long poll, later acks=all and group joins)
waits through ``wait_released`` so that a client closing its side of the connection gets the
answers to what it already sent at once, instead of holding the connection open until
max_wait_ms runs out.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar


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
