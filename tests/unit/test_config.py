import pytest

from minikafka.config import BrokerConfig, ConfigError, parse_listener, read_properties


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
     ("listeners", "127.0.0.1"), ("log.message.timestamp.type", "Now"), ("metrics.port", "70000")],
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
