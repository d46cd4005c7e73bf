"""Brokers for Kafka's tools to work on: one broker (two log dirs) and a ZooKeeper cluster of three,
each shared by the tests of a module (they use topics, groups and users of their own).

Both run with ACL authorization on and the client principal (User:ANONYMOUS on PLAINTEXT) a
super user: every tool is allowed, and kafka-acls has an authorizer to talk to. The stderr of
the brokers of a failed test is attached to its report."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.broker_process import BrokerProcess
from tests.system.cluster import Cluster
from tests.system.zookeeper import ZooKeeperProcess

AUTHORIZED = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
}
_BROKERS_KEY = pytest.StashKey[list[BrokerProcess]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    module = item.getparent(pytest.Module)
    if not report.failed or module is None:
        return
    for broker in module.stash.get(_BROKERS_KEY, []):
        report.sections.append((f"broker {broker.broker_id} stderr ({broker.stderr_path})",
                                broker.stderr_text(8000)))


@pytest.fixture(scope="module")
def tools_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("tools-broker"), overrides=AUTHORIZED)
    request.node.stash.setdefault(_BROKERS_KEY, []).append(broker)
    try:
        yield broker.start()
    finally:
        broker.close()


@pytest.fixture(scope="module")
def tools_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("tools-cluster")
    zookeeper = ZooKeeperProcess(root / "zookeeper")
    try:
        zookeeper.start()
        cluster = Cluster(root, zookeeper, overrides=AUTHORIZED)
        request.node.stash.setdefault(_BROKERS_KEY, []).extend(cluster.brokers.values())
        try:
            yield cluster.start()
        finally:
            cluster.close()
    finally:
        zookeeper.close()
