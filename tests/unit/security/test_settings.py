"""Security settings that cannot be used stop the broker with a message naming the key."""

import pytest

from minikafka.config.broker import BrokerConfig, ConfigError
from minikafka.security.manager import BrokerSecurity
from minikafka.security.tls import openssl_cipher_name

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'


def security(settings: dict[str, str]) -> BrokerSecurity:
    raw = dict(settings)
    raw["listeners"] = "PLAINTEXT://127.0.0.1:9092," + raw.pop("listener", "SSL://127.0.0.1:9093")
    return BrokerSecurity(BrokerConfig(raw))


@pytest.mark.parametrize("settings,key", [
    ({}, "ssl.keystore.location"),  # a TLS listener needs a key store
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
    ({"ssl.keystore.location": "/no/such.pem"}, "ssl.keystore.location"),
    ({"ssl.keystore.location": "/no/such.pem", "ssl.keystore.password": "x"}, "ssl.keystore.password"),
    ({"ssl.truststore.location": "/no/such.pem"}, "ssl.truststore.location"),
    ({"ssl.cipher.suites": "TLS_NO_SUCH_SUITE"}, "ssl.cipher.suites"),
    ({"ssl.principal.mapping.rules": "RULE:broken"}, "ssl.principal.mapping.rules"),
    ({"ssl.enabled.protocols": "TLSv1"}, "ssl.enabled.protocols"),
    ({"ssl.enabled.protocols": "TLSv1.3", "ssl.protocol": "TLSv1.2", "ssl.keystore.location": "/no/such.pem"},
     "ssl.protocol"),
    ({"listener.name.ssl.ssl.client.auth": "maybe"}, "listener.name.ssl.ssl.client.auth"),
    ({"listener": "SASL_PLAINTEXT://127.0.0.1:9093"}, "sasl.enabled.mechanisms"),  # GSSAPI, Kafka's default
    ({"listener": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "PLAIN"},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({"listener": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": "PlainLoginModule required user_a=;"},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ({"listener": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
      "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"},
     "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"),
    ({"listener": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
      "inter.broker.listener.name": "SASL_PLAINTEXT"}, "sasl.mechanism.inter.broker.protocol"),
    ({"listener": "PLAINTEXT2://127.0.0.1:9093", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
      "PLAINTEXT2:PLAINTEXT", "super.users": "admin"}, "super.users"),
    ({"authorizer.class.name": "com.example.MyAuthorizer", "listener": "X://127.0.0.1:9093",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,X:PLAINTEXT"}, "authorizer.class.name"),
])
def test_an_unusable_setting_names_its_key(settings, key):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        security(settings)


def test_iana_cipher_names_are_openssls():
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384") == "ECDHE-RSA-AES256-GCM-SHA384"
    assert openssl_cipher_name("TLS_RSA_WITH_AES_128_CBC_SHA256") == "AES128-SHA256"
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == "ECDHE-ECDSA-CHACHA20-POLY1305"
    assert openssl_cipher_name("TLS_DHE_RSA_WITH_AES_256_CCM") == "DHE-RSA-AES256-CCM"
    assert openssl_cipher_name("ECDHE-RSA-AES128-GCM-SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
