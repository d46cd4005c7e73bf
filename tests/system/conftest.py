"""Fixtures of the system tests: a real ZooKeeper and a cluster of real brokers.

Both are closed in teardown, pass or fail; the stderr of every broker of a failed test is
attached to its report."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.system.cluster import Cluster
from tests.system.zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.system
_CLUSTERS_KEY = pytest.StashKey[list[Cluster]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "shared_zookeeper: the tests of this system module share one ZooKeeper, "
                                       "each test's cluster under a chroot of its own")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for cluster in item.stash.get(_CLUSTERS_KEY, []):
            report.sections.append(("cluster brokers' stderr", cluster.stderr()))


def _shares_the_module_cluster(request: pytest.FixtureRequest) -> bool:
    """The module asks for one cluster for all its tests (``pytestmark =
    pytest.mark.shared_cluster(...)``) and this test asks for no settings of its own, nor for a
    cluster of its own (``@pytest.mark.own_cluster``)."""
    own = {m.name for m in request.node.own_markers}
    return request.node.get_closest_marker("shared_cluster") is not None and not own & {
        "cluster_settings", "cluster_metrics", "own_cluster"}


@pytest.fixture(scope="module")
def module_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One ZooKeeper and three brokers for the tests of a module marked ``shared_cluster``:
    starting them takes seconds a test need not pay again. The marker's keyword arguments are
    broker settings (``metrics=True`` serves each broker's Prometheus endpoint)."""
    marker = request.node.get_closest_marker("shared_cluster")
    settings = dict(marker.kwargs) if marker else {}
    metrics = bool(settings.pop("metrics", False))
    root = tmp_path_factory.mktemp("cluster")
    server = ZooKeeperProcess(root / "zookeeper")
    made: Cluster | None = None
    try:
        made = Cluster(root, server.start(), overrides=settings, metrics=metrics)
        yield made.start()
    finally:
        if made is not None:
            made.close()
        server.close()


@pytest.fixture(scope="module")
def module_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """One ZooKeeper for the tests of a module marked ``shared_zookeeper``: its JVM takes
    seconds to start, and a chroot per test keeps their clusters apart."""
    server = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"))
    try:
        yield server.start()
    finally:
        server.close()


def _module_zookeeper(request: pytest.FixtureRequest) -> ZooKeeperProcess | None:
    """The ZooKeeper this test shares with the rest of its module, if it shares one: the module's
    cluster's (a test with a cluster of its own there too), or the module's own (marker
    ``shared_zookeeper``)."""
    if request.node.get_closest_marker("shared_cluster") is not None:
        return request.getfixturevalue("module_cluster").zookeeper
    if request.node.get_closest_marker("shared_zookeeper") is not None:
        return request.getfixturevalue("module_zookeeper")
    return None


@pytest.fixture
def chroot(request: pytest.FixtureRequest) -> str:
    """The ZooKeeper chroot of this test's cluster: one of its own where its module shares
    ZooKeeper and the test does not share the module's cluster."""
    module_wide = {"shared_zookeeper", "shared_cluster"} & {m.name for m in request.node.iter_markers()}
    if module_wide and not _shares_the_module_cluster(request):
        return "/" + re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)
    return "/minikafka"


@pytest.fixture
def zookeeper(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ZooKeeperProcess]:
    """A ZooKeeper of the test's own, or the one it shares with its module, answering whatever
    the test before did to it (paused or stopped it, say)."""
    shared = _module_zookeeper(request)
    if shared is not None:
        shared.resume()
        if shared.process is None:
            shared.start()
        yield shared
        return
    server = ZooKeeperProcess(tmp_path / "zookeeper")
    try:
        yield server.start()
    finally:
        server.close()


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path, zookeeper: ZooKeeperProcess,
            chroot: str) -> Iterator[Cluster]:
    """Three brokers, two log dirs each, started and all in Metadata, under ``chroot``. A test
    that needs other settings marks itself ``@pytest.mark.cluster_settings(key=value, ...)``; one that reads the
    brokers' Prometheus endpoints marks itself ``@pytest.mark.cluster_metrics``. In a module
    marked ``shared_cluster`` every other test gets the module's cluster, restored (every broker
    running and registered), and must use topics of its own."""
    if _shares_the_module_cluster(request):
        shared: Cluster = request.getfixturevalue("module_cluster")
        request.node.stash.setdefault(_CLUSTERS_KEY, []).append(shared)
        yield shared.restore()
        return
    marker = request.node.get_closest_marker("cluster_settings")
    made = Cluster(tmp_path, zookeeper, chroot=chroot, overrides=dict(marker.kwargs) if marker else None,
                   metrics=request.node.get_closest_marker("cluster_metrics") is not None)
    request.node.stash.setdefault(_CLUSTERS_KEY, []).append(made)
    try:
        yield made.start()
    finally:
        made.close()
