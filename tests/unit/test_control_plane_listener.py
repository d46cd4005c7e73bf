"""control.plane.listener.name (KIP-291): checked as Kafka checks it, registered as Kafka registers
it (one more endpoint in /brokers/ids), and the listener the controller's channels connect to."""

from __future__ import annotations

import asyncio
import json

import pytest

from minikafka.config.broker import BrokerConfig, ConfigError
from minikafka.controller.zk_controller import ZkController
from minikafka.security.client import ClientSecurity
from minikafka.zk.kafka_zk import BrokerRegistration, KafkaZk

LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093,CONTROL://127.0.0.1:9094",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROL:SSL",
    "inter.broker.listener.name": "INTERNAL",
}


def test_the_named_listener_is_the_control_plane() -> None:
    config = BrokerConfig({**LISTENERS, "control.plane.listener.name": "control"})
    assert config.control_plane_listener_name == "CONTROL"
    assert config.security_protocol_of("CONTROL") == "SSL"
    assert BrokerConfig(LISTENERS).control_plane_listener_name is None


@pytest.mark.parametrize("value,why", [
    ("REPLICATION", "it must name one of the listeners"),
    ("INTERNAL", "it must differ from the inter-broker listener"),
])
def test_a_bad_control_plane_listener_names_the_key(value: str, why: str) -> None:
    with pytest.raises(ConfigError, match=f"'control.plane.listener.name': {why}"):
        BrokerConfig({**LISTENERS, "control.plane.listener.name": value})


def test_it_is_registered_as_kafka_registers_it() -> None:
    """Kafka's broker lists every advertised listener, the control-plane one included, in the
    endpoints and the protocol map of /brokers/ids/N; host and port are the PLAINTEXT one's."""
    config = BrokerConfig({**LISTENERS, "control.plane.listener.name": "CONTROL"})
    endpoints = {e.name: (e.host, e.port, e.security_protocol) for e in config.advertised_listeners()}
    written = json.loads(BrokerRegistration(1, endpoints).encode())
    assert written["endpoints"] == ["PLAINTEXT://127.0.0.1:9092", "INTERNAL://127.0.0.1:9093",
                                    "CONTROL://127.0.0.1:9094"]
    assert written["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT",
                                                         "CONTROL": "SSL"}
    assert (written["host"], written["port"]) == ("127.0.0.1", 9092)
    assert BrokerRegistration.decode(1, json.dumps(written).encode(), 7).endpoint("CONTROL") == ("127.0.0.1", 9094)


def _registration(broker_id: int, control: bool) -> BrokerRegistration:
    endpoints = {"PLAINTEXT": ("127.0.0.1", 9000 + broker_id, "PLAINTEXT"),
                 "INTERNAL": ("127.0.0.1", 9100 + broker_id, "PLAINTEXT")}
    if control:
        endpoints["CONTROL"] = ("127.0.0.1", 9200 + broker_id, "SSL")
    return BrokerRegistration(broker_id, endpoints, epoch=broker_id)


def test_the_controller_connects_to_the_control_plane_listener_where_a_broker_has_one() -> None:
    control_security = ClientSecurity(None, None)
    config = BrokerConfig({**LISTENERS, "control.plane.listener.name": "CONTROL", "broker.id": "1"})

    async def channels() -> dict[int, tuple[tuple[str, int], ClientSecurity]]:
        controller = ZkController(config, KafkaZk("127.0.0.1:1", 4000, 4000), "INTERNAL",
                                  control_plane_security=control_security)
        try:
            controller._open_channel(1, _registration(1, control=True))
            controller._open_channel(2, _registration(2, control=False))  # not rolled to the setting yet
            return {b: ((c.client.host, c.client.port), c.client.security)
                    for b, c in controller.channels.channels.items()}
        finally:
            await controller.channels.close()

    opened = asyncio.run(channels())
    assert opened[1] == (("127.0.0.1", 9201), control_security)
    assert opened[2][0] == ("127.0.0.1", 9102)  # its inter-broker listener
    assert opened[2][1] is not control_security
