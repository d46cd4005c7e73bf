import logging

import pytest

from minikafka.config.broker import (
    BrokerConfig,
    ConfigError,
    ConfigSource,
    Listener,
    parse_listener,
    read_properties,
)


def test_defaults_are_the_embedded_broker():
    config = BrokerConfig({})
    assert config.listener() == ("127.0.0.1", 9092)
    assert config.log_dirs == ["./data/d1", "./data/d2"]
    assert config.embedded
    assert config["num.partitions"] == 1


def test_properties_file_syntax():
    text = "# comment\n! also a comment\nbroker.id = 3\nlog.dirs:/a,\\\n  /b\n\nnum.partitions 4\n"
    assert read_properties(text) == {"broker.id": "3", "log.dirs": "/a,/b", "num.partitions": "4"}


def test_file_then_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=2\nnum.partitions=3\n")
    config = BrokerConfig.load(path, ["num.partitions=8", "log.dir=/x"])
    assert config.broker_id == 2
    assert config["num.partitions"] == 8
    assert config.log_dirs == ["/x"]
    assert config.explicit == {"broker.id", "num.partitions", "log.dirs"}


@pytest.mark.parametrize(
    "key,value",
    [("num.partitions", "zero"), ("num.partitions", "0"), ("auto.create.topics.enable", "yes"),
     ("listeners", "127.0.0.1"), ("log.message.timestamp.type", "Now"), ("metrics.port", "70000"),
     ("group.coordinator.rebalance.protocols", "consumer"), ("group.consumer.assignors", "sticky"),
     ("group.consumer.session.timeout.ms", "0")],
)
def test_bad_value_names_the_key(key, value):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig({key: value})


def test_unknown_key_is_a_warning(caplog):
    BrokerConfig({"no.such.key": "1"})
    assert "no.such.key" in caplog.text


def test_override_without_equals_is_refused():
    with pytest.raises(ConfigError, match="key=value"):
        BrokerConfig.load(None, ["broker.id"])


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read configuration file"):
        BrokerConfig.load(tmp_path / "nope.properties")


def test_listeners():
    assert parse_listener("PLAINTEXT://0.0.0.0:19092") == ("0.0.0.0", 19092)
    assert parse_listener("INTERNAL://[::1]:9093") == ("::1", 9093)
    assert BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0"}).advertised_listener(5555) == ("127.0.0.1", 5555)


def test_named_listeners_take_their_protocol_from_the_map():
    config = BrokerConfig({
        "listeners": "INTERNAL://10.0.0.5:9093,EXTERNAL://:9092",
        "advertised.listeners": "EXTERNAL://kafka.example.com:19092",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
    })
    assert config.listeners() == [Listener("INTERNAL", "PLAINTEXT", "10.0.0.5", 9093),
                                  Listener("EXTERNAL", "PLAINTEXT", "", 9092)]
    # advertised.listeners replaces only the listener it names; the other is advertised as bound
    assert config.advertised_listeners() == [Listener("INTERNAL", "PLAINTEXT", "10.0.0.5", 9093),
                                             Listener("EXTERNAL", "PLAINTEXT", "kafka.example.com", 19092)]
    assert config.inter_broker_listener_name == "INTERNAL"
    assert config.listener() == ("10.0.0.5", 9093)
    assert config.advertised_listener() == ("10.0.0.5", 9093)


def test_advertised_port_zero_is_the_bound_one_per_listener_name():
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
                           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT"})
    assert [(a.name, a.port) for a in config.advertised_listeners({"PLAINTEXT": 4001, "REPLICATION": 4002})] == [
        ("PLAINTEXT", 4001), ("REPLICATION", 4002)]
    assert config.inter_broker_listener_name == "PLAINTEXT"


@pytest.mark.parametrize("listeners,protocol_map,protocol", [
    ("SSL://127.0.0.1:9093", None, "SSL"),
    ("SASL_PLAINTEXT://127.0.0.1:9093", None, "SASL_PLAINTEXT"),
    ("SASL_SSL://127.0.0.1:9093", None, "SASL_SSL"),
    ("PLAINTEXT://127.0.0.1:9092,SECURE://127.0.0.1:9093", "PLAINTEXT:PLAINTEXT,SECURE:SSL", "SSL"),
])
def test_secured_listeners_have_their_security_protocol(listeners, protocol_map, protocol):
    name = listeners.rsplit(",", 1)[-1].split(":")[0]
    raw = {"listeners": listeners, "inter.broker.listener.name": name,
           **({"listener.security.protocol.map": protocol_map} if protocol_map else {})}
    assert BrokerConfig(raw).security_protocol_of(name) == protocol


def test_security_inter_broker_protocol_names_the_inter_broker_listener():
    config = BrokerConfig({"listeners": "SASL_SSL://127.0.0.1:9093", "security.inter.broker.protocol": "SASL_SSL"})
    assert config.inter_broker_listener_name == "SASL_SSL"


