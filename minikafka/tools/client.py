"""The small blocking client the ``minikafka`` tools share, built on this repository's ``protocol``
package (so the tools need nothing the broker does not; kafka-python is a test dependency only).

``Connection`` is one socket to one broker, asking its API versions once; ``Cluster`` is what a
bootstrap broker's Metadata says (brokers, replicas and leaders per partition) with a connection
per broker opened on first use.  Everything an operator must fix in what was typed is a
``ToolError`` whose message says what (exit 2); a broker that cannot be reached or refuses the
request is a ``RequestFailed`` (exit 1), a refused login an ``AuthenticationFailed`` (exit 4).
``ClientSecurity`` is a ``--command-config`` file's TLS and SASL settings (Kafka's client keys),
for a broker's secured listeners.
"""

from __future__ import annotations

import argparse
import socket
import ssl
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from minikafka.config.broker import read_properties
from minikafka.security.client import SaslLoginFailed, login_steps
from minikafka.security.jaas import parse_jaas_config
from minikafka.security.sasl import SaslLogin
from protocol import SUPPORTED_APIS, ErrorCode, encode_request, parse_response

(METADATA, DESCRIBE_CONFIGS, API_VERSIONS, ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS, INCREMENTAL_ALTER_CONFIGS,
 ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS) = 3, 32, 18, 34, 35, 44, 45, 46
BROKER_RESOURCE = 4
# Private tagged fields of DescribeLogDirs v2+ (minikafka's; Kafka clients skip them): on a partition
# entry, why the replica's last move failed; on a log dir, an id of its file system.
MOVE_ERROR_TAG = 10_000
FILE_SYSTEM_TAG = 10_001


_ALL_TOPICS = {"topics": None, "allow_auto_topic_creation": False}


class ToolError(Exception):
    """Something the operator must fix in an option or a file; the message says what, and nothing
    was changed."""

    exit_code = 2


class RequestFailed(ToolError):
    """The brokers could not be reached, or refused what was asked; the message says why."""

    exit_code = 1


class AuthenticationFailed(RequestFailed):
    """The broker refused the login of --command-config (a wrong password or an unknown user)."""

    exit_code = 4


# The exit codes of every minikafka tool (README: "Exit codes").
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_AUTHENTICATION = 0, 1, 2, 4


