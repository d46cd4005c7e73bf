"""The tools' side of security: kafka-configs' --add-config syntax and --command-config files."""

import pytest

from minikafka.tools.client import ClientSecurity, ToolError
from minikafka.tools.users import Upsertion, parse_add_config, parse_delete_config


def test_add_config_is_kafkas_syntax():
    assert parse_add_config("SCRAM-SHA-256=[iterations=8192,password=a,b],SCRAM-SHA-512=[password=x=y]") == [
        Upsertion("SCRAM-SHA-256", "a", 8192), Upsertion("SCRAM-SHA-512", "x=y", 4096)]


@pytest.mark.parametrize("bad", ["SCRAM-SHA-1=[password=x]", "SCRAM-SHA-256=[iterations=8192]",
                                 "SCRAM-SHA-256=[password=x,salt=y]", "SCRAM-SHA-256=[password=x,iterations=10]",
                                 "SCRAM-SHA-256=password"])
def test_bad_add_config_says_what_is_wrong(bad):
    with pytest.raises(ToolError, match="--add-config"):
        parse_add_config(bad)


def test_delete_config():
    assert parse_delete_config("SCRAM-SHA-512, SCRAM-SHA-256") == ["SCRAM-SHA-512", "SCRAM-SHA-256"]
    with pytest.raises(ToolError, match="PLAIN"):
        parse_delete_config("PLAIN")


def test_command_config(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
                    'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";\n')
    security = ClientSecurity.from_file(str(path))
    assert security.tls is None and security.login is not None
    assert (security.login.mechanism, security.login.username, security.login.password) == ("SCRAM-SHA-512", "a", "b")
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n")
    with pytest.raises(ToolError, match="sasl.mechanism"):
        ClientSecurity.from_file(str(path))
    with pytest.raises(ToolError, match="cannot read"):
        ClientSecurity.from_file(str(tmp_path / "missing"))