def test_per_listener_keys_override_the_broker_wide_ones(caplog):
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
                           "ssl.client.auth": "requested", "listener.name.ssl.ssl.client.auth": "required",
                           "listener.name.ssl.plain.sasl.jaas.config": "module required;",
                           "listener.name.ssl.log.dirs": "/x"})
    assert config.listener_value("SSL", "ssl.client.auth") == "required"
    assert config.listener_value("PLAINTEXT", "ssl.client.auth") == "requested"
    assert config.listener_key("SSL", "ssl.client.auth") == "listener.name.ssl.ssl.client.auth"
    assert config.jaas_config("SSL", "PLAIN") == "module required;"
    assert "listener.name.ssl.log.dirs" in caplog.text  # not a key that can be set per listener
    with pytest.raises(ConfigError, match="'listener.name.ssl.ssl.client.auth'"):
        BrokerConfig({"listener.name.ssl.ssl.client.auth": "always"})


@pytest.mark.parametrize("raw,key", [
    ({"listeners": "CLIENT://127.0.0.1:9092"}, "listeners"),  # CLIENT is not in the default map
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map"),
    ({"listener.security.protocol.map": "PLAINTEXT"}, "listener.security.protocol.map"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"}, "listeners"),
    ({"listeners": "127.0.0.1:9092"}, "listeners"),
    ({"listeners": ""}, "listeners"),
    ({"advertised.listeners": "EXTERNAL://example.com:9092"}, "advertised.listeners"),
    ({"inter.broker.listener.name": "REPLICATION"}, "inter.broker.listener.name"),
    # Kafka's default names the PLAINTEXT listener; without one the key must be given
    ({"listeners": "CLIENT://127.0.0.1:9092", "listener.security.protocol.map": "CLIENT:PLAINTEXT"},
     "inter.broker.listener.name"),
])
def test_bad_listener_settings_name_the_key(raw, key):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        BrokerConfig(raw)


@pytest.mark.parametrize("raw,key", [
    # Kafka refuses to advertise the meta-address: clients would be told to connect to it.
    ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "listeners"),
    ({"listeners": "PLAINTEXT://[::]:9092"}, "listeners"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
     "advertised.listeners"),
    ({"listeners": "PLAINTEXT://0.0.0.0:9092,INTERNAL://0.0.0.0:9093",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
      "advertised.listeners": "PLAINTEXT://example.com:9092"}, "listeners"),
])
def test_an_unspecified_address_advertised_is_refused_naming_the_key(raw, key):
    with pytest.raises(ConfigError, match=f"for configuration '{key}'.*(routable|reach)"):
        BrokerConfig(raw)


def test_listening_on_every_address_is_fine_when_a_routable_host_is_advertised():
    config = BrokerConfig({"listeners": "PLAINTEXT://0.0.0.0:9092,INTERNAL://[::]:9093",
                           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                           "advertised.listeners": "PLAINTEXT://example.com:9092,INTERNAL://broker-1:9093"})
    assert [(a.host, a.port) for a in config.advertised_listeners()] == [("example.com", 9092), ("broker-1", 9093)]


