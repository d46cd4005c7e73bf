"""The broker's security: each listener's TLS context and SASL settings, the settings this broker
connects to others with, the SCRAM credentials and the ACLs (caches of the security store), and
the administrative changes of both (KIP-554's credential APIs, the ACL APIs).

``BrokerSecurity`` is built from the configuration before the broker starts anything (a setting
that cannot be used is a ConfigError naming its key), given its store when the broker knows where
its metadata lives, and then gives every accepted connection its TLS context, a ``Session`` and the
principal of a client certificate (net/accept.py opens the connection's stream with them).
Event-loop thread only.
"""

from __future__ import annotations

import functools
import logging
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from minikafka.config.broker import BrokerConfig, ConfigError
from minikafka.security import scram
from minikafka.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AuthorizerSettings,
    ResourcePattern,
    binding_error,
    parse_super_users,
    select,
)
from minikafka.security.client import ClientSecurity
from minikafka.security.jaas import LOGIN_MODULES, JaasModule, parse_jaas_config
from minikafka.security.principal import NoMappingRule, principal_of_certificate
from minikafka.security.sasl import MECHANISMS, PLAIN, SaslLogin
from minikafka.security.scram import ScramCredential
from minikafka.security.session import Authorizer, ListenerSecurity, Session
from minikafka.security.stores import (
    AclChangeListener,
    Credentials,
    SecurityStore,
    ZkSecurityStore,
    desanitize,
)
from minikafka.security.tls import TlsSettings
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

Result = tuple[ErrorCode, str | None]


@dataclass(frozen=True)
class AclsFound:
    """DescribeAcls' or one DeleteAcls filter's answer: the bindings matched (and deleted)."""

    error: ErrorCode
    message: str | None
    bindings: list[AclBinding]


@dataclass(frozen=True)
class UserDescription:
    """DescribeUserScramCredentials' answer for one user: (mechanism id, iterations) per credential."""

    user: str
    error: ErrorCode
    message: str | None
    credentials: list[tuple[int, int]]


@dataclass(frozen=True)
class UserAltered:
    """AlterUserScramCredentials' answer for one user."""

    user: str
    error: ErrorCode
    message: str | None


class OpenFailed(ConnectionError):
    """An accepted connection that cannot be served (its TLS handshake failed, or its
    certificate maps to no principal)."""


@dataclass(frozen=True)
class UserAlteration:
    """One entry of AlterUserScramCredentials: an upsertion (with its credential) or a deletion."""

    user: str
    mechanism_id: int
    iterations: int = 0
    salt: bytes = b""
    salted_password: bytes = b""
    deletion: bool = False


