"""Fixtures that start real minikafka brokers; reusable by tests/system.

Every broker made here is closed in teardown, pass or fail, and the stderr of every broker a
failed test used is attached to the failure report as a section of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.disk_faults import Tmpfs

_BROKERS_KEY = pytest.StashKey[list[BrokerProcess]]()


def _remember(node: pytest.Item | pytest.Module, broker: BrokerProcess) -> None:
    node.stash.setdefault(_BROKERS_KEY, []).append(broker)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    brokers = list(item.stash.get(_BROKERS_KEY, []))
    module = item.getparent(pytest.Module)
    if module is not None:
        brokers += module.stash.get(_BROKERS_KEY, [])
    for broker in brokers:
        report.sections.append((f"broker stderr {broker.bootstrap} ({broker.stderr_path})", broker.stderr_text()))


BrokerFactory = Callable[..., BrokerProcess]


@pytest.fixture
def broker_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerFactory]:
    """make(**BrokerProcess kwargs) -> a started broker in its own dir under tmp_path."""
    made: list[BrokerProcess] = []

    def make(**kwargs) -> BrokerProcess:
        broker = BrokerProcess(tmp_path / f"broker{len(made) + 1}", **kwargs)
        made.append(broker)
        _remember(request.node, broker)
        return broker.start()

    try:
        yield make
    finally:
        for broker in made:
            broker.close()


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    """A fresh single broker (two log dirs) for one test."""
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the tests of a module; tests must use topics of their own."""
    broker = BrokerProcess(tmp_path_factory.mktemp("module-broker"))
    _remember(request.node, broker)
    try:
        yield broker.start()
    finally:
        broker.close()


@pytest.fixture
def tmpfs_mounts() -> Iterator[list[Tmpfs]]:
    """tmpfs mounts a disk-fault test makes; unmounted afterwards, after its brokers are closed."""
    mounts: list[Tmpfs] = []
    yield mounts
    for tmpfs in mounts:
        tmpfs.close()


@pytest.fixture
def made_brokers(tmpfs_mounts: list[Tmpfs]) -> Iterator[list[BrokerProcess]]:
    """Brokers a disk-fault test starts: closed afterwards, before any tmpfs is unmounted; their
    stderr is printed (shown on failure)."""
    brokers: list[BrokerProcess] = []
    yield brokers
    for broker in brokers:
        broker.close()
        print(f"---- broker stderr ({broker.stderr_path})\n{broker.stderr_text()}")
