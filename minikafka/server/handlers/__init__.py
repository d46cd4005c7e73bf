"""One module per API. Each has ``API_KEY`` and ``async def handle(request, ctx)`` returning the
whole response body (or None for a produce with acks=0)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

from minikafka.server.context import BrokerContext
from minikafka.server.handlers import (
    api_versions,
    create_topics,
    describe_cluster,
    describe_configs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
)
from protocol import Request

HandlerFn = Callable[[Request, BrokerContext], Awaitable[Any]]

_MODULES: list[ModuleType] = [
    api_versions,
    create_topics,
    describe_cluster,
    describe_configs,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
]

HANDLERS: dict[int, HandlerFn] = {module.API_KEY: module.handle for module in _MODULES}
