"""Certificates for the security tests, made with config/secure/make-certs.sh as the README has
users make theirs, and each client library's settings for TLS and SASL.

``Certs`` names the files of one directory: the authority ``ca.pem``, and per name the broker's
PEM key store ``<name>.pem`` and a client's ``<name>.crt`` / ``<name>.key``. Owned by the test
module that made it (its tmp dir); nothing here starts a process but openssl.
"""

from __future__ import annotations

import logging
import os
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.integration.broker_process import REPO_ROOT

MAKE_CERTS = REPO_ROOT / "config" / "secure" / "make-certs.sh"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class Certs:
    dir: Path

    @property
    def ca(self) -> str:
        return str(self.dir / "ca.pem")

    def keystore(self, name: str) -> str:
        return str(self.dir / f"{name}.pem")

    def cert(self, name: str) -> str:
        return str(self.dir / f"{name}.crt")

    def key(self, name: str) -> str:
        return str(self.dir / f"{name}.key")

    def client_context(self) -> ssl.SSLContext:
        """A TLS client context trusting this authority."""
        return ssl.create_default_context(cafile=self.ca)

    def make(self, *names: str, days: int | None = None, subject_suffix: str = "") -> Certs:
        env = dict(os.environ, SUBJECT_SUFFIX=subject_suffix)
        if days is not None:
            env["DAYS"] = str(days)
        subprocess.run(["sh", str(MAKE_CERTS), str(self.dir), *names], env=env, check=True, capture_output=True)
        return self


def jaas(module: str, **options: str) -> str:
    return f"{module} required " + " ".join(f'{key}="{value}"' for key, value in options.items()) + ";"


def confluent_tls(certs: Certs, client: str | None = None) -> dict[str, str]:
    conf = {"security.protocol": "SSL", "ssl.ca.location": certs.ca}
    if client is not None:
        conf |= {"ssl.certificate.location": certs.cert(client), "ssl.key.location": certs.key(client)}
    return conf


def kafka_python_tls(certs: Certs, client: str | None = None) -> dict[str, object]:
    conf: dict[str, object] = {"security_protocol": "SSL", "ssl_cafile": certs.ca, "ssl_check_hostname": True}
    if client is not None:
        conf |= {"ssl_certfile": certs.cert(client), "ssl_keyfile": certs.key(client)}
    return conf


def confluent_sasl(mechanism: str, user: str, password: str, certs: Certs | None = None) -> dict[str, str]:
    conf = {"security.protocol": "SASL_SSL" if certs else "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}
    return conf | ({"ssl.ca.location": certs.ca} if certs else {})


def kafka_python_sasl(mechanism: str, user: str, password: str, certs: Certs | None = None) -> dict[str, object]:
    conf: dict[str, object] = {"security_protocol": "SASL_SSL" if certs else "SASL_PLAINTEXT",
                               "sasl_mechanism": mechanism, "sasl_plain_username": user,
                               "sasl_plain_password": password}
    return conf | ({"ssl_cafile": certs.ca} if certs else {})


def kcat_args(conf: dict[str, str]) -> list[str]:
    """confluent-kafka's (librdkafka's) settings as kcat -X arguments."""
    return [arg for key, value in conf.items() for arg in ("-X", f"{key}={value}")]


def confluent_refusal(bootstrap: str, conf: dict[str, str], timeout: float = 20.0) -> str:
    """The error librdkafka reports for a client the broker refuses (fails if it is let in)."""
    import time

    import confluent_kafka
    from confluent_kafka.admin import AdminClient

    errors: list[str] = []
    quiet = logging.getLogger("tests.refused-client")
    quiet.propagate = False
    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": lambda err: errors.append(str(err)),
                         "reconnect.backoff.max.ms": 500, "logger": quiet, **conf})
    deadline = time.monotonic() + timeout
    while not errors:
        try:
            admin.list_topics(timeout=0.5)
        except confluent_kafka.KafkaException:
            pass
        else:
            raise AssertionError(f"the broker let a client in with {conf}")
        admin.poll(0.1)  # error_cb is called from poll
        if time.monotonic() > deadline:
            raise TimeoutError(f"no error reported for {conf}")
    return errors[0]
