"""The handler table: written out by hand, so these catch a module or an API left out of it."""

from __future__ import annotations

import pkgutil

from minikafka.server import handlers
from minikafka.server.handlers import HANDLERS
from protocol import SUPPORTED_APIS

# Modules of the handlers package that hold shared rules, not an API's handler.
HELPERS = {"authorization", "controller_requests", "leader_hints"}


def test_every_declared_api_has_a_handler() -> None:
    assert sorted(SUPPORTED_APIS) == sorted(HANDLERS)


def test_every_handler_module_serves_an_api_of_the_table() -> None:
    modules = {info.name for info in pkgutil.iter_modules(handlers.__path__)} - HELPERS
    served = {handler.__module__.rsplit(".", 1)[1] for handler in HANDLERS.values()}
    assert modules == served