# Apache Kafka 3.x's config/server.properties (ZooKeeper mode), reduced to its settings.
KAFKA_STOCK_SERVER_PROPERTIES = """\
broker.id=0
#listeners=PLAINTEXT://:9092
#advertised.listeners=PLAINTEXT://your.host.name:9092
#listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""


def test_kafkas_stock_server_properties_mean_the_same_here(tmp_path, caplog):
    path = tmp_path / "server.properties"
    path.write_text(KAFKA_STOCK_SERVER_PROPERTIES)
    caplog.set_level(logging.INFO, logger="minikafka.config.broker")
    config = BrokerConfig.load(path, ["log.retention.hours=24"])
    assert not [record for record in caplog.records if record.levelname == "WARNING"], caplog.text
    assert "num.network.threads" in caplog.text  # named as a Kafka key that has no effect here
    assert config["log.retention.ms"] == 24 * 3600 * 1000
    assert config["log.roll.ms"] == 168 * 3600 * 1000
    assert config["log.retention.check.interval.ms"] == 300_000
    assert config["group.initial.rebalance.delay.ms"] == 0
    assert config.log_dirs == ["/tmp/kafka-logs"]
    assert config.broker_id == 0 and not config.embedded


@pytest.mark.parametrize("raw,retention_ms", [
    ({"log.retention.hours": "1"}, 3_600_000),
    ({"log.retention.minutes": "5", "log.retention.hours": "1"}, 300_000),
    ({"log.retention.ms": "42", "log.retention.minutes": "5", "log.retention.hours": "1"}, 42),
    ({"log.retention.hours": "-1"}, -1),
    ({"log.retention.minutes": "-5"}, -1),
    ({}, 7 * 24 * 3_600_000),
])
def test_retention_in_any_unit_with_kafkas_precedence(raw, retention_ms):
    config = BrokerConfig(raw)
    assert config["log.retention.ms"] == retention_ms
    assert (config.source_of("log.retention.ms") == ConfigSource.STATIC_BROKER_CONFIG) == bool(raw)


def test_roll_in_hours_unless_given_in_ms():
    assert BrokerConfig({"log.roll.hours": "2"})["log.roll.ms"] == 7_200_000
    assert BrokerConfig({"log.roll.hours": "2", "log.roll.ms": "1000"})["log.roll.ms"] == 1000
    with pytest.raises(ConfigError, match="'log.roll.hours'"):
        BrokerConfig({"log.roll.hours": "0"})


def test_unknown_key_suggests_the_nearest_known_one(caplog):
    BrokerConfig({"num.partition": "3", "log.retention.hour": "1", "completely.different": "x"})
    assert "'num.partition' ignored (did you mean num.partitions?)" in caplog.text
    assert "'log.retention.hour' ignored (did you mean log.retention.hours?)" in caplog.text
    assert "'completely.different' ignored\n" in caplog.text + "\n"


@pytest.mark.parametrize("text", ["zero", "1_000", "1.5", "", "12abc"])
def test_a_number_that_does_not_parse_names_key_and_value_not_python(text):
    with pytest.raises(ConfigError) as refused:
        BrokerConfig({"num.partitions": text})
    assert str(refused.value) == f"invalid value {text!r} for configuration 'num.partitions': expected a whole number"


@pytest.mark.parametrize("second", ["{d}", "{d}/", "{d}/../d1", "{link}"])
def test_the_same_log_dir_twice_is_refused(tmp_path, second):
    log_dir = tmp_path / "d1"
    log_dir.mkdir()
    (tmp_path / "link").symlink_to(log_dir)
    other = second.format(d=log_dir, link=tmp_path / "link")
    with pytest.raises(ConfigError, match=r"'log\.dirs': .* are the same directory") as refused:
        BrokerConfig({"log.dirs": f"{log_dir},{tmp_path / 'd2'},{other}"})
    assert "\n" not in str(refused.value)


def test_distinct_log_dirs_that_do_not_exist_yet_are_fine(tmp_path):
    assert BrokerConfig({"log.dirs": f"{tmp_path}/a,{tmp_path}/b"}).log_dirs == [f"{tmp_path}/a", f"{tmp_path}/b"]


def test_kafka_image_variables_become_settings(caplog: pytest.LogCaptureFixture) -> None:
    from minikafka.config.broker import overrides_from_environment

    environment = {"KAFKA_BROKER_ID": "2", "KAFKA_ZOOKEEPER_CONNECT": "zookeeper:2181",
                   "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://127.0.0.1:9093", "KAFKA_HEAP_OPTS": "-Xmx1G",
                   "KAFKA_SOME__KEY___NAME": "x", "PATH": "/usr/bin", "MINIKAFKA_LOG_LEVEL": "INFO"}
    overrides = overrides_from_environment(environment)
    assert overrides == ["advertised.listeners=PLAINTEXT://127.0.0.1:9093", "broker.id=2", "some_key-name=x",
                         "zookeeper.connect=zookeeper:2181"]
    config = BrokerConfig.load(None, overrides)
    assert config.broker_id == 2 and config["zookeeper.connect"] == "zookeeper:2181"
    # A variable naming no setting is reported, naming the key, like any unknown key.
    assert "'some_key-name' ignored" in caplog.text


def test_disk_balancer_settings_are_dynamic_and_checked() -> None:
    config = BrokerConfig({})
    assert (config["log.dirs.balancer.enable"], config["log.dirs.balancer.threshold.percent"],
            config["log.dirs.balancer.interval.ms"]) == (False, 10.0, 30_000)
    changed = config.parse_dynamic({"log.dirs.balancer.enable": "true", "log.dirs.balancer.threshold.percent": "2.5",
                                    "log.dirs.balancer.interval.ms": "500"})
    assert changed == {"log.dirs.balancer.enable": True, "log.dirs.balancer.threshold.percent": 2.5,
                       "log.dirs.balancer.interval.ms": 500}
    for text, why in (("101", "must be between 0 and 100"), ("-1", "must be between 0 and 100"),
                      ("ten", "expected a number"), ("nan", "expected a number"), ("1_0", "expected a number")):
        with pytest.raises(ConfigError) as refused:
            BrokerConfig({"log.dirs.balancer.threshold.percent": text})
        assert str(refused.value) == (f"invalid value {text!r} for configuration "
                                      f"'log.dirs.balancer.threshold.percent': {why}")
    assert BrokerConfig({"log.dirs.balancer.threshold.percent": ".5"})["log.dirs.balancer.threshold.percent"] == 0.5
