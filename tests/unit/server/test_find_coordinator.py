"""FindCoordinator names the leader of the key's partition as the broker's metadata has it, as
Kafka's does, also when that leader is the broker asked and its coordinator is not coordinating
the partition (still loading it, or just given it up): the group's own requests say so."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

from minikafka.controller.embedded import OFFSETS_TOPIC
from minikafka.metadata.cache import BrokerInfo
from minikafka.server.context import BrokerContext
from minikafka.server.handlers.find_coordinator import GROUP_KEY_TYPE, _lookup
from protocol.errors import ErrorCode
from tests.unit.group.test_offsets_topic import Stack


class AllowAll:
    """Authorization is another module's (security/): here every principal may describe."""

    def allowed(self, *_: object) -> bool:
        return True


def test_the_leader_is_named_while_its_coordinator_does_not_coordinate_the_partition(tmp_path: Path) -> None:
    stack = Stack(tmp_path)
    try:
        stack.controller.create_internal_topic_now(OFFSETS_TOPIC)
        stack.controller.metadata.set_brokers([BrokerInfo(1, {"PLAINTEXT": ("127.0.0.1", 9092)})], 1)
        # The broker's ZooKeeper session ended: it stopped leading what it cannot confirm, and
        # its metadata still names it until the controller's news comes.
        stack.replica_manager.resign_leaderships()
        assert stack.coordinator.partition_error("g") == ErrorCode.NOT_COORDINATOR
        ctx = cast(BrokerContext, SimpleNamespace(
            metadata=stack.controller.metadata, groups=stack.coordinator, session=AllowAll(),
            listener_name="PLAINTEXT", broker_id=1))
        found = _lookup("g", GROUP_KEY_TYPE, ctx)
        assert (found["error_code"], found["node_id"]) == (ErrorCode.NONE, 1), found
    finally:
        stack.close()
