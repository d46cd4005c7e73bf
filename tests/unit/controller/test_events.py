"""The controller's events (events.py) and their dispatch: every event has exactly one handler,
whose parameters are the event's fields, and a request posted to a real controller's queue is
answered by its handler."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from minikafka.config.broker import BrokerConfig
from minikafka.controller import events
from minikafka.controller.events import AllocateProducerIds, ControllerEvent, TopicChanged
from minikafka.controller.zk_controller import ZkController
from minikafka.zk.kafka_zk import KafkaZk
from protocol.errors import ErrorCode

EVENT_TYPES = [t for t in vars(events).values()
               if isinstance(t, type) and issubclass(t, ControllerEvent) and t is not ControllerEvent]


def test_every_event_has_one_handler_and_every_handler_an_event() -> None:
    assert set(ZkController.HANDLERS) == set(EVENT_TYPES)


@pytest.mark.parametrize("event_type", EVENT_TYPES, ids=lambda t: t.__name__)
def test_a_handler_takes_its_events_fields(event_type: type[ControllerEvent]) -> None:
    handler = ZkController.HANDLERS[event_type]
    parameters = list(inspect.signature(handler).parameters)
    assert parameters[0] == "self"
    assert parameters[1:] == [f.name for f in dataclasses.fields(event_type)]  # type: ignore[arg-type]


def test_events_are_immutable_records() -> None:
    event = TopicChanged("orders")
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.topic = "other"  # type: ignore[misc]
    assert not hasattr(event, "__dict__")
    assert event.arguments() == {"topic": "orders"}
    assert event == TopicChanged("orders")


async def test_a_request_is_answered_through_the_queue() -> None:
    # A broker that never stands for controller needs no ZooKeeper to answer that it is not it.
    config = BrokerConfig({"broker.id": "1", "zookeeper.connect": "127.0.0.1:1",
                           "minikafka.controller.eligible": "false"})
    controller = ZkController(config, KafkaZk("127.0.0.1:1", 4000, 4000), "INTERNAL")
    controller.start()
    try:
        assert await controller.allocate_producer_ids(2, 7) == (ErrorCode.NOT_CONTROLLER, range(0))
        assert await controller.list_reassignments(None) is None
        assert await controller._ask(AllocateProducerIds(3, 1)) == (ErrorCode.NOT_CONTROLLER, range(0))
    finally:
        await controller.stop()
