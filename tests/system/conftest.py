"""Fixtures of the system tests: a real ZooKeeper and a cluster of real brokers.

Both are closed in teardown, pass or fail; the stderr of every broker of a failed test is
attached to its report."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.system.cluster import Cluster
from tests.system.zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.system
_CLUSTERS_KEY = pytest.StashKey[list[Cluster]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for cluster in item.stash.get(_CLUSTERS_KEY, []):
            report.sections.append(("cluster brokers' stderr", cluster.stderr()))


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperProcess]:
    server = ZooKeeperProcess(tmp_path / "zookeeper")
    try:
        yield server.start()
    finally:
        server.close()


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path, zookeeper: ZooKeeperProcess) -> Iterator[Cluster]:
    """Three brokers, two log dirs each, started and all in Metadata. A test that needs other
    settings marks itself ``@pytest.mark.cluster_settings(key=value, ...)``; one that reads the
    brokers' Prometheus endpoints marks itself ``@pytest.mark.cluster_metrics``."""
    marker = request.node.get_closest_marker("cluster_settings")
    made = Cluster(tmp_path, zookeeper, overrides=dict(marker.kwargs) if marker else None,
                   metrics=request.node.get_closest_marker("cluster_metrics") is not None)
    request.node.stash.setdefault(_CLUSTERS_KEY, []).append(made)
    try:
        yield made.start()
    finally:
        made.close()