class BrokerSecurity:
    """Owns the listeners' security settings, the client settings to other brokers, the SCRAM
    credential cache and the authorizer (its ACL cache), and changes both through the security
    store. The broker, its handlers and the sessions it opens use it, on the event loop only."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.listeners: dict[str, ListenerSecurity] = {}
        self._tls: dict[str, ssl.SSLContext] = {}
        self._tls_settings: dict[str, TlsSettings] = {}
        for listener in config.listeners():
            self._configure_listener(listener.name, listener.security_protocol)
        try:
            super_users = parse_super_users(config["super.users"])
        except ValueError as exc:
            raise ConfigError(f"invalid value {config['super.users']!r} for configuration 'super.users': {exc}") \
                from None
        self.authorizer = Authorizer(bool(config["authorizer.class.name"]),
                                     AuthorizerSettings(super_users, config["allow.everyone.if.no.acl.found"]))
        self.client = self._client_security(config.inter_broker_listener_name)
        # The controller's connections to the brokers' control-plane listener (KIP-291), when one
        # is named: that listener's TLS, and SASL with the inter-broker mechanism, as Kafka's.
        control_plane = config.control_plane_listener_name
        self.control_plane_client = self.client if control_plane is None else self._client_security(control_plane)
        self.credentials: Credentials = {}
        self.store: SecurityStore | None = None
        self._acl_changes: AclChangeListener | None = None

    # ---- configuration ------------------------------------------------------------------------
    def _configure_listener(self, name: str, protocol: str) -> None:
        config = self.config
        mechanisms: tuple[str, ...] = ()
        plain_users: dict[str, str] = {}
        if protocol in ("SSL", "SASL_SSL"):
            settings = TlsSettings.of_listener(config, name)
            self._tls_settings[name] = settings
            self._tls[name] = settings.server_context()
        if protocol.startswith("SASL_"):
            mechanisms = tuple(m.upper() for m in config.listener_value(name, "sasl.enabled.mechanisms"))
            key = config.listener_key(name, "sasl.enabled.mechanisms")
            unknown = [m for m in mechanisms if m not in MECHANISMS]
            if unknown or not mechanisms:
                raise ConfigError(f"invalid value {','.join(mechanisms)!r} for configuration {key!r} of SASL listener "
                                  f"{name}: minikafka implements {', '.join(MECHANISMS)}"
                                  + (f", not {', '.join(unknown)}" if unknown else "")
                                  + (" (GSSAPI is Kafka's default)" if "GSSAPI" in unknown else ""))
            if PLAIN in mechanisms:
                plain_users = self._plain_users(name)
        self.listeners[name] = ListenerSecurity(
            name, protocol, mechanisms, plain_users,
            max_receive_size=config.listener_value(name, "sasl.server.max.receive.size"),
            max_request_size=config["socket.request.max.bytes"],
            max_reauth_ms=config.listener_value(name, "connections.max.reauth.ms"),
            failure_delay_ms=config["connection.failed.authentication.delay.ms"])

    def _jaas(self, listener: str, mechanism: str) -> JaasModule | None:
        """The listener's JAAS config for a mechanism, if given."""
        text = self.config.jaas_config(listener, mechanism)
        if text is None:
            return None
        key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        try:
            module = parse_jaas_config(text)
        except ValueError as exc:
            raise ConfigError(f"invalid value for configuration {key!r}: {exc}") from None
        if module.login_module != LOGIN_MODULES[mechanism]:
            raise ConfigError(f"invalid value for configuration {key!r}: {mechanism} takes "
                              f"{LOGIN_MODULES[mechanism]}, not {module.login_module}")
        return module

    def _plain_users(self, listener: str) -> dict[str, str]:
        found = self._jaas(listener, PLAIN)
        key = f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
        if found is None or not found.plain_users:
            raise ConfigError(f"SASL listener {listener} enables PLAIN but {key!r} names no user "
                              '(user_<name>="<password>" options of PlainLoginModule)')
        return found.plain_users

    def _client_security(self, name: str) -> ClientSecurity:
        """How this broker connects to the others' listener ``name``: from that listener's own
        settings, as Kafka's brokers do."""
        role = "inter-broker" if name == self.config.inter_broker_listener_name else "control-plane"
        listener = self.listeners[name]
        tls = self._tls_settings[name].client_context() if name in self._tls_settings else None
        login = None
        if listener.sasl:
            mechanism = str(self.config["sasl.mechanism.inter.broker.protocol"]).upper()
            if mechanism not in listener.mechanisms:
                raise ConfigError(f"invalid value {mechanism!r} for configuration "
                                  f"'sasl.mechanism.inter.broker.protocol': the {role} listener {name} "
                                  f"enables {', '.join(listener.mechanisms)}")
            found = self._jaas(name, mechanism)
            credentials = None if found is None else found.credentials
            if credentials is None:
                raise ConfigError(f"the {role} listener {name} uses SASL {mechanism}: set username and "
                                  "password, this broker's own credentials, in "
                                  f"'listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config'")
            login = SaslLogin(mechanism, *credentials)
        return ClientSecurity(tls, login)

    # ---- the store ------------------------------------------------------------------------------
    async def start(self, store: SecurityStore) -> None:
        """Load the credentials and ACLs (and, in a cluster, follow their changes)."""
        self.store = store
        self.credentials = await store.credentials()
        for pattern, entries in (await store.acls()).items():
            self.authorizer.replace(pattern, entries)
        if isinstance(store, ZkSecurityStore):
            self._acl_changes = AclChangeListener(store, self.authorizer.replace)
            await self._acl_changes.start()
        log.info("security: %d SCRAM user(s), %d ACL(s)%s", len(self.credentials),
                 sum(len(e) for e in self.authorizer.acls.values()),
                 "; ACL authorization on" if self.authorizer.enabled else "")

    async def reload(self) -> None:
        """Read everything again (changes may have been missed while the broker was starting)."""
        assert self.store is not None
        self.credentials = await self.store.credentials()
        self.authorizer.acls = dict(await self.store.acls())

    async def new_session(self) -> None:
        """A cluster broker is back in a new ZooKeeper session: its watches were lost with the old one."""
        await self.reload()
        if self._acl_changes is not None:
            await self._acl_changes.start()

    async def user_changed(self, sanitized: str) -> None:
        """/config/users/<user> changed (a config change notification)."""
        if isinstance(self.store, ZkSecurityStore):
            found = await self.store.user_credentials(sanitized)
            self._set_user(desanitize(sanitized), found or {})

    def _set_user(self, user: str, credentials: dict[str, ScramCredential]) -> None:
        if credentials:
            self.credentials[user] = credentials
        else:
            self.credentials.pop(user, None)

    async def stop(self) -> None:
        if self._acl_changes is not None:
            await self._acl_changes.stop()

    def credential(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.credentials.get(user, {}).get(mechanism)

    # ---- connections ----------------------------------------------------------------------------
    # What an accepted connection gets from security: net/accept.py opens the stream with these.
    def session(self, listener: str, client_host: str) -> Session:
        """A new session for a connection accepted on ``listener``."""
        return Session(self.listeners[listener], client_host, self.authorizer, self.credential)

    def tls_context(self, listener: str) -> ssl.SSLContext | None:
        """The TLS context of ``listener``; None on a listener without TLS."""
        return self._tls.get(listener)

    def authenticate_certificate(self, listener: str, session: Session, certificate: dict[str, Any] | None) -> None:
        """On a TLS listener without SASL the client's certificate names the session's principal
        (OpenFailed when no mapping rule matches it)."""
        if self.listeners[listener].sasl:
            return
        try:
            session.principal = principal_of_certificate(certificate, self._tls_settings[listener].mapping_rules)
        except NoMappingRule as exc:
            raise OpenFailed(str(exc)) from None

    # ---- ACLs -----------------------------------------------------------------------------------
    def _acls_off(self) -> Result | None:
        if not self.authorizer.enabled:
            return ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker"
        return None

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[Result]:
        off = self._acls_off()
        if off is not None:
            return [off] * len(bindings)
        assert self.store is not None
        results: list[Result] = []
        for binding in bindings:
            error = binding_error(binding)
            if error is not None:
                results.append((ErrorCode.INVALID_REQUEST, error))
                continue
            entries = await self.store.update_acls(binding.pattern, functools.partial(_add, binding.entry))
            self.authorizer.replace(binding.pattern, entries)
            log.info("ACL created: %s", binding)
            results.append((ErrorCode.NONE, None))
        return results

    def describe_acls(self, wanted: AclBindingFilter) -> AclsFound:
        off = self._acls_off()
        if off is not None:
            return AclsFound(*off, [])
        error = wanted.error()
        if error is not None:
            return AclsFound(ErrorCode.INVALID_REQUEST, error, [])
        return AclsFound(ErrorCode.NONE, None, select(self.authorizer.acls, wanted))

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclsFound]:
        off = self._acls_off()
        if off is not None:
            return [AclsFound(*off, [])] * len(filters)
        assert self.store is not None
        results = []
        for wanted in filters:
            error = wanted.error()
            if error is not None:
                results.append(AclsFound(ErrorCode.INVALID_REQUEST, error, []))
                continue
            matched = select(self.authorizer.acls, wanted)
            by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
            for binding in matched:
                by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
            for pattern, gone in by_pattern.items():
                entries = await self.store.update_acls(pattern, functools.partial(_remove, frozenset(gone)))
                self.authorizer.replace(pattern, entries)
            for binding in matched:
                log.info("ACL deleted: %s", binding)
            results.append(AclsFound(ErrorCode.NONE, None, matched))
        return results

    # ---- SCRAM credentials (KIP-554) ------------------------------------------------------------
    def describe_users(self, users: Sequence[str] | None) -> list[UserDescription]:
        """Each user asked for (every user with a credential when none is)."""
        wanted = list(users) if users else sorted(self.credentials)
        results = []
        for name in dict.fromkeys(wanted):
            if wanted.count(name) > 1:
                results.append(UserDescription(
                    name, ErrorCode.DUPLICATE_RESOURCE,
                    "Cannot describe SCRAM credentials for the same user twice in a single request", []))
                continue
            found = self.credentials.get(name)
            if not found:
                results.append(UserDescription(name, ErrorCode.RESOURCE_NOT_FOUND,
                                               f"Attempt to describe a user credential that does not exist: {name}",
                                               []))
                continue
            results.append(UserDescription(name, ErrorCode.NONE, None, [(scram.MECHANISM_IDS[m], c.iterations)
                                                                         for m, c in sorted(found.items())]))
        return results

    async def alter_users(self, alterations: Sequence[UserAlteration]) -> list[UserAltered]:
        """Apply the deletions and upsertions, all of one user at once; one result per user."""
        assert self.store is not None
        users = list(dict.fromkeys(a.user for a in alterations))
        errors: dict[str, Result] = {}
        seen: set[tuple[str, int]] = set()
        for alteration in alterations:
            key = (alteration.user, alteration.mechanism_id)
            error = _alteration_error(alteration, self.credentials, key in seen)
            seen.add(key)
            if error is not None and alteration.user not in errors:
                errors[alteration.user] = error
        results = []
        for name in users:
            if name in errors:
                results.append(UserAltered(name, *errors[name]))
                continue
            mine = [a for a in alterations if a.user == name]
            updated = await self.store.update_credentials(name, functools.partial(_altered, mine))
            self._set_user(name, updated)
            log.info("SCRAM credentials of user %s are now: %s", name, ", ".join(sorted(updated)) or "none")
            results.append(UserAltered(name, ErrorCode.NONE, None))
        return results


