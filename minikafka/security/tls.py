"""TLS contexts from Kafka's ssl.* keys: a listener's server context, and the client context a
broker connects to other brokers with.

Key and trust stores are PEM only: a file (``ssl.keystore.location`` holding the private key and
its certificate chain, ``ssl.truststore.location`` the CA certificates) or the PEM text inline
(``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``, ``ssl.truststore.certificates``).
Every key may be given per listener (``listener.name.<listener>.ssl.*``). A setting that cannot
be used is a ``ConfigError`` naming the key, raised when the broker starts.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from dataclasses import dataclass
from typing import Any

from minikafka.config.broker import BrokerConfig, ConfigError
from minikafka.security.principal import MappingRule, parse_mapping_rules

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


@dataclass(frozen=True)
class TlsSettings:
    """The ssl.* settings of one listener (its per-listener values over the broker's)."""

    listener: str
    keystore_location: str
    keystore_password: str
    key_password: str
    certificate_chain: str
    private_key: str
    truststore_location: str
    truststore_certificates: str
    client_auth: str
    protocols: tuple[str, ...]
    protocol: str  # ssl.protocol: the newest version used ("TLS": the newest enabled)
    cipher_suites: tuple[str, ...]
    check_hostname: bool
    mapping_rules: tuple[MappingRule, ...]
    # The name each setting was read from, so that an error names the key the operator wrote.
    keys: dict[str, str]

    @classmethod
    def of_listener(cls, config: BrokerConfig, listener: str) -> TlsSettings:
        """The listener's settings. As in Kafka (KIP-684), a SASL_SSL listener asks for client
        certificates only when told so for itself (listener.name.<l>.ssl.client.auth)."""
        keys: dict[str, str] = {}

        def value(key: str) -> Any:
            keys[key] = config.listener_key(listener, key)
            return config.listener_value(listener, key)

        rules_text = str(value("ssl.principal.mapping.rules"))
        try:
            rules = parse_mapping_rules(rules_text)
        except ValueError as exc:
            raise ConfigError(f"invalid value {rules_text!r} for configuration "
                              f"{keys['ssl.principal.mapping.rules']!r}: {exc}") from None
        return cls(
            listener=listener,
            keystore_location=str(value("ssl.keystore.location")),
            keystore_password=str(value("ssl.keystore.password")),
            key_password=str(value("ssl.key.password")),
            certificate_chain=str(value("ssl.keystore.certificate.chain")),
            private_key=str(value("ssl.keystore.key")),
            truststore_location=str(value("ssl.truststore.location")),
            truststore_certificates=str(value("ssl.truststore.certificates")),
            client_auth=str(value("ssl.client.auth")) if config.security_protocol_of(listener) == "SSL"
            or "ssl.client.auth" in config.per_listener.get(listener.upper(), {}) else "none",
            protocols=tuple(value("ssl.enabled.protocols")),
            protocol=str(value("ssl.protocol")),
            cipher_suites=tuple(value("ssl.cipher.suites")),
            check_hostname=str(value("ssl.endpoint.identification.algorithm")).lower() == "https",
            mapping_rules=rules,
            keys=keys,
        )

    def _error(self, key: str, why: str) -> ConfigError:
        return ConfigError(f"listener {self.listener}: configuration {self.keys.get(key, key)!r}: {why}")

    def server_context(self) -> ssl.SSLContext:
        """The context of a TLS listener: its key store is required."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._configure(context, ssl.Purpose.CLIENT_AUTH)
        if not self._has_keystore():
            raise self._error("ssl.keystore.location", "a TLS listener needs its private key and certificate: set "
                              "ssl.keystore.location (a PEM file) or ssl.keystore.certificate.chain and "
                              "ssl.keystore.key")
        context.verify_mode = _CLIENT_AUTH[self.client_auth]
        return context

    def client_context(self) -> ssl.SSLContext:
        """The context this broker connects to other brokers' TLS listeners with; its key store,
        if any, is its client certificate."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._configure(context, ssl.Purpose.SERVER_AUTH)
        context.check_hostname = self.check_hostname
        context.verify_mode = ssl.CERT_REQUIRED
        return context

    def _has_keystore(self) -> bool:
        return bool(self.keystore_location or self.certificate_chain)

    def _configure(self, context: ssl.SSLContext, peers: ssl.Purpose) -> None:
        versions = sorted(_VERSIONS[p] for p in self.protocols)
        newest = versions[-1] if self.protocol == "TLS" else min(versions[-1], _VERSIONS[self.protocol])
        if newest < versions[0]:
            raise self._error("ssl.protocol", f"{self.protocol} is older than every version of ssl.enabled.protocols")
        context.minimum_version, context.maximum_version = versions[0], newest
        if self.cipher_suites:
            self._set_ciphers(context)
        self._load_truststore(context, peers)
        if self._has_keystore():
            self._load_keystore(context)

    def _set_ciphers(self, context: ssl.SSLContext) -> None:
        names = []
        for suite in self.cipher_suites:
            if suite in TLS13_SUITES:
                continue  # Python's ssl cannot narrow TLS 1.3's suites: OpenSSL offers its own set
            name = openssl_cipher_name(suite)
            try:
                ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(name)
            except ssl.SSLError:
                raise self._error("ssl.cipher.suites", f"{suite} is not a cipher suite OpenSSL knows") from None
            names.append(name)
        if names:
            context.set_ciphers(":".join(names))

    def _load_truststore(self, context: ssl.SSLContext, peers: ssl.Purpose) -> None:
        if self.truststore_location:
            try:
                context.load_verify_locations(cafile=self.truststore_location)
            except (OSError, ssl.SSLError) as exc:
                raise self._error("ssl.truststore.location", f"cannot read {self.truststore_location} as PEM "
                                  f"certificates: {_reason(exc)}") from None
        elif self.truststore_certificates:
            try:
                context.load_verify_locations(cadata=self.truststore_certificates)
            except ssl.SSLError as exc:
                raise self._error("ssl.truststore.certificates", f"not PEM certificates: {_reason(exc)}") from None
        else:
            context.load_default_certs(peers)

    def _load_keystore(self, context: ssl.SSLContext) -> None:
        if self.keystore_password:
            raise self._error("ssl.keystore.password", "a PEM key store has no store password (Kafka refuses it "
                              "too); give the private key's password as ssl.key.password")
        password = self.key_password or None
        if self.keystore_location:
            try:
                context.load_cert_chain(self.keystore_location, password=password)
            except (OSError, ssl.SSLError) as exc:
                raise self._error("ssl.keystore.location", f"cannot read {self.keystore_location} as a PEM private "
                                  f"key with its certificate chain: {_reason(exc)}") from None
            return
        if not self.private_key:
            raise self._error("ssl.keystore.key", "ssl.keystore.certificate.chain needs its private key "
                              "(ssl.keystore.key)")
        # ssl loads key material from files only: a private file, removed at once.
        with tempfile.TemporaryDirectory(prefix="minikafka-tls-") as private:
            path = os.path.join(private, "keystore.pem")
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
                f.write(self.private_key.strip() + "\n" + self.certificate_chain.strip() + "\n")
            try:
                context.load_cert_chain(path, password=password)
            except ssl.SSLError as exc:
                raise self._error("ssl.keystore.key", f"not a PEM private key matching "
                                  f"ssl.keystore.certificate.chain: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)


TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                          "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"})


def openssl_cipher_name(suite: str) -> str:
    """A TLS 1.2 suite's OpenSSL name from its IANA (Java) name, which Kafka's configs use:
    TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 -> ECDHE-RSA-AES256-GCM-SHA384. A name that is not an
    IANA one is taken to be OpenSSL's already."""
    match = re.fullmatch(r"TLS_(?:(\w+?)_)?WITH_(AES|CAMELLIA|ARIA)_(\d+)_(GCM|CBC|CCM)(?:_(SHA\d*))?", suite)
    if match is not None:
        exchange, cipher, bits, mode, digest = match.groups()
        parts = [] if exchange in (None, "RSA") else exchange.split("_")
        parts += [f"{cipher}{bits}"] + ([mode] if mode != "CBC" else [])
        parts += [digest] if digest else []
        return "-".join(parts)
    match = re.fullmatch(r"TLS_(\w+?)_WITH_CHACHA20_POLY1305_SHA256", suite)
    if match is not None:
        return "-".join([*match.group(1).split("_"), "CHACHA20", "POLY1305"])
    return suite