@dataclass(frozen=True)
class ClientSecurity:
    """A ``--command-config`` file: Kafka's client keys security.protocol, ssl.truststore.location
    (PEM), ssl.keystore.location (PEM key and certificate), ssl.key.password,
    ssl.endpoint.identification.algorithm, sasl.mechanism and sasl.jaas.config (username and
    password of PlainLoginModule or ScramLoginModule)."""

    tls: ssl.SSLContext | None = None
    login: SaslLogin | None = None
    certificate: bool = False  # the TLS context holds a client certificate (ssl.keystore.location)

    @classmethod
    def from_file(cls, path: str | None) -> ClientSecurity:
        if path is None:
            return cls()
        try:
            with open(path, encoding="utf-8") as f:
                props = read_properties(f.read(), path)
        except OSError as exc:
            raise ToolError(f"cannot read --command-config {path}: {exc.strerror}") from None
        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ToolError(f"{path}: security.protocol {protocol!r} is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
        tls = _tls_context(props, path) if protocol.endswith("SSL") else None
        login = None
        if protocol.startswith("SASL_"):
            mechanism = props.get("sasl.mechanism", "GSSAPI").upper()
            if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                raise ToolError(f"{path}: sasl.mechanism {mechanism} is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
            try:
                credentials = parse_jaas_config(props.get("sasl.jaas.config", "")).credentials
            except ValueError as exc:
                raise ToolError(f"{path}: sasl.jaas.config: {exc}") from None
            if credentials is None:
                raise ToolError(f'{path}: sasl.jaas.config needs username="..." password="..."')
            login = SaslLogin(mechanism, *credentials)
        return cls(tls, login, bool(tls is not None and props.get("ssl.keystore.location")))


def add_command_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--command-config", metavar="FILE",
                        help="client settings for a secured listener, Kafka's keys (security.protocol, "
                             "ssl.truststore.location, sasl.mechanism, sasl.jaas.config, ...)")


def _tls_context(props: Mapping[str, str], path: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=props.get("ssl.truststore.location") or None)
    context.check_hostname = props.get("ssl.endpoint.identification.algorithm", "https").lower() == "https"
    keystore = props.get("ssl.keystore.location")
    try:
        if keystore:
            context.load_cert_chain(keystore, password=props.get("ssl.key.password") or None)
    except (OSError, ssl.SSLError) as exc:
        raise ToolError(f"{path}: ssl.keystore.location {keystore}: {exc}") from None
    return context


class Connection:
    """One blocking connection to one broker; the versions it speaks are asked once, then (with
    SASL) it logs in."""

    def __init__(self, host: str, port: int, client_id: str = "minikafka-tools", timeout: float = 15.0,
                 security: ClientSecurity | None = None) -> None:
        self.address = f"{host}:{port}"
        self.client_id = client_id
        security = security or ClientSecurity()
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
            if security.tls is not None:
                self.sock = security.tls.wrap_socket(self.sock, server_hostname=host)
        except ssl.SSLError as exc:
            self.sock.close()
            raise RequestFailed(f"cannot connect to {self.address}: {_tls_refusal(exc, security)}") from None
        except OSError as exc:
            raise RequestFailed(f"cannot connect to {self.address}: {exc.strerror or exc}") from None
        self.security = security
        self._correlation_id = 0
        try:
            response = self._send(API_VERSIONS, 0, {})
        except RequestFailed:
            self.sock.close()
            raise
        if response.error_code:
            raise RequestFailed(f"{self.address} refused ApiVersions: {ErrorCode(response.error_code).name}")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        if security.login is not None:
            self._login(security.login)

    def _login(self, login: SaslLogin) -> None:
        steps = login_steps(login)
        try:
            request = next(steps)
            while True:
                request = steps.send(self._send(*request))
        except StopIteration:
            return
        except SaslLoginFailed as exc:
            raise AuthenticationFailed(f"{self.address}: {exc}") from None

    def close(self) -> None:
        self.sock.close()

    def version_of(self, api_key: int) -> int:
        ours = SUPPORTED_APIS[api_key]
        low, high = self.versions.get(api_key, (0, -1))
        version = min(high, ours.max_version)
        if version < max(low, ours.min_version):
            raise ToolError(f"{self.address} does not speak {ours.name} (needed here)")
        return version

    def request(self, api_key: int, body: dict[str, Any], max_version: int | None = None) -> tuple[int, Any]:
        """Send at the newest version both sides speak (at most ``max_version``, for a request
        whose newer versions change its shape); returns (version, response body)."""
        version = self.version_of(api_key)
        if max_version is not None:
            version = min(version, max_version)
        return version, self._send(api_key, version, body)

    def _send(self, api_key: int, version: int, body: Mapping[str, Any]) -> Any:
        self._correlation_id += 1
        try:
            self.sock.sendall(encode_request(api_key, version, self._correlation_id, self.client_id, body))
            (size,) = struct.unpack(">i", self._recv(4))
            payload = self._recv(size)
        except ssl.SSLError as exc:
            raise RequestFailed(f"connection to {self.address} failed: {_tls_refusal(exc, self.security)}") from None
        except OSError as exc:
            raise RequestFailed(f"connection to {self.address} failed: {exc.strerror or exc}; "
                                f"{_unanswered_hint(self.security)}") from None
        correlation_id, response = parse_response(api_key, version, payload)
        if correlation_id != self._correlation_id:
            raise RequestFailed(f"{self.address} answered request {correlation_id}, not {self._correlation_id}")
        return response

    def _recv(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)


def _failure(summary: str, errors: list[RequestFailed]) -> RequestFailed:
    """One error for several brokers' failures; a refused login stays one (its own exit code)."""
    kind = AuthenticationFailed if errors and all(isinstance(e, AuthenticationFailed) for e in errors) \
        else RequestFailed
    return kind(summary + ": " + "; ".join(str(e) for e in errors))


def _tls_refusal(exc: ssl.SSLError, security: ClientSecurity) -> str:
    """An OpenSSL failure in an operator's words (its reason names are OpenSSL's constants)."""
    reason = exc.reason or ""
    if reason == "CERTIFICATE_VERIFY_FAILED":
        return (f"the broker's certificate is not trusted ({getattr(exc, 'verify_message', '') or exc}); "
                "set ssl.truststore.location to the authority that signed it")
    if reason == "WRONG_VERSION_NUMBER":
        return "the listener does not speak TLS; use security.protocol=PLAINTEXT or SASL_PLAINTEXT"
    if "CERTIFICATE_REQUIRED" in reason or isinstance(exc, ssl.SSLEOFError) or "UNEXPECTED_EOF" in reason:
        # A broker that refuses the handshake after it (TLS 1.3 checks the client's certificate
        # last) may close without an alert: all this side sees is the end of the stream.
        if not security.certificate:
            return ("the broker ended the TLS session: it requires a client certificate (ssl.client.auth="
                    "required); set ssl.keystore.location to a PEM file with this client's key and certificate")
        return "the broker ended the TLS session: it refused this client's certificate (its log says why)"
    return f"TLS failed: {exc}"


def _unanswered_hint(security: ClientSecurity) -> str:
    """Why a broker closes a connection instead of answering: a secured listener reached without
    its security (TLS without TLS, SASL without a login), or a certificate it needs and lacks."""
    hints = []
    if security.tls is None:
        hints.append("a TLS listener (SSL, SASL_SSL) needs security.protocol and ssl.truststore.location")
    elif security.login is None:
        hints.append("a listener that requires a client certificate needs ssl.keystore.location")
    if security.login is None:
        hints.append("a SASL listener (SASL_PLAINTEXT, SASL_SSL) needs security.protocol, sasl.mechanism "
                     "and sasl.jaas.config")
    if not hints:
        return "check the listener's security.protocol"
    return "; ".join(hints) + " in --command-config"


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    found = []
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ToolError(f"--bootstrap-server: {address!r} is not HOST:PORT")
        found.append((host, int(port)))
    return found


@dataclass
class Cluster:
    """The brokers and partitions a bootstrap broker knows, and a connection per broker."""

    brokers: dict[int, tuple[str, int]]
    partitions: dict[tuple[str, int], list[int]]  # -> replica broker ids
    leaders: dict[tuple[str, int], int] = field(default_factory=dict)  # -> leader id (-1: none)
    controller: int = -1  # Metadata's controller id (-1: none known)
    client_id: str = "minikafka-tools"
    connections: dict[int, Connection] = field(default_factory=dict)
    security: ClientSecurity = field(default_factory=ClientSecurity)

    @classmethod
    def discover(cls, bootstrap: str, client_id: str = "minikafka-tools",
                 security: ClientSecurity | None = None) -> Cluster:
        errors = []
        security = security or ClientSecurity()
        for host, port in _addresses(bootstrap):
            try:
                connection = Connection(host, port, client_id, security=security)
            except RequestFailed as exc:
                errors.append(exc)
                continue
            try:
                found = cls({}, {}, client_id=client_id, security=security)
                found._load(connection)
            except BaseException:
                connection.close()
                raise
            # Kept for the requests any broker answers, so a broker that is slow to answer is not
            # tried first when the bootstrap one answers.
            answered = [b for b, address in found.brokers.items() if address == (host, port)]
            if answered:
                found.connections[answered[0]] = connection
            else:
                connection.close()
            return found
        raise _failure("no bootstrap server answered", errors)

    def _load(self, connection: Connection) -> None:
        self._apply(connection.request(METADATA, _ALL_TOPICS)[1])

    def _apply(self, metadata: Any) -> None:
        self.brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
        healthy = [t for t in metadata.topics if t.error_code == 0]
        self.partitions = {(t.name, p.partition_index): list(p.replica_nodes) for t in healthy for p in t.partitions}
        self.leaders = {(t.name, p.partition_index): p.leader_id for t in healthy for p in t.partitions}
        self.controller = metadata.controller_id

    def refresh(self) -> None:
        """Read Metadata again (leaders and replicas change while partitions move)."""
        self._apply(self.ask_any(METADATA, _ALL_TOPICS))

    def topics(self) -> set[str]:
        return {topic for topic, _ in self.partitions}

    def connection(self, broker: int) -> Connection:
        if broker not in self.connections:
            if broker not in self.brokers:
                raise ToolError(f"broker {broker} is not in the cluster (brokers: {sorted(self.brokers)})")
            host, port = self.brokers[broker]
            self.connections[broker] = Connection(host, port, self.client_id, security=self.security)
        return self.connections[broker]

    def any_connection(self) -> Connection:
        """A connection to some live broker (for requests any broker forwards to the controller)."""
        errors = []
        for broker in [*self.connections, *sorted(self.brokers)]:
            try:
                return self.connection(broker)
            except RequestFailed as exc:
                errors.append(exc)
        raise _failure("no broker answered", errors)

    def ask_any(self, api_key: int, body: dict[str, Any]) -> Any:
        """The response of the first broker that answers (for requests any broker serves or
        forwards to the controller); a broker that fails is dropped and the next one asked."""
        errors = []
        for broker in [*self.connections, *sorted(self.brokers)]:
            try:
                return self.connection(broker).request(api_key, body)[1]
            except RequestFailed as exc:
                errors.append(exc)
                self._drop(broker)
        raise _failure("no broker answered", errors)

    def _drop(self, broker: int) -> None:
        """Forget a broker's connection that failed (the next request opens a new one)."""
        dropped = self.connections.pop(broker, None)
        if dropped is not None:
            dropped.close()

    def ask_controller(self, api_key: int, body: dict[str, Any]) -> Any:
        """The controller's response, for the requests Kafka serves there alone in ZooKeeper mode
        (CreateTopics, CreatePartitions, DeleteTopics, Alter- and ListPartitionReassignments): a
        Kafka broker that is not the controller answers them NOT_CONTROLLER, where a minikafka
        broker forwards them, so in a cluster of both kinds they go where Kafka's AdminClient
        sends them. Metadata is read again when the controller known cannot be reached (it stopped,
        or moved); with none known, any broker is asked."""
        try:
            return self._ask_known_controller(api_key, body)
        except RequestFailed:
            self.refresh()
            return self._ask_known_controller(api_key, body)

    def _ask_known_controller(self, api_key: int, body: dict[str, Any]) -> Any:
        if self.controller not in self.brokers:
            return self.ask_any(api_key, body)
        try:
            return self.connection(self.controller).request(api_key, body)[1]
        except RequestFailed:
            self._drop(self.controller)
            raise

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()
        self.connections.clear()

    def describe(self, broker: int) -> list[Any]:
        """DescribeLogDirs of every dir of ``broker``."""
        _, response = self.connection(broker).request(DESCRIBE_LOG_DIRS, {"topics": None})
        return list(response.results)

    def broker_configs(self, broker: int, keys: list[str]) -> dict[str, str]:
        """The values ``broker`` has for ``keys`` (DescribeConfigs); a key it does not know is left out."""
        body = {"resources": [{"resource_type": BROKER_RESOURCE, "resource_name": str(broker),
                               "configuration_keys": keys}], "include_synonyms": False}
        _, response = self.connection(broker).request(DESCRIBE_CONFIGS, body)
        (result,) = response.results
        if result.error_code:
            raise ToolError(f"broker {broker} did not describe its configs: {ErrorCode(result.error_code).name}"
                            + (f" ({result.error_message})" if result.error_message else ""))
        return {entry.name: entry.value for entry in result.configs if entry.value is not None}


def move_error(partition: Any) -> str | None:
    """Why the last move of a DescribeLogDirs partition entry failed, if the broker said."""
    return _private_tag(partition, MOVE_ERROR_TAG)


def file_system(result: Any) -> str | None:
    """The file system of a DescribeLogDirs result's dir, if the broker said."""
    return _private_tag(result, FILE_SYSTEM_TAG)


def _private_tag(entry: Any, tag: int) -> str | None:
    raw = (entry.get("_unknown_tagged_fields") or {}).get(tag)
    return raw.decode("utf-8", "replace") if raw is not None else None


Action = Callable[[argparse.Namespace, TextIO, TextIO], int]


def run_action(actions: Mapping[str, Action], choose: Callable[[argparse.Namespace], str],
               args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run the action ``choose`` picks; a ToolError is printed and exits with its code."""
    try:
        action = choose(args)
        if not args.bootstrap_server:
            raise ToolError(f"--{action} needs --bootstrap-server HOST:PORT")
        return actions[action](args, out, err)
    except ToolError as exc:
        err.write(f"error: {exc}\n")
        return exc.exit_code
