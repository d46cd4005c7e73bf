"""Produce requests pipelined on one connection reach the log in the order they arrived, even
when an earlier one waits before appending (a resigned leader's partition, a transaction's
verification) and a later one would not: the later batch would otherwise fail on its sequence
number (OUT_OF_ORDER_SEQUENCE_NUMBER), which librdkafka takes as a fatal error."""

from __future__ import annotations

import asyncio
from typing import cast

from minikafka.security.session import Session
from minikafka.server.handlers.produce import _in_arrival_order


class _Connection:
    """Stands for one connection's Session: the order is kept per connection object."""


async def test_a_later_request_appends_only_after_an_earlier_one_that_waits() -> None:
    connection, other = cast(Session, _Connection()), cast(Session, _Connection())
    appended: list[str] = []
    leadership_back = asyncio.Event()

    async def request(name: str, session: Session, wait: asyncio.Event | None = None) -> None:
        async with _in_arrival_order(session):
            if wait is not None:
                await wait.wait()
            appended.append(name)

    first = asyncio.ensure_future(request("first", connection, leadership_back))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(request("second", connection))
    elsewhere = asyncio.ensure_future(request("other connection", other))
    await asyncio.sleep(0.05)
    assert appended == ["other connection"], "another connection does not wait"
    leadership_back.set()
    await asyncio.wait_for(asyncio.gather(first, second, elsewhere), 5)
    assert appended == ["other connection", "first", "second"]
    # Once all have appended, the next one goes at once.
    await asyncio.wait_for(request("third", connection), 1)
    assert appended[-1] == "third"
