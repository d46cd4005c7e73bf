"""One module per API (or per small family of APIs).

A handler module declares ``API_KEY`` (or ``API_KEYS``) and ``async def handle(request, ctx)``
returning the whole response body (or None for a produce with acks=0). Adding an API is adding
a module here: every module of this package is collected, so nothing else lists them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from typing import Any

from protocol import Request

HandlerFn = Callable[[Request, Any], Awaitable[Any]]


def _collect() -> dict[int, HandlerFn]:
    handlers: dict[int, HandlerFn] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        keys = getattr(module, "API_KEYS", None) or ([module.API_KEY] if hasattr(module, "API_KEY") else [])
        for key in keys:
            if key in handlers:
                raise ValueError(f"two handler modules serve API key {key}")
            handlers[key] = module.handle
    return handlers


HANDLERS: dict[int, HandlerFn] = _collect()
