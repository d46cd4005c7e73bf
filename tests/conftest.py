"""Session-wide test settings: only what every kind of test needs (kept light on purpose)."""

from __future__ import annotations

import os
from importlib import metadata
from typing import Any

import pytest

from protocol.messages import check_field_names

# Every message this test run encodes (and every broker it starts) refuses a field name that no
# version of the message has, instead of encoding that field's default.
os.environ["MINIKAFKA_STRICT_FIELD_NAMES"] = "1"
check_field_names(True)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Name the client library versions, since integration results depend on them."""
    found = []
    for distribution in ("kafka-python", "confluent-kafka", "aiokafka"):
        try:
            found.append(f"{distribution} {metadata.version(distribution)}")
        except metadata.PackageNotFoundError:
            continue
    return ["clients: " + ", ".join(found)] if found else []


# The kinds of test whose modules each take minutes (Spark, Docker, a cluster, JVMs) run first,
# the many quick unit modules last: make test runs modules on three workers, and a long module
# picked up last would leave one worker busy alone at the end. Spark's modules form one unit of
# work (below), the longest, so it goes first.
_SLOW_FIRST = ("tests/spark/", "tests/docker/", "tests/interop/", "tests/system/", "tests/integration/")

# Directories whose modules share session fixtures that take long to start (the SparkSession's
# JVM): with --dist loadscope they run on one worker as one unit, so the fixture starts once.
_ONE_UNIT_OF_WORK = ("tests/spark/",)


def _weight(item: pytest.Item) -> int:
    path = item.nodeid
    return next((i for i, prefix in enumerate(_SLOW_FIRST) if path.startswith(prefix)), len(_SLOW_FIRST))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_weight)  # stable: each module's tests keep their order


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """loadscope's scheduling, with each directory of _ONE_UNIT_OF_WORK as one scope."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedSessionScopes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            unit = next((d for d in _ONE_UNIT_OF_WORK if nodeid.startswith(d)), None)
            return unit if unit is not None else str(super()._split_scope(nodeid))

    return SharedSessionScopes(config, log)