def _alteration_error(alteration: UserAlteration, credentials: Credentials, repeated: bool) -> Result | None:
    if not alteration.user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    mechanism = scram.MECHANISMS_BY_ID.get(alteration.mechanism_id)
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {alteration.mechanism_id}"
    if repeated:
        return ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
    if alteration.deletion:
        if mechanism not in credentials.get(alteration.user, {}):
            return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        return None
    iterations = scram.iteration_error(alteration.iterations)
    if iterations is not None:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, iterations
    if not alteration.salt or not alteration.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None


def _add(entry: AccessControlEntry, current: frozenset[AccessControlEntry]) -> frozenset[AccessControlEntry]:
    return current | {entry}


def _remove(gone: frozenset[AccessControlEntry], current: frozenset[AccessControlEntry]
            ) -> frozenset[AccessControlEntry]:
    return current - gone


def _altered(alterations: Sequence[UserAlteration], current: dict[str, ScramCredential]) -> dict[str, ScramCredential]:
    updated = dict(current)
    for alteration in alterations:
        mechanism = scram.MECHANISMS_BY_ID[alteration.mechanism_id]
        if alteration.deletion:
            updated.pop(mechanism, None)
        else:
            updated[mechanism] = scram.credential_from_salted(mechanism, alteration.salted_password,
                                                              alteration.salt, alteration.iterations)
    return updated

